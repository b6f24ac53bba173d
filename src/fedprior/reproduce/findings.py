"""A table's findings: its controls checked, and each claim of the paper given a verdict, from the cells' seeds.

**Controls** are checked in every column the run has: for a
:class:`~fedprior.reproduce.tables.Control`, the mean over seeds of ``above - below`` must be
at least the margin; for a :class:`~fedprior.reproduce.tables.MeasuredControl`, the value
measured in the column's setting (``tables.measure_controls``) must be at least its floor.
Each control gates the claims its question concerns (``gates``: rows, or claims by name;
``PaperTable.gating``). Where one fails, the claims it gates in that column get no verdict
(``setting not informative``, ``blanked_by`` naming the control) and the others keep theirs;
table.md says so at its top (``setting not informative at <column> for K of N claim(s)
there (the ones it gates): <condition> failed: X vs Y``). Where a control was not run (its rows
left out by ``--rows``, a measured control not measured), the claims it gates there get
verdicts, marked ``controls not run``.

**Claims** (:class:`~fedprior.reproduce.tables.Claim`) are tested on the paired
differences over the seeds both rows have (a seed plan may give one cell more), ``d_s = better_s - worse_s`` (the run of seed s of both rows: the
same partition and client sampling wherever the two rows share those settings), or
``d_s = worse_s - better_s`` for a cost (``higher_is_better=False``, e.g. bits sent: the
better row is claimed to spend less), so that a positive mean favours the claim in either
case; each finding names its difference (``paired_difference``: "ROW - ROW"). With
their mean, sample standard deviation (n - 1) and the 95% interval of the mean from
Student's t with n - 1 degrees of freedom: ``mean +- t(0.975, n - 1) * sd / sqrt(n)``.
The verdict:

- **holds**: the interval lies above 0;
- **reversed**: it lies below 0;
- **not resolved**: it spans 0, or there is one seed (no interval: ``one seed: no interval``).

**Power**: beside its interval each finding gives ``detectable``, the smallest paired mean difference its
n seeds detect with 80% power at its observed sd (two-sided alpha 0.05, noncentral t:
:mod:`fedprior.results.power`), ``gap``, the paper's difference for the claim (``Claim.gap``, else
the difference of the paper's printed numbers), and ``seeds_needed``, the seeds that gap needs at that sd.

A claim whose rows or column the run does not have (``--rows``, ``--columns``, a column
the embedded grid leaves out) is listed as ``not run``.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from fedprior.reproduce.tables import MeasuredControl
from fedprior.results.paired import paired, verdict
from fedprior.results.paired import t_quantile as t_quantile  # re-exported: the statistics live in results (compare uses them too)
from fedprior.results.power import detectable_effect, seeds_needed

if TYPE_CHECKING:
    from fedprior.reproduce.tables import Control, PaperTable

NOT_INFORMATIVE, NOT_RUN = "setting not informative", "not run"
PASSED, FAILED = "passed", "failed"
ONE_SEED = "one seed: no interval"
UNGATED = "no control gates it"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def common(a: list[float], b: list[float]) -> tuple[list[float], list[float]]:
    """The seeds both rows have (seed 0 first): a cell given more seeds by a seed plan is paired on the other's."""
    n = min(len(a), len(b))
    return list(a[:n]), list(b[:n])


def measured_control(control: MeasuredControl, column: str, value: tuple[float, str] | None) -> dict[str, Any]:
    """A measured control's entry in ``column``: passed where the value reaches the floor, failed below it, not run unmeasured."""
    entry: dict[str, Any] = {"condition": control.condition, "column": column, "kind": "measured", "margin": control.at_least, "note": control.note}
    if value is None:
        return {**entry, "status": NOT_RUN, "missing": ["not measured"]}
    number, what = value
    return {**entry, "value": _round(number), "measured": what, "status": PASSED if number >= control.at_least - 1e-9 else FAILED}


