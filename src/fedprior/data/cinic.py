"""CINIC-10 (Darlow et al., 2018) from its folders of 32x32 RGB PNG images.

The archive unpacks to ``train/<class>/*.png``, ``valid/<class>/*.png`` and
``test/<class>/*.png`` (90,000 images each). fedprior uses ``train`` as the train split
and ``test`` as the test split; ``valid`` is not used (merge it into ``train`` yourself
if you want the 180,000-image variant). ``data.root`` may point at the folder holding
``train/`` and ``test/`` or at its parent (``CINIC-10/`` or ``cinic-10/`` inside it), and is
then the only place looked at; without it the user cache is searched. The archive is
downloaded (into ``data.root`` or the user cache) with ``download=True`` only.

Decoding 180,000 PNGs takes a while, so the decoded arrays of each split are cached as
an ``.npz`` in the user cache (:mod:`fedprior.data.image_folder`): a second load reads one
file instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedprior.data.archive import extract_tar
from fedprior.data.dataset import Dataset
from fedprior.data.download import download_file
from fedprior.data.image_folder import load_class_folders
from fedprior.data.locations import dataset_cache_dir, download_dir, located, missing_in_root
from fedprior.errors import DatasetNotFoundError

NAME = "cinic10"
URL = "https://datashare.ed.ac.uk/handle/10283/3192"
ARCHIVE_URL = "https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz"
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
SPLITS = {"train": "train", "test": "test"}  # Dataset split -> CINIC folder; 'valid' is unused
IMAGE_SIZE = 32


def _folders(root: Path | None) -> list[Path]:
    """Folders searched, in order: ``root``, ``root/CINIC-10``, ``root/cinic-10`` if ``root`` is given, else the user cache."""
    if root:
        return [root, root / "CINIC-10", root / "cinic-10"]
    cache = dataset_cache_dir(NAME)
    return [cache, cache / "CINIC-10"]


def locate_cinic10(root: Path | None) -> Path:
    """The first folder holding ``train/<class>/`` and ``test/<class>/`` for all ten classes, or a clear error."""
    folders = _folders(root)
    for folder in folders:
        if all((folder / split / cls).is_dir() for split in SPLITS.values() for cls in CLASS_NAMES):
            return folder
    if root is not None:
        raise missing_in_root(NAME, root, folders, [f"{split}/{cls}/" for split in SPLITS.values() for cls in CLASS_NAMES], URL)
    searched = "\n".join(f"  {folder}" for folder in folders)
    raise DatasetNotFoundError(
        f"dataset '{NAME}' not found: put the folders train/<class>/ and test/<class>/ (classes "
        f"{', '.join(CLASS_NAMES)}) of *.png files in one of\n{searched}\n"
        f"(get them from {URL}, or pass --set data.root=FOLDER)"
    )


def load_split(split_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one CINIC-10 split folder, from the decoded cache when it is current."""
    return load_class_folders(NAME, split_dir, CLASS_NAMES, size=IMAGE_SIZE, extensions=(".png",), resize=False)


def load_cinic10(root: Path | None = None, download: bool = False) -> Dataset:
    """Load CINIC-10 (train = ``train/``, test = ``test/``) as 3x32x32 uint8 images, 10 classes."""

    def fetch() -> None:
        target = download_dir(NAME, root)
        archive = download_file(ARCHIVE_URL, target / "CINIC-10.tar.gz", timeout=60.0)
        extract_tar(archive, target)
        archive.unlink()

    folder = located(lambda: locate_cinic10(root), download, fetch)
    return Dataset.from_splits(NAME, folder, SPLITS, load_split, CLASS_NAMES)
