"""scikit-learn's handwritten digits (8x8, 1,797 images), shipped inside scikit-learn."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.seeding import numpy_rng

TEST_FRACTION = 0.2


def load_digits(root: Path | None = None, download: bool = False) -> Dataset:
    """Load the digits as 1x8x8 uint8 images (pixel values 0..16 scaled to 0..255).

    The data has no official test split: a fixed, class-stratified 20% is held out
    (the same for every run, independent of the run seed).
    """
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = np.clip(np.rint(bunch.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)[:, None]
    labels = bunch.target.astype(np.int64)
    rng = numpy_rng(0, "digits-test-split")
    test = np.zeros(labels.size, dtype=bool)
    for cls in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cls))
        test[members[: int(round(TEST_FRACTION * members.size))]] = True
    return Dataset(
        name="digits",
        train_images=images[~test],
        train_labels=labels[~test],
        test_images=images[test],
        test_labels=labels[test],
        class_names=tuple(str(d) for d in range(10)),
    )
