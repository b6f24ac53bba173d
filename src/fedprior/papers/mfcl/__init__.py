"""MFCL (Modular Federated Contrastive Learning with Peer Normalization; docs/mfcl.md): Tables 2, 3, 7 and 8 as grids, Figures 6 and 7 and Table 8 in a run's report, its presets.

The algorithm is :mod:`fedprior.algorithms.mfcl`; its baselines are
:mod:`~fedprior.algorithms.fedsimclr`, :mod:`~fedprior.algorithms.fedswav`,
:mod:`~fedprior.algorithms.orchestra`, :mod:`~fedprior.algorithms.moon` and the
supervised FedAvg and FedProx.
"""

from fedprior.papers.mfcl.report import communication_extras, mfcl_extras
from fedprior.papers.mfcl.tables import MFCL_TABLES

TABLES = MFCL_TABLES
REPORT_EXTRAS = {"mfcl": mfcl_extras, "fedsimclr": communication_extras}
