"""FedBM (the FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning"):
Tables I-XII as grids, the generated-image grid in a run's report, its presets.

The algorithm is :mod:`fedprior.algorithms.fedbm` (LKCC: :mod:`fedprior.algorithms.pieces.lkcc`,
CGDE: :mod:`fedprior.algorithms.pieces.cgde`); its baselines are one module each in
:mod:`fedprior.algorithms`.
"""

from fedprior.papers.fedbm.report import fedbm_extras
from fedprior.papers.fedbm.tables import FEDBM_TABLES

TABLES = FEDBM_TABLES
REPORT_EXTRAS = {"fedbm": fedbm_extras}
