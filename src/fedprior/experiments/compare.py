"""Kept for compatibility: comparing runs is :mod:`fedprior.results.compare` and :mod:`fedprior.results.run_view` (issue 34); import them from there.

Only re-exports; nothing in fedprior imports this module (``tests/test_layers.py`` checks both).
"""

from fedprior.results.compare import Comparison, compare_runs, run_folders
from fedprior.results.run_view import METRICS, RunView, read_metrics, read_run

__all__ = ["METRICS", "Comparison", "RunView", "compare_runs", "read_metrics", "read_run", "run_folders"]
