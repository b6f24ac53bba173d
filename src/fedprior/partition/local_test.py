"""Each client's local test split (``partition.local_test_fraction``): part of its own data held out, to score its personalized model.

Personalized methods (FedREP, FedROD, FedProto, ...) are scored in the personalized-FL
literature on each client's own held-out data, as FL-bench and PFLlib do, not on one
global test set: a client's model is meant for its own label distribution.
"""

from __future__ import annotations

import math

import numpy as np

from fedprior.errors import ConfigError
from fedprior.seeding import numpy_rng


def local_test_split(parts: tuple[np.ndarray, ...], labels: np.ndarray, fraction: float, seed: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """(each client's training indices, each client's local test indices): ``round(fraction * n)`` of a client's ``n`` held out.

    ``parts``: each client's indices into ``labels``. Stratified within each client by
    systematic sampling: its indices shuffled (stream ``("partition", "local-test", client)``),
    sorted by label (stably), and every ``n / m``-th taken, so each class gets its share of the
    ``m`` held out to within one. A client holding data keeps at least one image for its local
    test split and one for training; one that cannot (a single image) is a :class:`ConfigError`.
    A client with no data gets two empty arrays. Both arrays of a client are sorted and disjoint.
    """
    if not 0 <= fraction < 1:
        raise ConfigError(f"partition.local_test_fraction: {fraction!r} is not a fraction in [0, 1); 0 keeps every image for training")
    train, test = [], []
    for client, part in enumerate(parts):
        n = part.size
        m = 0 if n == 0 else max(1, int(round(fraction * n)))
        if n == 1:
            raise ConfigError(
                f"partition.local_test_fraction: client {client} holds 1 image, which leaves none to train on once it is its local test split "
                "(at least one image); raise partition.min_size to 2 or more, or set partition.local_test_fraction = 0"
            )
        if n and m >= n:  # the fraction itself takes every image: min_size cannot help
            highest = math.floor((n - 1) / n * 1000) / 1000
            raise ConfigError(
                f"partition.local_test_fraction: client {client} holds {n} images, and round({fraction:g} x {n}) = {m} of them would be its local "
                f"test split, leaving none to train on; lower partition.local_test_fraction to {highest:g} or less"
            )
        shuffled = numpy_rng(seed, "partition", "local-test", client).permutation(part)
        ordered = shuffled[np.argsort(labels[shuffled], kind="stable")]
        chosen = np.zeros(n, dtype=bool)
        chosen[(np.arange(m) * n) // max(m, 1)] = True
        train.append(np.sort(ordered[~chosen]).astype(np.int64))
        test.append(np.sort(ordered[chosen]).astype(np.int64))
    return tuple(train), tuple(test)
