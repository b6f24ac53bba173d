"""What the papers contribute to experiments, registered by ``fedprior.papers`` when it is imported.

experiments/ reads this registry and never imports papers/ (the papers compose
experiments, not the other way round). ``fedprior/__init__.py`` imports
``fedprior.papers``, so every entry point (the CLI, the Python API, the Flower app)
finds the papers registered. A paper registers its presets folder and the module that
holds its ``TABLES``, ``REPORT_EXTRAS`` and ``SUMMARY_EXTRAS``; the module is imported on
first use, so that listing presets stays light. The tables are looked up by name in
:mod:`fedprior.reproduce.paper_tables` (the floor above, which reads this registry too).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

SHARED_PRESETS = Path(__file__).resolve().parents[1] / "presets"
"""Presets that belong to no paper (the plain FedAvg/FedProx/SCAFFOLD CNN runs)."""

ReportExtra = Callable[[Any, dict[str, Any], Path], tuple[dict[str, Any], str]]
"""``(experiment, summary, run folder) -> (summary additions, markdown section)``."""

SummaryExtra = Callable[[Path], dict[str, Any]]
"""A paper's numbers computed from a finished run's folder (its metrics.jsonl), without figures."""


@dataclass(frozen=True)
class Paper:
    """A registered paper: its presets folder and the module holding TABLES, REPORT_EXTRAS and SUMMARY_EXTRAS."""

    name: str
    presets: Path
    module: str


_PAPERS: dict[str, Paper] = {}
_MODULES: dict[str, ModuleType] = {}


def register_paper(name: str, presets: Path, module: str) -> None:
    """Add a paper (again: replaced in place, keeping its position)."""
    _PAPERS[name] = Paper(name, presets, module)
    _MODULES.pop(name, None)


def papers() -> tuple[Paper, ...]:
    """The registered papers, in registration order."""
    return tuple(_PAPERS.values())


def paper_module(name: str) -> ModuleType:
    """The module of paper ``name``, imported on first use."""
    if name not in _MODULES:
        _MODULES[name] = importlib.import_module(_PAPERS[name].module)
    return _MODULES[name]


def preset_dirs() -> list[Path]:
    """Every folder holding shipped presets: the shared one, then each paper's."""
    return [SHARED_PRESETS, *(paper.presets for paper in papers())]


def _hook(attribute: str, algorithm: str) -> Any:
    """``algorithm``'s entry in the first paper module whose ``attribute`` (a dict by algorithm) has one."""
    for paper in papers():
        extras = getattr(paper_module(paper.name), attribute, {})
        if algorithm in extras:
            return extras[algorithm]
    return None


def summary_extra(algorithm: str) -> SummaryExtra | None:
    """The summary additions of ``algorithm`` that every run gets, table cells included (e.g. FedDB's pseudo-label accuracy), if a paper registers them."""
    return _hook("SUMMARY_EXTRAS", algorithm)


def report_extra(algorithm: str) -> ReportExtra | None:
    """The report hook of ``algorithm`` (a paper's figures and diagnostics), if a paper registers one."""
    return _hook("REPORT_EXTRAS", algorithm)
