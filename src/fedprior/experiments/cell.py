"""One run of a grid, seeds aside: a paper table's cell (row, column) or a sweep's point, as a preset plus overrides.

Kept apart from the tables (:mod:`fedprior.reproduce.tables`) and from the running of a grid
(:mod:`fedprior.experiments.table_runs`), which both use it, so that declaring a table imports no runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cell:
    row: str
    column: str
    preset: str
    overrides: list[str]
    paper: float | None
    paper_metrics: dict[str, float] = field(default_factory=dict)
    """The paper's numbers for the table's other metrics, by metric."""
