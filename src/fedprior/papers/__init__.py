"""One package per paper: its tables, its report additions and its presets.

Algorithms stay one module per method in :mod:`fedprior.algorithms` (every equation
one hop away); what only matters for reproducing a paper lives here, in one folder
per paper:

    papers/<paper>/__init__.py   TABLES (PaperTable grids), REPORT_EXTRAS (algorithm -> report hook) and
                                 SUMMARY_EXTRAS (algorithm -> figures-free summary additions, in every run)
    papers/<paper>/tables.py     the paper's tables as grids, beside the published numbers (declared with
                                 fedprior.reproduce.declare: the numbers as printed, the claims of one passage)
    papers/<paper>/report.py     what a run's report adds for the paper's algorithms (figures, diagnostics)
    papers/<paper>/presets/      the paper's presets (`fedprior run NAME`)

``PAPERS`` is the explicit list (no discovery by file name): a new paper adds
one line. Importing this package registers each paper's presets folder and module in
:mod:`fedprior.experiments.paper_registry`, which experiments/ and reproduce/ read (they never import
papers/); ``fedprior/__init__.py`` imports this package, so every entry point has them. Presets that belong to no paper (the plain FedAvg/FedProx/SCAFFOLD CNN
runs) stay in ``fedprior/presets/``.
"""

from __future__ import annotations

from pathlib import Path

from fedprior.experiments.paper_registry import (
    ReportExtra,
    SummaryExtra,
    paper_module,
    preset_dirs,
    register_paper,
    report_extra,
    summary_extra,
)
from fedprior.reproduce.paper_tables import all_tables, table_by_name

__all__ = ["PAPERS", "ReportExtra", "SummaryExtra", "all_tables", "paper_module", "preset_dirs", "report_extra", "summary_extra", "table_by_name"]

PAPERS: tuple[str, ...] = ("fst_cbdg", "feddb", "fedbm", "mfcl", "fedbn")
"""The paper packages, in the README's order."""

for _name in PAPERS:
    register_paper(_name, Path(__file__).resolve().parent / _name / "presets", f"fedprior.papers.{_name}")
