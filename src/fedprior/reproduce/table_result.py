"""A table's outcome as typed values: its cells, its controls, its findings and the table, each with ``to_json``/``from_json``.

``TableResult.to_json()`` is table.json, the document ``fedprior table`` writes (and prints with ``--json``), key for
key and in the same order; ``TableResult.from_json`` reads one back (a committed ``benchmarks/results/tables/NAME.json``
holds it under ``"table"``). The numbers are in the table's unit (accuracy in %, rounded to two decimals); what each
field means is said where :func:`~fedprior.reproduce.tables.aggregate_table` (cells) and
:func:`~fedprior.reproduce.findings.evaluate` (controls, findings, notices) compute it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from fedprior.reproduce.findings import NOT_RUN


def _plain(value: Any) -> Any:
    """A dataclass as a JSON-ready dict (its fields in order), tuples as lists, recursively."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class MetricResult:
    """One metric of a cell over its seeds: the run summary's value times ``scale`` (a fraction x 100 = %)."""

    scale: float
    mean: float
    std: float
    """Sample standard deviation (n - 1); 0 for one seed."""
    values: tuple[float, ...]
    """One value per seed, seed 0 first."""
    paper: float | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MetricResult:
        return cls(d["scale"], d["mean"], d["std"], tuple(d["values"]), d["paper"])


@dataclass(frozen=True)
class CellResult:
    """One cell (row, column) over its seeds: ``ours`` and ``std`` are the table's first metric, beside the paper's number."""

    row: str
    column: str
    metric: str
    ours: float
    std: float
    paper: float | None
    seeds: int
    finals: tuple[float, ...]
    """The first metric per seed, seed 0 first."""
    metrics: dict[str, MetricResult]
    """Every metric of the table the cell's runs produce, by name."""
    initial: float
    """Seed 0's accuracy before training (%)."""
    preset: str
    overrides: tuple[str, ...]
    seconds: float
    """The wall seconds of its runs, summed over seeds."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CellResult:
        metrics = {name: MetricResult.from_json(m) for name, m in d["metrics"].items()}
        rest = {k: d[k] for k in ("row", "column", "metric", "ours", "std", "paper", "seeds", "initial", "preset", "seconds")}
        return cls(**rest, finals=tuple(d["finals"]), metrics=metrics, overrides=tuple(d["overrides"]))

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class ControlResult:
    """A control in one column: passed, failed or not run, with what it compared (``kind`` rows) or measured (``kind`` measured)."""

    condition: str
    column: str
    kind: Literal["rows", "measured"]
    """rows: ``above - below`` on ``metric`` (mean over seeds) against ``margin``; measured: ``value`` against the floor ``margin``."""
    margin: float
    note: str
    status: str
    gates: tuple[str, ...]
    """The rows or claims whose verdicts it withholds where it fails."""
    metric: str | None = None
    missing: tuple[str, ...] = ()
    """Not run: the rows not run, or 'not measured'."""
    above: float | None = None
    below: float | None = None
    difference: float | None = None
    late_change: float | None = None
    """Where the control asks ``above`` to have converged: the mean |move| of its last 10% of rounds."""
    value: float | None = None
    measured: str | None = None
    """What a measured control measured, in words."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ControlResult:
        kind: Literal["rows", "measured"] = "measured" if d.get("kind") == "measured" else "rows"
        numbers = {k: d[k] for k in ("metric", "above", "below", "difference", "late_change", "value", "measured") if k in d}
        return cls(d["condition"], d["column"], kind, d["margin"], d["note"], d["status"], tuple(d["gates"]), missing=tuple(d.get("missing", ())), **numbers)

    def to_json(self) -> dict[str, Any]:
        """The entry as :func:`~fedprior.reproduce.findings.evaluate` writes it: which keys, in which order, by kind and status."""
        out: dict[str, Any] = {"condition": self.condition, "column": self.column}
        out |= {"kind": "measured"} if self.kind == "measured" else {"metric": self.metric}
        out |= {"margin": self.margin, "note": self.note}
        if self.status == NOT_RUN:
            out |= {"status": self.status, "missing": list(self.missing)}
        elif self.kind == "measured":
            out |= {"value": self.value, "measured": self.measured, "status": self.status}
        else:
            out |= {"above": self.above, "below": self.below, "difference": self.difference}
            out |= {"late_change": self.late_change} if self.late_change is not None else {}
            out |= {"status": self.status}
        return {**out, "gates": list(self.gates)}


