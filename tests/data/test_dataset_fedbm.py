"""FedBM's datasets: Kvasir-v2 and OCT-C8 as class folders of JPEGs, FEMNIST from LEAF's JSON; the natural partition.

Each test writes tiny files in the real on-disk format and loads them back; no test
touches the network (the offline fixture of test_datasets.py fails on any URL).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedprior.data import load_dataset
from fedprior.data.kvasir import FOLDERS as KVASIR_FOLDERS
from fedprior.data.oct_c8 import FOLDERS as OCT_FOLDERS
from fedprior.errors import ConfigError, DatasetNotFoundError
from fedprior.partition.natural import NaturalPartitioner
from tests.data.test_dataset import offline_and_isolated  # noqa: F401  (autouse: isolated cache, no network)


def _jpeg(path: Path, value: int, size: tuple[int, int] = (40, 30)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (value, value, value)).save(path, quality=100)


def write_class_folders(folder: Path, classes, per_class: int, value_of=lambda k, i: 20 * k + 10) -> None:
    for k, cls in enumerate(classes):
        for i in range(per_class):
            _jpeg(folder / cls / f"{i:03d}.jpg", value_of(k, i))


def test_kvasir_unsplit_archive_is_split_7_1_2_per_class_and_resized(tmp_path):
    write_class_folders(tmp_path / "kvasir-dataset-v2", KVASIR_FOLDERS, per_class=10)
    data = load_dataset("kvasir", root=tmp_path)
    assert data.train_images.shape == (56, 3, 128, 128) and data.train_images.dtype == np.uint8
    assert data.val_images.shape[0] == 8 and data.test_images.shape[0] == 16
    for split in ("train", "val", "test"):
        labels = getattr(data, f"{split}_labels")
        assert np.bincount(labels, minlength=8).tolist() == [{"train": 7, "val": 1, "test": 2}[split]] * 8
        # every image of class k was written with gray value 20k + 10 (JPEG rounding aside)
        images = getattr(data, f"{split}_images")
        assert np.all(np.abs(images.reshape(len(labels), -1).mean(1) - (20 * labels + 10)) < 2)
    assert data.class_names[3] == "cecum" and data.class_names[5] == "Z-line"
    again = load_dataset("kvasir", root=tmp_path / "kvasir-dataset-v2")  # same fixed split, from the decoded cache
    assert np.array_equal(again.test_labels, data.test_labels) and np.array_equal(again.train_images, data.train_images)


def test_kvasir_presplit_copy_is_used_as_it_is(tmp_path):
    for split, n in (("train", 3), ("val", 1), ("test", 2)):
        write_class_folders(tmp_path / split, KVASIR_FOLDERS, per_class=n)
    data = load_dataset("kvasir", root=tmp_path)
    assert (data.train_labels.size, data.val_labels.size, data.test_labels.size) == (24, 8, 16)


def test_oct_c8_official_splits_and_class_order(tmp_path):
    root = tmp_path / "RetinalOCT_Dataset"
    for split, n in (("train", 2), ("val", 1), ("test", 1)):
        write_class_folders(root / split, OCT_FOLDERS, per_class=n)
    data = load_dataset("oct-c8", root=tmp_path)
    assert data.train_images.shape == (16, 3, 128, 128)
    assert data.val_labels.tolist() == list(range(8)) and data.test_labels.tolist() == list(range(8))
    assert data.class_names[OCT_FOLDERS.index("DR")] == "diabetic retinopathy"
    assert data.class_names[OCT_FOLDERS.index("MH")] == "macular hole"
    (root / "test" / "CNV" / "000.jpg").unlink()
    (root / "test" / "CNV").rmdir()
    with pytest.raises(DatasetNotFoundError, match="CNV"):
        load_dataset("oct-c8", root=tmp_path)


def write_leaf(folder: Path, sizes: dict[str, int]) -> None:
    """Two LEAF JSON files; writer u's images are all value (index of u) / 100 with labels 0, 1, 2, ..."""
    folder.mkdir(parents=True)
    users = list(sizes)
    for part, chunk in enumerate((users[: len(users) // 2], users[len(users) // 2 :])):
        blob = {"users": chunk, "num_samples": [sizes[u] for u in chunk], "user_data": {}}
        for u in chunk:
            value = users.index(u) / 100
            blob["user_data"][u] = {"x": [[value] * 784] * sizes[u], "y": [i % 62 for i in range(sizes[u])]}
        (folder / f"all_data_{part}.json").write_text(json.dumps(blob))


def test_femnist_keeps_small_writers_and_splits_them_by_writer(tmp_path):
    sizes = {f"w{i:02d}": 3 + i % 5 for i in range(60)}
    sizes["big"] = 150  # not eligible: FedBM keeps writers with fewer than 150 samples
    write_leaf(tmp_path / "all_data", sizes)
    data = load_dataset("femnist", root=tmp_path)
    assert data.num_classes == 62 and data.class_names[10] == "capital letter A" and data.class_names[36] == "small letter a"
    assert data.train_images.shape[1:] == (1, 28, 28)
    groups = data.train_groups
    assert np.unique(groups).tolist() == list(range(35))
    # each writer's images carry its own value, so writers are never split across train/val/test
    values = lambda images: set(np.unique(images.reshape(len(images), -1)[:, 0]).tolist())  # noqa: E731
    train, val, test = values(data.train_images), values(data.val_images), values(data.test_images)
    assert len(train) == 35 and len(val) == 5 and len(test) == 10
    assert not (train & val or train & test or val & test)
    assert all(int(np.unique(data.train_images[groups == g]).size) == 1 for g in range(35))
    assert round(60 / 100 * 255) not in train | val | test  # the 150-sample writer (index 60) was left out
    again = load_dataset("femnist", root=tmp_path / "all_data")  # a fixed draw, cached
    assert np.array_equal(again.train_groups, groups) and np.array_equal(again.test_labels, data.test_labels)


def test_femnist_rejects_files_that_are_not_leaf_json(tmp_path):
    (tmp_path / "all_data_0.json").write_text(json.dumps({"users": ["a"]}))
    with pytest.raises(DatasetNotFoundError, match="not a LEAF FEMNIST JSON"):
        load_dataset("femnist", root=tmp_path)


def test_natural_partition_gives_each_owner_one_client():
    groups = np.array([5, 2, 5, 9, 2, 2])
    parts = NaturalPartitioner(3, groups).split(np.zeros(6, dtype=np.int64))
    assert [p.tolist() for p in parts] == [[1, 4, 5], [0, 2], [3]]
    with pytest.raises(ConfigError, match="num_clients = 3"):
        NaturalPartitioner(4, groups).split(np.zeros(6, dtype=np.int64))
    with pytest.raises(ConfigError, match="natural owners"):
        NaturalPartitioner(3, None)


def test_natural_partition_of_many_owners_is_each_owners_positions_in_order():
    """20,000 owners of 100,000 images: the owners' sorted positions, as a scan per owner (O(N S), the former code) gives them."""
    groups = np.random.default_rng(0).integers(0, 20_000, 100_000)
    owners = np.unique(groups)
    parts = NaturalPartitioner(owners.size, groups).split(np.zeros(groups.size, dtype=np.int64))
    for owner in owners[:: owners.size // 50]:
        np.testing.assert_array_equal(parts[int(np.searchsorted(owners, owner))], np.flatnonzero(groups == owner))
    assert sum(p.size for p in parts) == groups.size and all(p.dtype == np.int64 for p in parts)
