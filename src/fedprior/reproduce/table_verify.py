"""``fedprior table NAME --verify``: rerun a committed table's kept cells and compare each with what was committed.

A kept cell is ``CELLS/NAME/ROW--COLUMN--seedN/`` holding the ``config.toml`` and
``result.json`` of a finished run (``benchmarks/paper_tables.py --keep``). Each chosen one is
rerun from its ``config.toml`` (on the device it ran on, one thread, in a scratch folder: the
committed cells are only read) and said to be:

- ``identical``: every number of the committed summary is the same to the bit (and, where the
  summary has them, every round's digest and the final state's, ``results/fingerprints.py``);
- ``differs``: with the first round whose history differs, and the table's numbers both ways;
- ``other machine``: the machine it was recorded on is of another kind than this one (another
  CPU capability, AVX2 against AVX512, or another CPU model): float kernels round differently
  there, so the bits are not expected to match; the cell is rerun all the same and its line
  gives the table's numbers both ways, their difference and the first round that differs
  (or says the rerun is identical to the bit). A cell that ran on a GPU this machine lacks
  is not rerun;
- ``not kept``: no committed result for it.

Where a rerun is not identical, :func:`claim_checks` recomputes the verdict of each claim
(``reproduce/findings.py``) that concerns a rerun cell, on the committed seeds and again with
the rerun seeds in place of the committed ones: on another machine kind the bits are not
expected to match, and what can be checked is that the differences are small and every verdict
stays the same (docs/runs.md, "Other machine").

A cell reruns with its committed ``run.threads``, ``run.workers`` and
``run.concurrent_clients``: their combination can change the last bits (seen: a cell run with
threads 0 and workers 0, rerun with 1 and 1, differs from round 1). So the reruns go ``jobs``
at once only when every one ran as a table's process runs a cell (all three 1, as
``--jobs`` above 1 runs them), else one after the other in this process.

Where the cell's ``result.json`` does not say which machine ran it (cells committed before it
did), the table's record ``CELLS/../tables/NAME.json`` does, for the machine of the table's
last run: a table continued on several machines is known to it only by its last.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprior.experiments.table_runs import REUSED, cell_folder
from fedprior.reproduce.tables import cell_value
from fedprior.results.fingerprints import first_difference, numbers, same
from fedprior.results.json_file import read_json

if TYPE_CHECKING:
    from fedprior.experiments.cell import Cell
    from fedprior.experiments.config import ExperimentConfig
    from fedprior.experiments.table_runs import CellRun
    from fedprior.reproduce.tables import PaperTable

IDENTICAL, DIFFERS, OTHER_MACHINE, NOT_KEPT = "identical", "differs", "other machine", "not kept"

NOT_COMPARED = ("seconds", "run_dir", "description", "threads", "device", "workers")
"""Summary keys that are not a number of the run (timings, where it ran)."""


@dataclass
class Machine:
    """What ran a cell: torch's CPU capability (and GPU) and the CPU model, each None when not recorded; where it was read."""

    kind: str | None
    cpu: str | None
    source: str


def recorded_machine(summary: dict[str, Any], table_record: Path) -> Machine:
    """The machine a kept cell ran on: its summary's ``machine_kind``/``cpu``, else the table record's ``machine``."""
    if "machine_kind" in summary:
        return Machine(summary["machine_kind"], summary.get("cpu"), "the cell's result.json")
    try:
        machine = json.loads(table_record.read_text())["machine"]
    except (OSError, ValueError, KeyError, TypeError):
        return Machine(None, None, f"neither the cell's result.json nor {table_record}")
    return Machine(machine.get("kind"), machine.get("cpu"), f"{table_record} (the machine of the table's last run)")


def unrecorded_machine(machine: Machine) -> str:
    """Why a cell that differs may have run elsewhere: what of its machine is not recorded ('' when both are)."""
    if machine.kind is None:
        return f"the machine it ran on is not recorded ({machine.source} says): another machine may give other bits"
    if machine.cpu is None:
        return f"the CPU model it ran on is not recorded ({machine.source} says {machine.kind}): another CPU of that kind may give other bits"
    return ""


