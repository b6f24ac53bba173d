"""Digit-5 (Digit-Five): five digit datasets as five domains, in the ``.mat`` files the multi-source adaptation code shares.

The files (the layout of Peng et al.'s Digit-Five as KD3A, Dassl and PFLlib read it), whichever of them the user placed:

- ``mnist_data.mat``: ``train_32`` (55,000 x 32 x 32 grayscale), ``test_32``, ``label_train`` / ``label_test`` one-hot (N, 10);
- ``mnistm_with_label.mat``: ``train`` / ``test`` (N x 28 x 28 x 3), ``label_train`` / ``label_test`` one-hot;
- ``svhn_train_32x32.mat`` and ``svhn_test_32x32.mat``: SVHN's cropped digits (``X`` (32, 32, 3, N), ``y`` with 10 for 0);
- ``syn_number.mat``: SynthDigits, ``train_data`` / ``test_data`` (N x 32 x 32 x 3), ``train_label`` / ``test_label`` (N, 1);
- ``usps_28x28.mat``: ``dataset``, a 2 x 2 cell: ``dataset[0][0]`` the training images (N, 1, 28, 28) in [0, 1],
  ``dataset[0][1]`` their labels (10 meaning 0, where a copy writes it so), ``dataset[1]`` the test split.

Every image becomes 3 x 32 x 32 (grayscale repeated over the channels, 28 x 28 resized bilinearly), the domains
named ``mnist``, ``mnistm``, ``svhn``, ``syn``, ``usps`` (those present, in that order), classes '0'..'9'. Looked for
in ``data.root`` and ``data.root/digit5`` when it is given, else in the user cache; never downloaded (the parts are
shared by their authors' pages: place them by hand).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.svhn import read_svhn_mat
from fedprior.errors import DatasetNotFoundError

NAME = "digit5"
SIZE = 32
CLASS_NAMES = tuple(str(d) for d in range(10))
URL = "github.com/FengHZ/KD3A (its Digit-Five .mat files)"

Split = tuple[np.ndarray, np.ndarray]


def _load(path: Path, keys: list[str] | None = None) -> dict:
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    try:
        return loadmat(path, variable_names=keys)
    except (MatReadError, ValueError, OSError, TypeError) as error:
        raise DatasetNotFoundError(f"{path} is not a readable .mat file ({error})") from error


def _need(mat: dict, path: Path, keys: tuple[str, ...]) -> None:
    missing = [k for k in keys if k not in mat]
    if missing:
        raise DatasetNotFoundError(f"{path} lacks the variables {', '.join(missing)}")


def to_rgb32(images: np.ndarray) -> np.ndarray:
    """``(N, C, H, W)`` images (any numeric range already in 0..255) as uint8 ``(N, 3, 32, 32)``: one channel repeated,
    other sizes resized bilinearly (torch's ``interpolate``, no antialiasing)."""
    images = np.asarray(images)
    if images.shape[1] == 1:
        images = np.repeat(images, 3, axis=1)
    if images.shape[2:] != (SIZE, SIZE) and images.shape[0]:
        import torch

        resized = torch.nn.functional.interpolate(torch.from_numpy(images.astype(np.float32)), size=(SIZE, SIZE), mode="bilinear", align_corners=False)
        images = resized.numpy()
    return np.ascontiguousarray(np.clip(np.round(images), 0, 255).astype(np.uint8))


def _labels(values: np.ndarray, path: Path) -> np.ndarray:
    """Class indices from one-hot rows or a column of digits (10 meaning 0)."""
    values = np.asarray(values)
    labels = values.argmax(axis=1) if values.ndim == 2 and values.shape[1] == 10 else values.reshape(-1).astype(np.int64)
    labels = np.where(labels == 10, 0, labels).astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise DatasetNotFoundError(f"{path}: labels must be digits 0..9 (10 meaning 0), found {labels.min()}..{labels.max()}")
    return labels


def read_mnist(folder: Path) -> tuple[Split, Split]:
    path = folder / "mnist_data.mat"
    mat = _load(path, ["train_32", "test_32", "label_train", "label_test"])
    _need(mat, path, ("train_32", "test_32", "label_train", "label_test"))
    return tuple((to_rgb32(mat[f"{s}_32"][:, None]), _labels(mat[f"label_{s}"], path)) for s in ("train", "test"))  # type: ignore[return-value]


def read_mnistm(folder: Path) -> tuple[Split, Split]:
    path = folder / "mnistm_with_label.mat"
    mat = _load(path, ["train", "test", "label_train", "label_test"])
    _need(mat, path, ("train", "test", "label_train", "label_test"))
    return tuple((to_rgb32(mat[s].transpose(0, 3, 1, 2)), _labels(mat[f"label_{s}"], path)) for s in ("train", "test"))  # type: ignore[return-value]


def read_svhn(folder: Path) -> tuple[Split, Split]:
    return read_svhn_mat(folder / "svhn_train_32x32.mat"), read_svhn_mat(folder / "svhn_test_32x32.mat")


def read_syn(folder: Path) -> tuple[Split, Split]:
    path = folder / "syn_number.mat"
    mat = _load(path, ["train_data", "test_data", "train_label", "test_label"])
    _need(mat, path, ("train_data", "test_data", "train_label", "test_label"))
    return tuple((to_rgb32(mat[f"{s}_data"].transpose(0, 3, 1, 2)), _labels(mat[f"{s}_label"], path)) for s in ("train", "test"))  # type: ignore[return-value]


def read_usps(folder: Path) -> tuple[Split, Split]:
    path = folder / "usps_28x28.mat"
    mat = _load(path, ["dataset"])
    _need(mat, path, ("dataset",))
    cell = mat["dataset"]
    if cell.shape[:2] != (2, 2):
        raise DatasetNotFoundError(f"{path}: 'dataset' must be a 2 x 2 cell (train, test) x (images, labels), got shape {cell.shape}")
    return tuple((to_rgb32(np.asarray(cell[i][0], dtype=np.float64) * 255.0), _labels(cell[i][1], path)) for i in (0, 1))  # type: ignore[return-value]


PARTS: dict[str, tuple[tuple[str, ...], Callable[[Path], tuple[Split, Split]]]] = {
    "mnist": (("mnist_data.mat",), read_mnist),
    "mnistm": (("mnistm_with_label.mat",), read_mnistm),
    "svhn": (("svhn_train_32x32.mat", "svhn_test_32x32.mat"), read_svhn),
    "syn": (("syn_number.mat",), read_syn),
    "usps": (("usps_28x28.mat",), read_usps),
}
"""Digit-5's domains: the files each needs, and its reader."""


def load_digit5(root: Path | None = None, download: bool = False) -> Dataset:
    """Load the Digit-5 parts found as 3x32x32 uint8 images, one domain each (at least one part must be there)."""
    from fedprior.data.locations import dataset_cache_dir, none_found

    folders = [root, root / NAME] if root else [dataset_cache_dir(NAME)]
    for folder in folders:
        present = [name for name, (files, _) in PARTS.items() if all((folder / f).is_file() for f in files)]
        if present:
            break
    else:
        wanted = "one or more of its parts (" + "; ".join(f"{name}: {', '.join(files)}" for name, (files, _) in PARTS.items()) + ")"
        raise none_found(NAME, root, folders, wanted, URL)
    parts = [PARTS[name][1](folder) for name in present]
    train = [p[0] for p in parts]
    test = [p[1] for p in parts]
    return Dataset(
        name=NAME,
        train_images=np.concatenate([x for x, _ in train]),
        train_labels=np.concatenate([y for _, y in train]),
        test_images=np.concatenate([x for x, _ in test]),
        test_labels=np.concatenate([y for _, y in test]),
        class_names=CLASS_NAMES,
        source=str(folder),
        train_domains=np.concatenate([np.full(y.size, d, dtype=np.int64) for d, (_, y) in enumerate(train)]),
        test_domains=np.concatenate([np.full(y.size, d, dtype=np.int64) for d, (_, y) in enumerate(test)]),
        domain_names=tuple(present),
    )
