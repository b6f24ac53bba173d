"""Content fingerprints of datasets, for cache keys that change when the data changes."""

from __future__ import annotations

import hashlib

import numpy as np

from fedprior.data.dataset import Dataset


def array_fingerprint(images: np.ndarray, labels: np.ndarray) -> str:
    """16 hex digits hashing shape, labels and every image's bytes (a few hundred MB/s)."""
    digest = hashlib.sha256()
    digest.update(str((images.shape, str(images.dtype))).encode())
    digest.update(np.ascontiguousarray(labels).tobytes())
    digest.update(np.ascontiguousarray(images).tobytes())
    return digest.hexdigest()[:16]


def split_fingerprint(dataset: Dataset, split: str) -> str:
    """Fingerprint of one split ('train' or 'test') of ``dataset``."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return array_fingerprint(getattr(dataset, f"{split}_images"), getattr(dataset, f"{split}_labels"))