def other_machine(recorded: Machine, kind: str, cpu: str) -> bool:
    """Whether the recorded machine is known to be of another kind than this one (kind ``kind``, CPU ``cpu``)."""
    return (recorded.kind is not None and recorded.kind != kind) or (recorded.cpu is not None and recorded.cpu != cpu)


@dataclass
class Comparison:
    differing: list[str]
    """The committed summary's numbers (dotted keys) that differ now, or are missing now."""
    first_round: int | None
    """The first round (a step: rounds counted over every stage, 0 the initial evaluation) whose numbers differ, if known."""
    how: str
    """How ``first_round`` was found: from the rounds' digests, or from the evaluated rounds' test accuracy only."""
    state_differs: bool | None
    """Whether the final state's SHA-256 differs (None: not recorded)."""

    @property
    def identical(self) -> bool:
        return not self.differing and self.first_round is None and not self.state_differs


def compare(recorded: dict[str, Any], now: dict[str, Any]) -> Comparison:
    """How a rerun's summary ``now`` differs from the committed ``recorded`` one.

    The first differing round comes from ``round_fingerprints`` (a digest of every float of
    every round) where the committed summary has them; else from ``history``, the test
    accuracy of the ``evaluated_rounds`` only: a difference in the last bits of a training
    loss shows there only once it flips a test prediction, at the next evaluated round or later.
    """
    old, new = numbers(recorded, NOT_COMPARED), numbers(now, NOT_COMPARED)
    differing = [key for key in old if key not in new or not same(old[key], new[key])]
    if "round_fingerprints" in recorded:
        index = first_difference(recorded["round_fingerprints"], now.get("round_fingerprints", []))
        how = "every round's digest"
    else:
        steps = [0, *recorded.get("evaluated_rounds", [])]
        curves = [[recorded.get("initial_accuracy"), *recorded.get("history", [])], [now.get("initial_accuracy"), *now.get("history", [])]]
        at = first_difference(*([json.dumps(v) for v in curve] for curve in curves))
        index = None if at is None else steps[min(at, len(steps) - 1)]
        how = "the test accuracy of the evaluated rounds (result.json has no per-round digests)"
    state = recorded["state_sha256"] != now.get("state_sha256") if "state_sha256" in recorded else None
    return Comparison(differing, index, how, state)


def describe(comparison: Comparison, values: dict[str, tuple[float, float]]) -> str:
    """Where a differing rerun first differs, then its numbers both ways and their difference (``values``: metric ->
    committed, now), e.g. ``differs from round 3 (found by ...); final_accuracy 66.42 committed, 66.10 now (-0.32); ...``."""
    where = (
        f"from round {comparison.first_round} (found by {comparison.how})"
        if comparison.first_round is not None
        else "in no round's numbers (" + ("the final state differs" if comparison.state_differs else ", ".join(comparison.differing[:3])) + ")"
    )
    both = ", ".join(f"{metric} {old:.2f} committed, {new:.2f} now ({new - old:+.2f})" for metric, (old, new) in values.items())
    return f"{DIFFERS} {where}; {both}; {len(comparison.differing)} of the summary's numbers differ"


@dataclass
class Verified:
    """One kept cell's seed and what verifying it found."""

    cell: Cell
    seed: int
    status: str
    line: str
    changed: bool = False
    """Whether it was rerun and its numbers are not the committed ones to the bit (a ``differs``, or an ``other machine`` rerun)."""
    values: dict[str, tuple[float, float]] = field(default_factory=dict)
    """The table's metrics of a changed rerun: metric -> (committed, now), in the table's unit."""
    rerun: str = ""
    """What happened to its rerun: ``run``, ``resumed``, or ``reused`` (finished in ``--out`` before); empty if none ran."""
    rerun_seconds: float | None = None
    """The rerun's own wall seconds (its ``result.json``; a reused rerun's are those it took when it ran)."""


def largest_differences(results: list[Verified]) -> dict[tuple[str, str], dict[str, tuple[float, int]]]:
    """Per cell (row, column) with a changed rerun, per metric of the table: the largest ``|now - committed|`` over its
    rerun seeds, and the seed it is in."""
    out: dict[tuple[str, str], dict[str, tuple[float, int]]] = {}
    for v in results:
        for metric, (old, new) in v.values.items():
            cell = out.setdefault((v.cell.row, v.cell.column), {})
            if metric not in cell or abs(new - old) > cell[metric][0]:
                cell[metric] = (abs(new - old), v.seed)
    return out


