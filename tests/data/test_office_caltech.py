"""Office-Caltech-10 (``fedprior.data.office_caltech``): domain folders of class folders of JPEG files, written small."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fedprior.data import load_dataset
from fedprior.data.office_caltech import FOLDERS
from fedprior.errors import DatasetNotFoundError


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))


def write_domain(folder: Path, per_class: int, value: int) -> None:
    for cls in FOLDERS:
        (folder / cls).mkdir(parents=True)
        for k in range(per_class):
            Image.fromarray(np.full((20, 30, 3), value, dtype=np.uint8)).save(folder / cls / f"frame_{k:04d}.jpg", quality=100)


def test_each_domain_folder_is_a_domain_split_eight_to_two_by_class(tmp_path):
    write_domain(tmp_path / "amazon" / "images", 5, 40)  # Office-31's layout
    write_domain(tmp_path / "webcam", 5, 200)
    data = load_dataset("office-caltech10", root=tmp_path)
    assert data.domain_names == ("amazon", "webcam") and data.class_names[0] == "back pack"
    assert data.train_images.shape == (80, 3, 64, 64) and data.test_images.shape == (20, 3, 64, 64)  # 4 : 1 of each class of each domain
    for split in ("train", "test"):
        images, labels, domains = (getattr(data, f"{split}_{k}") for k in ("images", "labels", "domains"))
        assert np.bincount(domains).tolist() == ([40, 40] if split == "train" else [10, 10])
        assert all(np.bincount(labels[domains == d], minlength=10).tolist() == [4 if split == "train" else 1] * 10 for d in (0, 1))
        assert abs(int(images[domains == 0].mean()) - 40) <= 2 and abs(int(images[domains == 1].mean()) - 200) <= 2  # each image in its own domain
    again = load_dataset("office-caltech10", root=tmp_path)
    np.testing.assert_array_equal(again.test_labels, data.test_labels)  # a fixed split


def test_no_domain_is_an_error_naming_the_folders(tmp_path):
    (tmp_path / "dslr" / "bike").mkdir(parents=True)  # a domain lacking classes is not one
    with pytest.raises(DatasetNotFoundError, match=f"^data.root {tmp_path} lacks them: dataset 'office-caltech10' needs .*webcam/<class>/.*FedBN"):
        load_dataset("office-caltech10", root=tmp_path)
