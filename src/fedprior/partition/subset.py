"""A class-balanced random subset of the training pool (``data.train_subset``), for small embedded runs."""

from __future__ import annotations

import numpy as np

from fedprior.errors import ConfigError
from fedprior.seeding import numpy_rng


def balanced_subset(labels: np.ndarray, pool: np.ndarray, size: int, seed: int) -> np.ndarray:
    """``size // n`` random indices of each of the n classes of ``labels[pool]`` (sorted), from the ("data", "subset") stream.

    A class with fewer samples in the pool contributes all it has. The subset depends on
    the run seed only, so every algorithm run with the same seed trains on the same images.
    """
    classes = np.unique(labels[pool])
    per_class = size // classes.size
    if per_class < 1:
        raise ConfigError(f"data.train_subset: {size} images cannot hold one of each of the {classes.size} classes; use at least {classes.size}")
    rng = numpy_rng(seed, "data", "subset")
    chosen = [rng.permutation(pool[labels[pool] == c])[:per_class] for c in classes]
    return np.sort(np.concatenate(chosen)).astype(np.int64)