@dataclass
class ClaimCheck:
    """A claim's finding (``reproduce/findings.py``) on the committed seeds, and with the rerun seeds in their place."""

    committed: dict[str, Any]
    now: dict[str, Any]

    @property
    def changed(self) -> bool:
        return bool(self.committed["verdict"] != self.now["verdict"])

    @property
    def line(self) -> str:
        """E.g. ``FST-CBDG > FedAvg (s=2): verdict unchanged: holds (FST-CBDG - FedAvg: +12.31 [+2.10, +22.52] committed,
        +12.05 [+1.90, +22.20] now)``: the mean paired difference and its 95% interval both ways."""
        name, verdict = self.committed["claim"], self.committed["verdict"]
        if "mean" not in self.committed or "mean" not in self.now:  # not run: a row or the column not kept
            return f"{name}: not checked ({self.now.get('note') or self.committed.get('note')})"
        means = f"{self.now['paired_difference']}: {interval(self.committed)} committed, {interval(self.now)} now"
        if self.changed:
            return f"{name}: verdict changed: {verdict} -> {self.now['verdict']} ({means})"
        before, after = by_interval(self.committed), by_interval(self.now)
        hidden = f"; by its interval alone: {before} -> {after}" if before != after else ""  # under a failed control's verdict
        return f"{name}: verdict unchanged: {verdict} ({means}{hidden})"


def interval(finding: dict[str, Any]) -> str:
    """A finding's mean paired difference and its 95% interval, e.g. ``+4.38 [+1.00, +7.75]`` (``+4.38`` with one seed)."""
    low, high = finding.get("low"), finding.get("high")
    return f"{finding['mean']:+.2f}" + ("" if low is None or high is None else f" [{low:+.2f}, {high:+.2f}]")


def by_interval(finding: dict[str, Any]) -> str:
    """The verdict a finding's interval gives (holds, reversed, not resolved), also where a failed control blanks the
    reported one (``setting not informative``)."""
    from fedprior.results.paired import Paired, verdict

    return verdict(Paired(finding["n"], finding["mean"], finding["sd"], finding["low"], finding["high"]))


def claim_checks(table: PaperTable, embedded: bool, kept: Path, seeds: int, reruns: dict[tuple[str, str, int], dict[str, Any]]) -> list[ClaimCheck]:
    """Each claim of ``table`` that a rerun can move, its verdict on the committed cells in ``kept`` (seeds
    0..``seeds``-1) and again with ``reruns`` ((row, column, seed) -> the rerun's summary) in place of theirs.

    A claim can move where its column holds a rerun of one of its two rows or of a :class:`Control`'s row (a failed
    control blanks the column's verdicts). A cell whose seed plan's seeds are kept beyond ``seeds`` is judged on all of
    them, as its table was. Its findings are recomputed on the column's rows that have every seed
    kept (a claim on another row is ``not run``); measured controls are not remeasured (``controls not run``)."""
    from fedprior.reproduce.findings import evaluate
    from fedprior.reproduce.tables import Control, aggregate_table, cells

    def committed(cell: Cell, seed: int) -> dict[str, Any]:
        return read_json(cell_folder(kept, cell, seed) / "result.json", "--cells")

    def substituted(cell: Cell, seed: int) -> dict[str, Any]:
        return reruns.get((cell.row, cell.column, seed)) or committed(cell, seed)

    def kept_seeds(cell: Cell) -> int:
        """``seeds``, or more where a seed plan's seeds are kept for the cell (seeds, seeds + 1, ... in a row)."""
        n = seeds
        while (cell_folder(kept, cell, n) / "result.json").is_file():
            n += 1
        return n

    def findings(column: str, rows: list[str], summary: Callable[[Cell, int], dict[str, Any]]) -> list[dict[str, Any]]:
        results = aggregate_table(table, embedded, None, summary, seeds=seeds, rows=rows, columns=[column], seeds_of=kept_seeds) if rows else []
        return list(evaluate(table, results, embedded)["findings"])

    control_rows = {row for c in table.controls if isinstance(c, Control) for row in (c.above, c.below)}
    out = []
    for column in dict.fromkeys(column for _, column, _ in reruns):
        rerun_rows = {row for row, at, _ in reruns if at == column}
        claims = [
            i
            for i, claim in enumerate(table.claims)
            if table.column_in_setting(claim.column, embedded) == column and ({claim.better, claim.worse} | control_rows) & rerun_rows
        ]
        if not claims:
            continue
        rows = [c.row for c in cells(table, embedded, columns=[column]) if all((cell_folder(kept, c, s) / "result.json").is_file() for s in range(seeds))]
        before, after = findings(column, rows, committed), findings(column, rows, substituted)
        out += [ClaimCheck(before[i], after[i]) for i in claims]
    return out


