"""FedDB (the FedDB paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning"):
Tables 1-4 as grids, its diagnostics (Figures 1, 3, 6, 7) in a run's report, its presets.

The algorithms are :mod:`fedprior.algorithms.feddb` and its baselines
(:mod:`~fedprior.algorithms.fixmatch`, :mod:`~fedprior.algorithms.fedmatch`,
:mod:`~fedprior.algorithms.fedrgd`, :mod:`~fedprior.algorithms.semifl`).
"""

from fedprior.papers.feddb.report import ALGORITHMS, diagnostics_of_run, feddb_extras
from fedprior.papers.feddb.tables import FEDDB_TABLES

TABLES = FEDDB_TABLES
REPORT_EXTRAS = {name: feddb_extras for name in ALGORITHMS}
SUMMARY_EXTRAS = {name: diagnostics_of_run for name in ALGORITHMS}
