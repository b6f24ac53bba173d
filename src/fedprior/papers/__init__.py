"""One package per paper: its tables, its report additions and its presets.

Algorithms stay one module per method in :mod:`fedprior.algorithms` (every equation
one hop away); what only matters for reproducing a paper lives here, in one folder
per paper:

    papers/<paper>/__init__.py   TABLES (PaperTable grids), REPORT_EXTRAS (algorithm -> report hook) and
                                 SUMMARY_EXTRAS (algorithm -> figures-free summary additions, in every run)
    papers/<paper>/tables.py     the paper's tables as grids, beside the published numbers
    papers/<paper>/report.py     what a run's report adds for the paper's algorithms (figures, diagnostics)
    papers/<paper>/presets/      the paper's presets (`fedprior run NAME`)

``PAPERS`` is the explicit registry (no discovery by file name): a new paper adds
one line. Presets that belong to no paper (the plain FedAvg/FedProx/SCAFFOLD CNN
runs) stay in ``fedprior/presets/``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from fedprior.errors import ConfigError

if TYPE_CHECKING:
    from fedprior.experiments.tables import PaperTable

PAPERS: tuple[str, ...] = ("fst_cbdg", "feddb", "fedbm", "mfcl")
"""The paper packages, in the README's order."""

ReportExtra = Callable[[Any, dict[str, Any], Path], tuple[dict[str, Any], str]]
"""``(experiment, summary, run folder) -> (summary additions, markdown section)``."""


@cache
def paper_module(name: str) -> ModuleType:
    return importlib.import_module(f"fedprior.papers.{name}")


def preset_dirs() -> list[Path]:
    """Every folder holding shipped presets: the shared one, then each paper's."""
    root = Path(__file__).resolve().parent
    return [root.parent / "presets", *(root / name / "presets" for name in PAPERS)]


def all_tables() -> dict[str, PaperTable]:
    """Every paper table by name (``fedprior table NAME``)."""
    return {table.name: table for name in PAPERS for table in paper_module(name).TABLES}


def table_by_name(name: str) -> PaperTable:
    tables = all_tables()
    if name not in tables:
        raise ConfigError(f"unknown table '{name}'; accepted: {', '.join(tables)}")
    return tables[name]


SummaryExtra = Callable[[Path], dict[str, Any]]
"""A paper's numbers computed from a finished run's folder (its metrics.jsonl), without figures."""


def summary_extra(algorithm: str) -> SummaryExtra | None:
    """The summary additions of ``algorithm`` that every run gets, table cells included (e.g. FedDB's pseudo-label accuracy), if a paper registers them."""
    for name in PAPERS:
        extras = getattr(paper_module(name), "SUMMARY_EXTRAS", {})
        if algorithm in extras:
            return extras[algorithm]
    return None


def report_extra(algorithm: str) -> ReportExtra | None:
    """The report hook of ``algorithm`` (a paper's figures and diagnostics), if a paper registers one."""
    for name in PAPERS:
        extras = getattr(paper_module(name), "REPORT_EXTRAS", {})
        if algorithm in extras:
            return extras[algorithm]
    return None
