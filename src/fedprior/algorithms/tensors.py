"""The old path of :mod:`fedprior.algorithms.pieces.tensors` (user code was shown it before ``pieces/`` existed): that very module."""

import sys

from fedprior.algorithms.pieces import tensors

sys.modules[__name__] = tensors
