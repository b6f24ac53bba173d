"""Office-Caltech-10 (Gong et al., CVPR 2012): the 10 classes Office-31 and Caltech-256 share, from four sources as four domains.

The usual copy (the one FedBN's code reads, Li et al., "FedBN: Federated Learning on Non-IID Features via Local Batch
Normalization", ICLR 2021, Sec. 5) is four folders ``amazon/``, ``caltech/``, ``dslr/``, ``webcam/``, each with one
folder of images per class (``back_pack``, ``bike``, ``calculator``, ``headphones``, ``keyboard``, ``laptop_computer``,
``monitor``, ``mouse``, ``mug``, ``projector``), or under ``<domain>/images/`` as Office-31 unpacks. The data has no
official split: each domain is split 80 : 20 into training and test images, class-stratified, by a fixed draw (stream
("office-caltech10-split", domain), seed 0) the same for every run. Images become 3 x 64 x 64 RGB (resized
bilinearly; decoded once into the user cache, :mod:`fedprior.data.image_folder`).

Looked for in ``data.root``, ``data.root/office_caltech_10`` and the user cache; there is no download. Every domain
found is used (at least one), in the order amazon, caltech, dslr, webcam.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.image_folder import load_class_folders, stratified_split
from fedprior.data.locations import dataset_cache_dir, none_found
from fedprior.seeding import numpy_rng

NAME = "office-caltech10"
URL = "github.com/med-air/FedBN (its office_caltech_10 folders)"
DOMAINS = ("amazon", "caltech", "dslr", "webcam")
FOLDERS = ("back_pack", "bike", "calculator", "headphones", "keyboard", "laptop_computer", "monitor", "mouse", "mug", "projector")
CLASS_NAMES = ("back pack", "bike", "calculator", "headphones", "keyboard", "laptop computer", "monitor", "mouse", "mug", "projector")
IMAGE_SIZE = 64
TEST_FRACTION = 0.2


def domain_folder(base: Path, domain: str) -> Path | None:
    """The folder of ``domain``'s class folders under ``base`` (``<domain>/`` or ``<domain>/images/``), if every class is there."""
    for folder in (base / domain, base / domain / "images"):
        if all((folder / cls).is_dir() for cls in FOLDERS):
            return folder
    return None


def load_office_caltech10(root: Path | None = None, download: bool = False) -> Dataset:
    """Load the Office-Caltech-10 domains found as 3x64x64 uint8 images, one domain each, each split 80 : 20."""
    bases = [root, root / "office_caltech_10"] if root else [dataset_cache_dir(NAME)]
    for base in bases:
        found = {d: f for d in DOMAINS if (f := domain_folder(base, d)) is not None}
        if found:
            break
    else:
        wanted = f"one or more of the domain folders {', '.join(f'{d}/<class>/' for d in DOMAINS)} (classes {', '.join(FOLDERS)})"
        raise none_found(NAME, root, bases, wanted, URL)
    train, test = [], []
    for d, (domain, folder) in enumerate(found.items()):
        images, labels = load_class_folders(NAME, folder, FOLDERS, size=IMAGE_SIZE)
        fit, held = stratified_split(labels, (1 - TEST_FRACTION, TEST_FRACTION), numpy_rng(0, "office-caltech10-split", domain))
        train.append((images[fit], labels[fit], np.full(fit.size, d, dtype=np.int64)))
        test.append((images[held], labels[held], np.full(held.size, d, dtype=np.int64)))
    return Dataset(
        name=NAME,
        train_images=np.concatenate([x for x, _, _ in train]),
        train_labels=np.concatenate([y for _, y, _ in train]),
        test_images=np.concatenate([x for x, _, _ in test]),
        test_labels=np.concatenate([y for _, y, _ in test]),
        class_names=CLASS_NAMES,
        source=str(base),
        train_domains=np.concatenate([g for _, _, g in train]),
        test_domains=np.concatenate([g for _, _, g in test]),
        domain_names=tuple(found),
    )
