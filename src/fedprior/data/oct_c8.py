"""OCT-C8 (Subramanian et al., ICCCI 2022): 24,000 retinal OCT images of 8 classes, as folders of JPEG files.

The Kaggle release ("Retinal OCT Images (OCT-C8)") holds ``train/``, ``val/`` and ``test/``,
each with one folder per class (AMD, CNV, CSR, DME, DR, DRUSEN, MH, NORMAL): 18,400 /
2,800 / 2,800 images, FedBM's official split (the FedBM paper,
"FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. IV-A1). Images are converted
to RGB and resized to 128 x 128, as the authors' code does.

Looked for in ``data.root``, ``data.root/RetinalOCT_Dataset``, ``data.root/Retinal_OCT-C8``
and the user cache; there is no download (Kaggle needs an account).

The class concepts are the folders' diseases in the folders' order. (The authors' code
lists its concepts in another order than its label numbers for DR, DRUSEN and MH, so
its prompts for those three classes describe another class; here they match.)
"""

from __future__ import annotations

from pathlib import Path

from fedprior.data.dataset import Dataset
from fedprior.data.image_folder import find_class_root, load_class_folders, split_dataset
from fedprior.data.locations import dataset_cache_dir

NAME = "oct-c8"
URL = "https://www.kaggle.com/datasets/obulisainaren/retinal-oct-c8"
FOLDERS = ("AMD", "CNV", "CSR", "DME", "DR", "DRUSEN", "MH", "NORMAL")
CLASS_NAMES = (
    "age-related macular degeneration",
    "choroidal neovascularization",
    "central serous retinopathy",
    "diabetic macular edema",
    "diabetic retinopathy",
    "drusen",
    "macular hole",
    "normal retina",
)
IMAGE_SIZE = 128
SPLITS = ("train", "val", "test")


def load_oct_c8(root: Path | None = None, download: bool = False) -> Dataset:
    """Load OCT-C8 as 3x128x128 uint8 images with its official train, val and test splits."""
    base = root if root else dataset_cache_dir(NAME)  # data.root, when set, is the only place looked at
    candidates = [base, base / "RetinalOCT_Dataset", base / "Retinal_OCT-C8"]
    folder, _ = find_class_root(NAME, candidates, [SPLITS], FOLDERS, URL, root=root)
    parts = {split: load_class_folders(NAME, folder / split, FOLDERS, size=IMAGE_SIZE) for split in SPLITS}
    return split_dataset(NAME, CLASS_NAMES, parts)
