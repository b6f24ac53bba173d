"""Kvasir-v2 (Pogorelov et al., MMSys 2017): 8,000 endoscopic images of 8 classes, as folders of JPEG files.

The official archive (kvasir-dataset-v2.zip) unpacks to ``kvasir-dataset-v2/<class>/*.jpg``
with no split: FedBM (the FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning",
Sec. IV-A1) splits it at random 7 : 1 : 2 into training,
validation and test sets; here that split is class-stratified and fixed (stream
("kvasir-split",), seed 0), the same for every run. A copy already split into
``train/``, ``val/`` and ``test/`` class folders (the FedBM authors' processed copy) is
used as it is. Images are resized to 128 x 128 RGB, as the authors' code does.

Looked for in ``data.root``, ``data.root/kvasir-dataset-v2`` and the user cache; there
is no download (the archive is behind a form).
"""

from __future__ import annotations

from pathlib import Path

from fedprior.data.dataset import Dataset
from fedprior.data.image_folder import find_class_root, load_class_folders, split_dataset, stratified_split
from fedprior.data.locations import dataset_cache_dir
from fedprior.seeding import numpy_rng

NAME = "kvasir"
URL = "https://datasets.simula.no/kvasir/"
FOLDERS = ("dyed-lifted-polyps", "dyed-resection-margins", "esophagitis", "normal-cecum", "normal-pylorus", "normal-z-line", "polyps", "ulcerative-colitis")
CLASS_NAMES = ("dyed lifted polyp", "dyed resection margin", "esophagitis", "cecum", "pylorus", "Z-line", "polyps", "ulcerative colitis")
"""The concepts FedBM's code gives the classes (its ``Kvasir_Concepts``), in the folders' order."""
IMAGE_SIZE = 128
SPLIT = (0.7, 0.1, 0.2)


def load_kvasir(root: Path | None = None, download: bool = False) -> Dataset:
    """Load Kvasir-v2 as 3x128x128 uint8 images: train, val and test splits (7 : 1 : 2 when the copy is not split)."""
    base = root if root else dataset_cache_dir(NAME)  # data.root, when set, is the only place looked at
    candidates = [base, base / "kvasir-dataset-v2"]
    folder, layout = find_class_root(NAME, candidates, [("train", "val", "test"), ("",)], FOLDERS, URL, root=root)
    if layout == ("",):
        images, labels = load_class_folders(NAME, folder, FOLDERS, size=IMAGE_SIZE)
        train, val, test = stratified_split(labels, SPLIT, numpy_rng(0, "kvasir-split"))
        parts = {"train": (images[train], labels[train]), "val": (images[val], labels[val]), "test": (images[test], labels[test])}
    else:
        parts = {split: load_class_folders(NAME, folder / split, FOLDERS, size=IMAGE_SIZE) for split in layout}
    return split_dataset(NAME, CLASS_NAMES, parts)
