"""The old path of :mod:`fedprior.algorithms.pieces.precision` (user code was shown it before ``pieces/`` existed): that very module."""

import sys

from fedprior.algorithms.pieces import precision

sys.modules[__name__] = precision
