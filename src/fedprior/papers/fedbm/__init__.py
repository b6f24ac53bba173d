"""FedBM (fedbm.txt): Tables I-XII as grids, the generated-image grid in a run's report, its presets.

The algorithm is :mod:`fedprior.algorithms.fedbm` (LKCC: :mod:`fedprior.algorithms.lkcc`,
CGDE: :mod:`fedprior.algorithms.cgde`); its baselines are one module each in
:mod:`fedprior.algorithms`.
"""

TABLES = ()
REPORT_EXTRAS = {}
