"""FST-CBDG (the FST-CBDG paper, "Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model"):
Tables 1-4 as grids, Figures 2 and 3 in a run's report, its presets.

The algorithm itself is :mod:`fedprior.algorithms.fst_cbdg`.
"""

from fedprior.papers.fst_cbdg.report import fst_cbdg_extras
from fedprior.papers.fst_cbdg.tables import FST_CBDG_TABLES

TABLES = FST_CBDG_TABLES
REPORT_EXTRAS = {"fst-cbdg": fst_cbdg_extras}
