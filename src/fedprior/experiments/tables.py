"""Kept for compatibility: the paper tables' model is :mod:`fedprior.reproduce.tables` (issue 34); import it from there.

Only re-exports; nothing in fedprior imports this module (``tests/test_layers.py`` checks both).
"""

from fedprior.reproduce.tables import (
    Cell,
    Claim,
    Column,
    Control,
    MeasuredControl,
    PaperTable,
    Row,
    aggregate_table,
    cell_value,
    cells,
    central_overrides,
    control_configs,
    measure_controls,
    select_rows,
)

__all__ = [
    "Cell",
    "Claim",
    "Column",
    "Control",
    "MeasuredControl",
    "PaperTable",
    "Row",
    "cell_value",
    "cells",
    "central_overrides",
    "control_configs",
    "measure_controls",
    "aggregate_table",
    "select_rows",
]
