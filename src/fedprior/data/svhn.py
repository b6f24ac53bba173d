"""SVHN, the Street View House Numbers (Netzer et al., 2011), cropped-digit format.

Read from ``train_32x32.mat`` and ``test_32x32.mat`` (MATLAB files: ``X`` is
``(32, 32, 3, N)`` uint8, ``y`` is ``(N, 1)`` with digits 1..9 as themselves and digit 0
stored as label 10, which is mapped back to 0). The optional ``extra_32x32.mat`` is not
used. Looked for in ``data.root`` and ``data.root/svhn`` when it is given, else in the user
cache; downloaded there with ``download=True`` only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.download import download_file
from fedprior.data.locations import dataset_cache_dir, download_dir, find_files, located
from fedprior.errors import DatasetNotFoundError

NAME = "svhn"
URL = "http://ufldl.stanford.edu/housenumbers/"
FILES = {"train": "train_32x32.mat", "test": "test_32x32.mat"}
CLASS_NAMES = tuple(str(d) for d in range(10))


def _folders(root: Path | None) -> list[Path]:
    """Folders searched, in order: ``root`` and ``root/svhn`` if ``root`` is given, else the user cache."""
    return [root, root / NAME] if root else [dataset_cache_dir(NAME)]


def locate_svhn(root: Path | None) -> Path:
    """The folder holding both .mat files, without touching the network."""
    return find_files(NAME, _folders(root), list(FILES.values()), URL, root)


def read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one SVHN .mat file as ``(N, 3, 32, 32)`` uint8 images and int64 labels 0..9."""
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    try:
        mat = loadmat(path, variable_names=["X", "y"])
    except (MatReadError, ValueError, OSError, TypeError) as error:
        raise DatasetNotFoundError(f"{path} is not a readable SVHN .mat file ({error})") from error
    if "X" not in mat or "y" not in mat:
        raise DatasetNotFoundError(f"{path} lacks the variables X and y")
    images, labels = mat["X"], np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if images.ndim != 4 or images.shape[:3] != (32, 32, 3) or images.shape[3] != labels.size:
        raise DatasetNotFoundError(f"{path}: expected X of shape (32, 32, 3, N) and N labels, got {images.shape} and {labels.size}")
    if labels.size and (labels.min() < 1 or labels.max() > 10):
        raise DatasetNotFoundError(f"{path}: labels must lie in 1..10 (10 meaning digit 0), found {labels.min()}..{labels.max()}")
    labels[labels == 10] = 0
    # X[h, w, c, n] -> [n, c, h, w]
    return np.ascontiguousarray(images.transpose(3, 2, 0, 1), dtype=np.uint8), labels


def load_svhn(root: Path | None = None, download: bool = False) -> Dataset:
    """Load SVHN (73,257 train / 26,032 test) as 3x32x32 uint8 images, classes '0'..'9'."""

    def fetch() -> None:
        for name in FILES.values():
            target = download_dir(NAME, root) / name
            if not target.is_file():
                download_file(URL + name, target, timeout=60.0)

    folder = located(lambda: locate_svhn(root), download, fetch)
    return Dataset.from_splits(NAME, folder, FILES, read_svhn_mat, CLASS_NAMES)
