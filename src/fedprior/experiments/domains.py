"""A feature-shift federation's data (``partition.domains``): each image's domain, and the images shifted into it.

Composes the two layers: :mod:`fedprior.partition.domains` parses the field and deals images to domains (NumPy),
:mod:`fedprior.data.shift` draws the rotations and styles. The run (``experiments/inputs.py``) shifts the images;
a dry run assigns the domains only (``images=False``), reading labels alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedprior.data import Dataset
from fedprior.errors import ConfigError
from fedprior.partition.domains import assign_domains, parse_domains

TEST_SEED = 1
"""The test set's images are dealt to domains from their own fixed stream (the training set's is seed 0)."""


def with_domains(dataset: Dataset, value: str, *, images: bool = True) -> Dataset:
    """``dataset`` as the federation of ``partition.domains = value`` sees it: its own domains (``"dataset"``), or each image
    dealt to a rotation or a style (:func:`~fedprior.partition.domains.assign_domains`) and, with ``images``, shifted into it
    (train, test and any validation split alike); ``dataset`` itself for ``""``."""
    spec = parse_domains(value)
    if spec is None:
        return dataset
    if spec.kind == "dataset":
        if not dataset.domain_names:
            raise ConfigError(
                f"partition.domains: 'dataset' uses the dataset's own domains, and '{dataset.name}' has none; use a multi-domain dataset "
                "(digit5, domainnet, office-caltech10) or 'rotation:K' / 'style'"
            )
        return dataset
    if dataset.domain_names:
        raise ConfigError(f"partition.domains: '{dataset.name}' has its own domains ({', '.join(dataset.domain_names)}); use partition.domains = 'dataset'")
    k = len(spec.names)
    height, width = dataset.image_shape[1:]
    if spec.kind == "rotation" and height != width and any(a % 180 for a in spec.angles):
        raise ConfigError(f"partition.domains: rotations need square images; '{dataset.name}' has {height}x{width} images")
    train_domains, test_domains = assign_domains(dataset.train_labels, k), assign_domains(dataset.test_labels, k, seed=TEST_SEED)
    changes: dict[str, object] = {"train_domains": train_domains, "test_domains": test_domains, "domain_names": spec.names}
    if images:
        from fedprior.data.shift import rotated, styled

        def shift(pixels: np.ndarray, domains: np.ndarray) -> np.ndarray:
            return rotated(pixels, domains, spec.angles) if spec.kind == "rotation" else styled(pixels, domains, spec.names)

        changes.update(train_images=shift(dataset.train_images, train_domains), test_images=shift(dataset.test_images, test_domains))
        if dataset.val_images is not None and dataset.val_labels is not None:
            changes["val_images"] = shift(dataset.val_images, assign_domains(dataset.val_labels, k, seed=TEST_SEED + 1))
    return dataclasses.replace(dataset, **changes)  # type: ignore[arg-type]
