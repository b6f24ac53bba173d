"""Federated algorithms: factories returning pure functions (see base.py).

``base`` (the Algorithm contract) and ``registry`` (name -> factory); ``pieces/`` (what a
paper defines, reusable); ``engines/`` (the shared training of each family); one module
per method beside them (``fedavg``, ``feddb``, ``fedbm``, ``mfcl``, ``fst_cbdg``, ...).
"""

import sys

from fedprior.algorithms.pieces import precision as _precision
from fedprior.algorithms.pieces import tensors as _tensors

# The paths user code was shown before pieces/ existed (docs/python-api.md, docs/runtime.md) still import.
sys.modules[f"{__name__}.tensors"] = _tensors
sys.modules[f"{__name__}.precision"] = _precision