def chosen_seeds(table: PaperTable, planned: list[Cell], kept: Path, every: bool, seeds: int) -> list[tuple[Cell, int]]:
    """The (cell, seed) pairs to verify: every seed of every cell (``every``), else one per row: seed 0 of the row's first
    cell that is kept (of its first cell when none is)."""
    if every:
        return [(cell, seed) for cell in planned for seed in range(seeds)]
    out = []
    for row in dict.fromkeys(cell.row for cell in planned):
        in_row = [cell for cell in planned if cell.row == row]
        out.append((next((c for c in in_row if (cell_folder(kept, c, 0) / "result.json").is_file()), in_row[0]), 0))
    return out


def verify(
    table: PaperTable, planned: list[Cell], cells: Path, out: Path, every: bool, seeds: int, jobs: int, report: Callable[[Verified], None]
) -> tuple[list[Verified], dict[tuple[str, str, int], dict[str, Any]]]:
    """Verify the kept cells of ``table`` under ``cells/NAME`` among ``planned`` (see :func:`chosen_seeds`), rerunning each
    in ``out`` (``jobs`` at once; a rerun ``out`` holds finished is reused, one it holds stopped resumes, as a table's
    cells do: the same ``--out`` again judges a claim with reruns made before, e.g. after a seed plan's new seeds ran);
    ``report`` is called for each as it is known. Every cell's result, in the order known,
    and the reruns' summaries by (row, column, seed)."""
    import torch

    from fedprior.encoders.shipped_towers import cpu_kind, machine_kind
    from fedprior.errors import ConfigError
    from fedprior.experiments.config import load_config
    from fedprior.experiments.run_config import read_config
    from fedprior.experiments.table_runs import execute_runs, plan_cell
    from fedprior.results.run_dir import RunDir

    kept, results = cells / table.name, []

    def done(verified: Verified) -> None:
        results.append(verified)
        report(verified)

    reruns, committed = [], {}
    for cell, seed in chosen_seeds(table, planned, kept, every, seeds):
        folder = cell_folder(kept, cell, seed)
        if not (folder / "result.json").is_file():
            done(Verified(cell, seed, NOT_KEPT, f"{NOT_KEPT} (no {folder / 'result.json'})"))
            continue
        summary = read_json(folder / "result.json", "--cells")
        machine = recorded_machine(summary, cells.parent / "tables" / f"{table.name}.json")
        device = torch.device(summary.get("device", "cpu"))
        if device.type == "cuda" and not torch.cuda.is_available():
            done(Verified(cell, seed, OTHER_MACHINE, f"{OTHER_MACHINE} (it ran on {device}; this machine has no GPU)"))
            continue
        here = (machine_kind(device), cpu_kind())
        then = f"{machine.kind}; {machine.cpu or 'CPU model not recorded'}"
        elsewhere = f"recorded: {then}, from {machine.source}; this is {here[0]}; {here[1]}" if other_machine(machine, *here) else None
        name, config = read_config(RunDir(folder))
        config = config.model_copy(update={"run": config.run.model_copy(update={"device": str(device)})})
        rerun = plan_cell(out, cell, seed, name, config, command="table --verify")  # a rerun finished in this --out is reused
        if rerun.action == REUSED and other_machine(Machine(rerun.result.get("machine_kind"), rerun.result.get("cpu"), str(rerun.path)), *here):
            raise ConfigError(f"--out: the rerun in {rerun.path} ran on another machine than this one; give another --out")
        committed[cell.row, cell.column, seed] = (summary, machine, today_changes(cell, seed, config, load_config), elsewhere)
        reruns.append(rerun)

    def compared(run: CellRun, summary: dict[str, Any]) -> None:
        recorded, machine, changes, elsewhere = committed[run.cell.row, run.cell.column, run.seed]
        comparison = compare(recorded, summary)
        seconds = summary.get("wall_seconds")
        notes = [f"the table defines another config today: {changes}"] if changes else []
        if comparison.identical:
            status, line = (IDENTICAL, IDENTICAL) if elsewhere is None else (OTHER_MACHINE, f"{OTHER_MACHINE} ({elsewhere}): rerun, {IDENTICAL} to the bit")
            done(Verified(run.cell, run.seed, status, "; ".join([line, *notes]), rerun=run.action, rerun_seconds=seconds))
            return
        if elsewhere is None and (note := unrecorded_machine(machine)):
            notes.append(note)
        values = {metric: (cell_value(table, recorded, metric), cell_value(table, summary, metric)) for metric in table.metrics if metric in recorded}
        status, line = (
            (DIFFERS, describe(comparison, values))
            if elsewhere is None
            else (OTHER_MACHINE, f"{OTHER_MACHINE} ({elsewhere}): rerun, {describe(comparison, values)}")
        )
        done(Verified(run.cell, run.seed, status, "; ".join([line, *notes]), changed=True, values=values, rerun=run.action, rerun_seconds=seconds))

    alone = [r for r in reruns if r.single_threaded().config.run != r.config.run]  # not as a table's process runs a cell
    summaries = execute_runs(reruns, 1 if alone else jobs, compared)
    return results, summaries


