"""MedMNIST v2 (Yang et al., 2023) 2D datasets from their official ``.npz`` files.

Each file holds ``train_images``, ``train_labels``, ``val_images``, ``val_labels``,
``test_images``, ``test_labels``; images are ``(N, S, S)`` grayscale or ``(N, S, S, 3)``
RGB uint8 (S = 28 in ``<name>.npz``, 64/128/224 in the MedMNIST+ files
``<name>_<S>.npz``), labels ``(N, 1)``. fedprior uses ``train`` as the train split and
``test`` as the test split, and ``val`` as the validation split (``run.model_selection``).

``<name>.npz`` is looked for in ``data.root`` and ``data.root/medmnist`` when it is given,
else in the user cache and ``~/.medmnist`` (where the ``medmnist`` package downloads to).
``data.root`` may also name one ``.npz`` file directly, e.g. ``bloodmnist_64.npz`` for the
64x64 images. Downloads (``download=True`` only) go to ``data.root`` or the user cache. FedBM uses these datasets as stand-ins for
its medical benchmarks.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.download import download_file
from fedprior.data.locations import dataset_cache_dir, download_dir, find_files
from fedprior.errors import DatasetNotFoundError

URL = "https://zenodo.org/records/10519652"
CACHE_NAME = "medmnist"
KEYS = ("train_images", "train_labels", "test_images", "test_labels")
VAL_KEYS = ("val_images", "val_labels")


@dataclass(frozen=True)
class MedMnistInfo:
    """One MedMNIST dataset: its flag (file stem) and class names, as in MedMNIST's ``INFO``."""

    flag: str
    class_names: tuple[str, ...]


INFO: dict[str, MedMnistInfo] = {
    info.flag: info
    for info in (
        MedMnistInfo(
            "bloodmnist",
            (
                "basophil",
                "eosinophil",
                "erythroblast",
                "immature granulocytes(myelocytes, metamyelocytes and promyelocytes)",
                "lymphocyte",
                "monocyte",
                "neutrophil",
                "platelet",
            ),
        ),
        MedMnistInfo(
            "dermamnist",
            (
                "actinic keratoses and intraepithelial carcinoma",
                "basal cell carcinoma",
                "benign keratosis-like lesions",
                "dermatofibroma",
                "melanoma",
                "melanocytic nevi",
                "vascular lesions",
            ),
        ),
        MedMnistInfo("octmnist", ("choroidal neovascularization", "diabetic macular edema", "drusen", "normal")),
        MedMnistInfo(
            "pathmnist",
            (
                "adipose",
                "background",
                "debris",
                "lymphocytes",
                "mucus",
                "smooth muscle",
                "normal colon mucosa",
                "cancer-associated stroma",
                "colorectal adenocarcinoma epithelium",
            ),
        ),
        MedMnistInfo(
            "organamnist",
            (
                "bladder",
                "femur-left",
                "femur-right",
                "heart",
                "kidney-left",
                "kidney-right",
                "liver",
                "lung-left",
                "lung-right",
                "pancreas",
                "spleen",
            ),
        ),
    )
}


def file_name(flag: str, size: int = 28) -> str:
    """The official file name: ``<flag>.npz`` for 28x28, ``<flag>_<size>.npz`` otherwise."""
    return f"{flag}.npz" if size == 28 else f"{flag}_{size}.npz"


def _folders(root: Path | None) -> list[Path]:
    """Folders searched, in order: ``root`` and ``root/medmnist`` if ``root`` is given, else the user cache and ``~/.medmnist``."""
    return [root, root / "medmnist"] if root else [dataset_cache_dir(CACHE_NAME), Path.home() / ".medmnist"]


def locate_medmnist(flag: str, root: Path | None, size: int = 28) -> Path:
    """The ``.npz`` file of ``flag``: ``root`` itself if it is a file, else found in the searched folders."""
    if root is not None and root.suffix == ".npz":
        if root.is_file():
            return root
        raise DatasetNotFoundError(f"dataset '{flag}' not found: {root} does not exist (get it from {URL})")
    name = file_name(flag, size)
    return find_files(flag, _folders(root), [name], URL, root) / name


def read_medmnist_npz(path: Path) -> dict[str, np.ndarray]:
    """Read a MedMNIST ``.npz`` as ``(N, C, S, S)`` uint8 images and int64 labels per split (train, test, and val if present)."""
    try:
        with np.load(path) as npz:
            missing = [key for key in KEYS if key not in npz.files]
            if missing:
                raise DatasetNotFoundError(f"{path} is not a MedMNIST file: it lacks {', '.join(missing)}")
            raw = {key: npz[key] for key in KEYS + VAL_KEYS if key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise DatasetNotFoundError(f"{path} is not a readable .npz file ({error})") from error
    arrays = {}
    splits = ("train", "test", "val") if all(key in raw for key in VAL_KEYS) else ("train", "test")
    for split in splits:
        images, labels = raw[f"{split}_images"], raw[f"{split}_labels"]
        if images.ndim == 3:
            images = images[:, None]
        elif images.ndim == 4 and images.shape[3] == 3:
            images = images.transpose(0, 3, 1, 2)
        else:
            raise DatasetNotFoundError(f"{path}: {split}_images must be (N, S, S) or (N, S, S, 3), got {images.shape}")
        if labels.shape not in ((images.shape[0],), (images.shape[0], 1)):
            raise DatasetNotFoundError(f"{path}: {split}_labels must be (N, 1) with N = {images.shape[0]} (one class per image), got {labels.shape}")
        arrays[f"{split}_images"] = np.ascontiguousarray(images, dtype=np.uint8)
        arrays[f"{split}_labels"] = labels.reshape(-1).astype(np.int64)
    return arrays


def load_medmnist(flag: str, root: Path | None = None, download: bool = False, size: int = 28) -> Dataset:
    """Load MedMNIST dataset ``flag`` (train, test and, when the file has it, val) with its class names."""
    if flag not in INFO:
        raise DatasetNotFoundError(f"unknown MedMNIST dataset '{flag}'; known: {', '.join(INFO)}")
    try:
        path = locate_medmnist(flag, root, size)
    except DatasetNotFoundError:
        if not download or (root is not None and root.suffix == ".npz"):
            raise
        name = file_name(flag, size)
        path = download_file(f"{URL}/files/{name}?download=1", download_dir(CACHE_NAME, root) / name, timeout=60.0)
    arrays = read_medmnist_npz(path)
    return Dataset(name=flag, class_names=INFO[flag].class_names, source=str(path), **arrays)  # type: ignore[arg-type]  # the split arrays by field name; mypy matches them to domain_names too


def medmnist_loader(flag: str) -> Callable[[Path | None, bool], Dataset]:
    """A registry loader for the 28x28 files of MedMNIST dataset ``flag``."""

    def load(root: Path | None = None, download: bool = False) -> Dataset:
        return load_medmnist(flag, root, download)

    load.__name__ = f"load_{flag}"
    load.__doc__ = f"Load {flag} (MedMNIST, 28x28; train, val and test splits)."
    return load