def evaluate(
    table: PaperTable, results: list[dict[str, Any]], embedded: bool, measurements: dict[tuple[str, str], tuple[float, str]] | None = None
) -> dict[str, Any]:
    """The controls per column, the claims with their verdicts, and the notices for the top of table.md.

    ``results``: :func:`~fedprior.reproduce.tables.aggregate_table`'s cells (``metrics[m]["values"]``
    per seed, seed 0 first); ``measurements``: :func:`~fedprior.reproduce.tables.measure_controls`'s
    values, (condition, column) -> (value, what was measured).
    """
    cells = {(r["row"], r["column"]): r for r in results}
    columns = list(dict.fromkeys(r["column"] for r in results))

    def values(row: str, column: str, metric: str) -> list[float] | None:
        cell = cells.get((row, column))
        return None if cell is None or metric not in cell["metrics"] else cell["metrics"][metric]["values"]

    def paper(row: str, column: str, metric: str) -> float | None:
        cell = cells.get((row, column))
        return None if cell is None or metric not in cell["metrics"] else cell["metrics"][metric].get("paper")

    def row_control(control: Control, column: str) -> tuple[dict[str, Any], str]:
        """A control on two rows in ``column``: its entry, and the numbers a failure notice quotes."""
        metric = control.metric or table.metrics[0]
        above, below = values(control.above, column, metric), values(control.below, column, metric)
        entry: dict[str, Any] = {"condition": control.condition, "column": column, "metric": metric, "margin": control.margin, "note": control.note}
        if above is None or below is None:
            lacking = [r for r, v in ((control.above, above), (control.below, below)) if v is None]
            return {**entry, "status": NOT_RUN, "missing": lacking}, ""
        above, below = common(above, below)
        difference = float(np.mean(np.subtract(above, below)))
        passed = difference >= control.margin - 1e-9
        entry.update(above=_round(float(np.mean(above))), below=_round(float(np.mean(below))), difference=_round(difference))
        measured = f"{entry['above']:.1f} vs {entry['below']:.1f}"
        if control.settled_within is not None:
            moved = values(control.above, column, "late_change")  # present: the row ran, and the table has the metric
            late = float(np.mean(np.abs(moved))) if moved else math.inf
            entry["late_change"] = _round(late)
            passed = passed and late < control.settled_within
            measured += f", {control.above} moved {late:.2f} points over its last 10% of rounds"
        return {**entry, "status": PASSED if passed else FAILED}, measured

    controls: list[dict[str, Any]] = []
    failures: dict[tuple[str, str], str] = {}  # (condition, column) -> the numbers its notice quotes
    status: dict[tuple[str, str], str] = {}  # (condition, column) -> passed, failed or not run
    not_run: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for control in table.controls:
        for column in columns:
            if isinstance(control, MeasuredControl):
                entry = measured_control(control, column, (measurements or {}).get((control.condition, column)))
                measured = entry.get("measured", "")
            else:
                entry, measured = row_control(control, column)
            controls.append({**entry, "gates": list(control.gates)})
            status[control.condition, column] = entry["status"]
            if entry["status"] == FAILED:
                failures[control.condition, column] = measured
            elif entry["status"] == NOT_RUN:
                not_run.setdefault((control.condition, tuple(entry["missing"])), []).append(column)

    findings = []
    for claim in table.claims:
        metric = claim.metric or table.metrics[0]
        column = table.column_in_setting(claim.column, embedded)
        difference = f"{claim.better} - {claim.worse}" if claim.higher_is_better else f"{claim.worse} - {claim.better}"
        gating = [c.condition for c in table.gating(claim)]
        entry = {
            "claim": claim.name,
            "better": claim.better,
            "worse": claim.worse,
            "column": column or claim.column,
            "metric": metric,
            "paired_difference": difference,
            "source": claim.source,
            "gated_by": gating,
        }
        if column is None or column not in columns:
            findings.append({**entry, "verdict": NOT_RUN, "note": "not run: its column is not in this run"})
            continue
        better, worse = values(claim.better, column, metric), values(claim.worse, column, metric)
        if better is None or worse is None:
            absent = [r for r, v in ((claim.better, better), (claim.worse, worse)) if v is None]
            unmeasured = [r for r in absent if (r, column) in cells]  # ran, but does not produce the claim's metric
            note = f"not run: row(s) {', '.join(absent)}" if not unmeasured else f"no {metric} in row(s) {', '.join(unmeasured)}"
            findings.append({**entry, "verdict": NOT_RUN, "note": note})
            continue
        sign = 1.0 if claim.higher_is_better else -1.0
        better, worse = common(better, worse)
        stats = paired([sign * (b - w) for b, w in zip(better, worse, strict=True)])
        notes = [ONE_SEED] if stats.n < 2 else []
        outcome = verdict(stats)
        blanked = [c for c in gating if status.get((c, column)) == FAILED]
        if blanked:
            outcome = NOT_INFORMATIVE
            notes += [f"blanked by: {c}" for c in blanked]
        elif any(status.get((c, column)) == NOT_RUN for c in gating):
            notes.append("controls not run")
        elif table.controls and not gating:
            notes.append(UNGATED)
        paper_better, paper_worse = paper(claim.better, column, metric), paper(claim.worse, column, metric)
        printed = None if paper_better is None or paper_worse is None else sign * (paper_better - paper_worse)
        gap = claim.gap if claim.gap is not None else printed
        findings.append(
            {
                **entry,
                **{k: _round(v) if isinstance(v, float) else v for k, v in asdict(stats).items()},
                "verdict": outcome,
                "note": "; ".join(notes),
                "blanked_by": blanked,
                "better_mean": _round(float(np.mean(better))),
                "worse_mean": _round(float(np.mean(worse))),
                "paper": _round(printed),
                "detectable": _round(detectable_effect(stats.n, stats.sd)),
                "gap": _round(gap),
                "seeds_needed": seeds_needed(gap, stats.sd),
            }
        )

    notices = []
    for (condition, column), measured in failures.items():
        there = [f for f in findings if f["column"] == column and f["verdict"] != NOT_RUN]
        count = sum(condition in f["blanked_by"] for f in there)
        if count:
            notices.append(
                f"setting not informative at {column} for {count} of {len(there)} claim(s) there (the ones it gates): {condition} failed: {measured}"
            )
        else:
            notices.append(f"control failed at {column}, where it gates no claim: {condition} failed: {measured}")
    for (condition, missing), where in not_run.items():
        why = "not measured" if missing == ("not measured",) else f"row(s) {', '.join(missing)} not run"
        notices.append(f"control not run at {', '.join(where)}: {condition} ({why}); the verdicts it gates there are not backed by it")
    return {"controls": controls, "findings": findings, "notices": notices}
