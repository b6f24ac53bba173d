"""Every registered paper's tables by name (``fedprior table NAME``), from the modules the paper registry names.

A paper registers the module holding its ``TABLES`` (:mod:`fedprior.experiments.paper_registry`, filled by
``fedprior.papers``); that module is imported here on first use, so listing presets never imports a table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprior.errors import ConfigError
from fedprior.experiments.paper_registry import paper_module, papers

if TYPE_CHECKING:  # importing fedprior (which registers the papers) imports no table
    from fedprior.reproduce.tables import PaperTable


def all_tables() -> dict[str, PaperTable]:
    """Every paper table by name (``fedprior table NAME``)."""
    return {table.name: table for paper in papers() for table in paper_module(paper.name).TABLES}


def table_by_name(name: str) -> PaperTable:
    tables = all_tables()
    if name not in tables:
        raise ConfigError(f"unknown table '{name}'; accepted: {', '.join(tables)}")
    return tables[name]
