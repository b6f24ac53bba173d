"""Papers' tables as runnable grids: every cell is a preset plus overrides, beside the paper's number.

``fedprior table NAME`` runs every cell in the paper's setting (the user's real data
and encoder); ``--embedded`` runs the same grid offline on an embedded dataset
through the offline stand-in encoder, keeping the columns whose setting can be
reproduced there, named by their setting only (the paper's numbers stay beside ours
for reference: the data and the encoder differ).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fedprior.errors import ConfigError


@dataclass(frozen=True)
class Column:
    dataset: str
    setting: str
    overrides: tuple[str, ...]
    embedded: bool = True
    """Whether the column is part of the embedded grid (one column per distinct setting)."""

    @property
    def label(self) -> str:
        """The paper's column name, e.g. 'CIFAR-10 s=2'."""
        return f"{self.dataset} {self.setting}".strip()


@dataclass(frozen=True)
class Row:
    label: str
    preset: str
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class PaperTable:
    name: str
    title: str
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    paper: dict[tuple[str, str], float] = field(default_factory=dict)
    """(row label, column label) -> the paper's number (%); missing cells were not reported."""
    real: tuple[str, ...] = ()
    """Overrides of the paper's setting (dataset-independent), e.g. the encoder."""
    embedded: tuple[str, ...] = ()
    """Overrides of the embedded setting (dataset and encoder)."""
    real_datasets: dict[str, str] = field(default_factory=dict)
    """Column dataset label -> fedprior dataset name, for the paper's setting."""


@dataclass
class Cell:
    row: str
    column: str
    preset: str
    overrides: list[str]
    paper: float | None


def cells(table: PaperTable, embedded: bool, extra: list[str] | None = None) -> list[Cell]:
    """The cells to run, in row-major order, with every override resolved."""
    out = []
    for column in table.columns:
        if embedded and not column.embedded:
            continue
        setting = list(table.embedded) if embedded else [*table.real, f"data.dataset={table.real_datasets[column.dataset]}"]
        for row in table.rows:
            out.append(Cell(
                row=row.label,
                column=column.setting if embedded else column.label,
                preset=row.preset,
                overrides=[*setting, *column.overrides, *row.overrides, *(extra or [])],
                paper=table.paper.get((row.label, column.label)),
            ))
    order = {r.label: i for i, r in enumerate(table.rows)}
    return sorted(out, key=lambda c: order[c.row])


def run_table(table: PaperTable, embedded: bool, extra: list[str] | None,
              run_cell: Callable[[Cell, int], dict[str, Any]], on_cell: Callable[[Cell, dict], None] | None = None,
              seeds: int = 1) -> list[dict[str, Any]]:
    """Run every cell with ``run_cell(cell, seed)`` (a run summary) for seeds 0..seeds-1; one result per cell.

    ``ours`` is the mean final accuracy (%) over the seeds, ``std`` their standard deviation.
    """
    results = []
    for cell in cells(table, embedded, extra):
        summaries = [run_cell(cell, seed) for seed in range(seeds)]
        finals = np.array([100 * s["final_accuracy"] for s in summaries])
        result = {
            "row": cell.row,
            "column": cell.column,
            "ours": round(float(finals.mean()), 2),
            "std": round(float(finals.std()), 2),
            "paper": cell.paper,
            "seeds": seeds,
            "finals": [round(float(f), 2) for f in finals],
            "initial": round(100 * summaries[0]["initial_accuracy"], 2),
            "preset": cell.preset,
            "overrides": cell.overrides,
            "seconds": round(sum(s["wall_seconds"] for s in summaries), 2),
        }
        results.append(result)
        if on_cell:
            on_cell(cell, result)
    return results


def table_by_name(name: str) -> PaperTable:
    from fedprior.experiments.fst_cbdg_tables import FST_CBDG_TABLES

    tables = {t.name: t for t in FST_CBDG_TABLES}
    if name not in tables:
        raise ConfigError(f"unknown table '{name}'; accepted: {', '.join(tables)}")
    return tables[name]