@dataclass(frozen=True)
class Finding:
    """A claim of the paper tested on the paired differences over seeds: holds, reversed, not resolved, setting not informative or not run."""

    claim: str
    better: str
    worse: str
    column: str
    metric: str
    paired_difference: str
    """Which difference was taken, 'ROW - ROW' (a positive mean favours the claim)."""
    source: str
    gated_by: tuple[str, ...]
    verdict: str
    note: str
    n: int | None = None
    mean: float | None = None
    sd: float | None = None
    low: float | None = None
    """The 95% t interval of the mean (None with one seed)."""
    high: float | None = None
    blanked_by: tuple[str, ...] = ()
    """The failed controls that withheld the verdict."""
    better_mean: float | None = None
    worse_mean: float | None = None
    paper: float | None = None
    """The paper's own difference, where it printed both numbers."""
    detectable: float | None = None
    """The smallest mean difference its n seeds detect with 80% power at its sd (None: one seed, or recorded before it existed)."""
    gap: float | None = None
    """The paper's difference for the claim (``Claim.gap``, else ``paper``) that ``seeds_needed`` is for."""
    seeds_needed: int | None = None
    """The seeds ``gap`` needs for 80% power at its sd (None: no gap or one seed)."""
    seeds_planned: int | None = None
    """The seeds the table's plan gives the claim (:mod:`fedprior.reproduce.seed_plan`; None: no plan)."""
    plan_note: str = ""
    """What the plan says of the claim where it stops short of the seeds needed (the budget, with the difference it detects then)."""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        given = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        return cls(**given | {"gated_by": tuple(d["gated_by"]), "blanked_by": tuple(d.get("blanked_by", ()))})

    def to_json(self) -> dict[str, Any]:
        """The entry as :func:`~fedprior.reproduce.findings.evaluate` writes it (a claim not run has no statistics)."""
        out = {k: v for k, v in _plain(self).items() if k in ("claim", "better", "worse", "column", "metric", "paired_difference", "source", "gated_by")}
        if self.verdict == NOT_RUN:
            return {**out, "verdict": self.verdict, "note": self.note}
        out |= {"n": self.n, "mean": self.mean, "sd": self.sd, "low": self.low, "high": self.high, "verdict": self.verdict, "note": self.note}
        out |= {"blanked_by": list(self.blanked_by), "better_mean": self.better_mean, "worse_mean": self.worse_mean, "paper": self.paper}
        out |= {"detectable": self.detectable, "gap": self.gap, "seeds_needed": self.seeds_needed}
        return out | ({"seeds_planned": self.seeds_planned, "plan_note": self.plan_note} if self.seeds_planned is not None else {})


@dataclass(frozen=True)
class TableResult:
    """A paper table run (``fedprior table NAME``): its cells beside the paper's numbers, its controls, its findings, its notices."""

    table: str
    """The table's name, e.g. 'fst-cbdg-table2'."""
    title: str
    setting: Literal["embedded", "paper"]
    seeds: int
    overrides: tuple[str, ...]
    """The ``--set`` overrides every cell ran with."""
    imports: tuple[str, ...]
    cells: tuple[CellResult, ...]
    controls: tuple[ControlResult, ...]
    findings: tuple[Finding, ...]
    notices: tuple[str, ...]
    """What table.md says at its top (a failed control, one not run)."""
    folder: Path | None = None
    """Where the cells' run folders, table.json and table.md are (not part of table.json)."""

    def cell(self, row: str, column: str) -> CellResult:
        """The cell of ``row`` in ``column`` (KeyError if the run has none)."""
        found = [c for c in self.cells if (c.row, c.column) == (row, column)]
        if not found:
            raise KeyError(f"no cell {row!r} / {column!r}; the run has {', '.join(f'{c.row} / {c.column}' for c in self.cells)}")
        return found[0]

    @classmethod
    def from_json(cls, d: dict[str, Any], folder: Path | None = None) -> TableResult:
        """A table.json document read back (``folder``: where it lies, if known)."""
        return cls(
            d["table"],
            d["title"],
            d["setting"],
            d["seeds"],
            tuple(d["overrides"]),
            tuple(d["imports"]),
            tuple(map(CellResult.from_json, d["cells"])),
            tuple(map(ControlResult.from_json, d["controls"])),
            tuple(map(Finding.from_json, d["findings"])),
            tuple(d["notices"]),
            folder,
        )

    def to_json(self) -> dict[str, Any]:
        """table.json: the table, its setting, seeds, overrides and imports, then cells, controls, findings and notices."""
        head = {k: _plain(getattr(self, k)) for k in ("table", "title", "setting", "seeds", "overrides", "imports")}
        return {
            **head,
            "cells": [c.to_json() for c in self.cells],
            **self.evaluated(),
        }

    def evaluated(self) -> dict[str, Any]:
        """The controls, findings and notices as :func:`~fedprior.reproduce.findings.evaluate` returns them (JSON)."""
        return {"controls": [c.to_json() for c in self.controls], "findings": [f.to_json() for f in self.findings], "notices": list(self.notices)}

    def markdown(self, command: str | None = None) -> str:
        """table.md: the table under its notices and overrides (``command``: how to run it again, recorded there), then controls and findings."""
        from fedprior.reproduce.table_page import markdown

        return markdown(self.title, [c.to_json() for c in self.cells], self.evaluated(), overrides=list(self.overrides), command=command)
