"""Digit-5 (``fedprior.data.digit5``): tiny files in the Digit-Five .mat layouts, loaded back as domains.

Each part's own layout (MNIST's 32x32 grayscale with one-hot labels, MNIST-M's 28x28x3, SVHN's (32, 32, 3, N) with 10
for 0, SynthDigits' (N, 32, 32, 3), USPS's 2 x 2 cell of [0, 1] floats) with a marked pixel, so that a wrong axis order,
label mapping or value range fails; the parts placed become the domains, in a fixed order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from fedprior.data import load_dataset
from fedprior.errors import DatasetNotFoundError
from tests.data.test_dataset import write_svhn_mat


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))


def one_hot(labels: list[int]) -> np.ndarray:
    return np.eye(10, dtype=np.uint8)[labels]


def write_mnist(folder: Path) -> None:
    train = np.zeros((3, 32, 32), dtype=np.uint8)
    train[1, 4, 7] = 200  # image 1, row 4, column 7
    savemat(
        folder / "mnist_data.mat",
        {"train_32": train, "test_32": np.zeros((2, 32, 32), np.uint8), "label_train": one_hot([3, 1, 4]), "label_test": one_hot([1, 5])},
    )


def write_mnistm(folder: Path) -> None:
    train = np.zeros((2, 28, 28, 3), dtype=np.uint8)
    train[0, :, :, 2] = 90  # the blue channel of image 0
    savemat(
        folder / "mnistm_with_label.mat",
        {"train": train, "test": np.zeros((1, 28, 28, 3), np.uint8), "label_train": one_hot([9, 2]), "label_test": one_hot([6])},
    )


def write_syn(folder: Path) -> None:
    train = np.zeros((2, 32, 32, 3), dtype=np.uint8)
    train[1, 30, 2, 0] = 77  # image 1, row 30, column 2, red
    savemat(
        folder / "syn_number.mat",
        {"train_data": train, "test_data": np.zeros((1, 32, 32, 3), np.uint8), "train_label": np.array([[0], [8]]), "test_label": np.array([[7]])},
    )


def write_usps(folder: Path) -> None:
    train = np.zeros((2, 1, 28, 28))
    train[0] = 1.0  # white: 255 after scaling
    cell = np.empty((2, 2), dtype=object)
    cell[0, 0], cell[0, 1] = train, np.array([[10], [4]])  # 10 is the digit 0
    cell[1, 0], cell[1, 1] = np.zeros((1, 1, 28, 28)), np.array([[3]])
    savemat(folder / "usps_28x28.mat", {"dataset": cell})


def test_every_part_in_its_layout_becomes_a_domain_of_3x32x32_images(tmp_path):
    write_mnist(tmp_path)
    write_mnistm(tmp_path)
    write_svhn_mat(tmp_path / "svhn_train_32x32.mat", [10, 2], mark=(1, 0, 5, 6, 99))
    write_svhn_mat(tmp_path / "svhn_test_32x32.mat", [4])
    write_syn(tmp_path)
    write_usps(tmp_path)
    data = load_dataset("digit5", root=tmp_path)
    assert data.domain_names == ("mnist", "mnistm", "svhn", "syn", "usps")
    assert data.train_images.shape == (11, 3, 32, 32) and data.train_images.dtype == np.uint8
    assert data.train_labels.tolist() == [3, 1, 4, 9, 2, 0, 2, 0, 8, 0, 4]
    assert data.train_domains.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert data.test_labels.tolist() == [1, 5, 6, 4, 7, 3] and data.test_domains.tolist() == [0, 0, 1, 2, 3, 4]
    assert data.train_images[1, :, 4, 7].tolist() == [200, 200, 200] and data.train_images[:3].sum() == 600  # gray repeated
    mnistm = data.train_images[3]
    assert mnistm[2].min() == mnistm[2].max() == 90 and mnistm[:2].max() == 0  # 28 -> 32 resized, channel kept
    assert data.train_images[6, 0, 5, 6] == 99  # SVHN's X[h, w, c, n]
    assert data.train_images[8, 0, 30, 2] == 77  # SynthDigits' (N, H, W, C)
    assert data.train_images[9].min() == 255 and data.train_images[10].max() == 0  # USPS's [0, 1] scaled


def test_the_parts_placed_are_the_domains(tmp_path):
    (tmp_path / "digit5").mkdir()
    write_usps(tmp_path / "digit5")
    data = load_dataset("digit5", root=tmp_path)  # root/digit5 is looked at too
    assert data.domain_names == ("usps",) and data.train_labels.tolist() == [0, 4]


def test_no_part_is_an_error_naming_the_files_and_where_to_get_them(tmp_path):
    with pytest.raises(DatasetNotFoundError, match=f"^data.root {tmp_path} is empty: dataset 'digit5' needs one or more of its parts.*usps_28x28.mat.*KD3A"):
        load_dataset("digit5", root=tmp_path)
    (tmp_path / "usps_28x28.mat").write_bytes(b"not a mat file")
    with pytest.raises(DatasetNotFoundError, match="usps_28x28.mat is not a readable .mat file"):
        load_dataset("digit5", root=tmp_path)