def today_changes(cell: Cell, seed: int, committed: ExperimentConfig, load_config: Callable[..., Any]) -> str:
    """The fields (that change the numbers) in which the config the table runs for ``cell`` today differs from the committed one."""
    from fedprior.experiments.resume_check import changes_that_matter, describe_changes

    _, today = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"])
    changed = changes_that_matter(committed.to_dict(), today.to_dict())
    return describe_changes(changed, "committed", "today") if changed else ""


def status_counts(results: list[Verified]) -> dict[str, int]:
    """How many verified cells have each status, in the order the statuses first occur."""
    return {status: sum(v.status == status for v in results) for status in dict.fromkeys(v.status for v in results)}


def reruns_reused(results: list[Verified]) -> int:
    """How many verified cells' reruns were read from ``--out`` (finished there before) instead of run."""
    return sum(v.rerun == REUSED for v in results)


def report(table: PaperTable, results: list[Verified], checks: list[ClaimCheck], seeds: int, command: str) -> dict[str, Any]:
    """``--verify --json``: what the verify found, as data: the command, this machine, per cell its status, line and (a
    changed rerun) its numbers both ways, per concerned claim its finding on the committed seeds and with the rerun seeds
    in their place (``reproduce/findings.py``'s dicts: n, mean, sd, interval, verdict), and the counts; per cell and in
    all, the reruns' own wall seconds and how many were reused from ``--out`` (the CLI adds this verify's wall seconds,
    which for reused reruns is only the reading).

    A claim whose verdict changes on another machine kind is what a table's second seed plan is made from
    (:func:`fedprior.reproduce.seed_plan.make_verify_plan`)."""
    from fedprior.encoders.shipped_towers import cpu_kind, machine_kind

    return {
        "table": table.name,
        "command": command,
        "machine": {"kind": machine_kind(), "cpu": cpu_kind()},
        "seeds": seeds,
        "cells": [
            {"row": v.cell.row, "column": v.cell.column, "seed": v.seed, "status": v.status, "changed": v.changed, "line": v.line}
            | {"values": {metric: {"committed": old, "now": new} for metric, (old, new) in v.values.items()}}
            | ({"rerun": v.rerun, "rerun_seconds": v.rerun_seconds} if v.rerun else {})
            for v in results
        ],
        "claims": [{"claim": c.committed["claim"], "changed": c.changed, "committed": c.committed, "rerun": c.now} for c in checks],
        "counts": status_counts(results),
        "verdicts_changed": sum(c.changed for c in checks),
        "reruns_reused": reruns_reused(results),
        "rerun_seconds": round(sum(v.rerun_seconds or 0.0 for v in results), 1),
    }
