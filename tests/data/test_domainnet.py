"""DomainNet (``fedprior.data.domainnet``): domain folders and their split lists, written small in the release's layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fedprior.data import load_dataset
from fedprior.errors import DatasetNotFoundError


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))


def write_domain(root: Path, domain: str, classes: dict[str, int], value: int, number: dict[str, int]) -> None:
    """``classes[c]`` images of class c (each of colour ``value``), listed 2 : 1 in the train and test lists."""
    lines: dict[str, list[str]] = {"train": [], "test": []}
    for cls, count in classes.items():
        (root / domain / cls).mkdir(parents=True)
        for k in range(count):
            path = f"{domain}/{cls}/{domain}_{k:03d}.jpg"
            Image.fromarray(np.full((40, 50, 3), value, dtype=np.uint8)).save(root / path, quality=100)
            lines["test" if k % 3 == 2 else "train"].append(f"{path} {number[cls]}")
    for split, listed in lines.items():
        (root / f"{domain}_{split}.txt").write_text("\n".join(listed) + "\n")


def test_domains_with_their_lists_and_the_classes_they_name(tmp_path):
    numbers = {"bird": 34, "zebra": 344, "teapot": 300}  # the full release's numbers: the names decide, in sorted order
    write_domain(tmp_path, "clipart", {"bird": 3, "zebra": 3}, 30, numbers)
    write_domain(tmp_path, "sketch", {"bird": 3, "teapot": 3}, 220, numbers)
    (tmp_path / "real").mkdir()  # a folder without lists is not a domain
    data = load_dataset("domainnet", root=tmp_path)
    assert data.domain_names == ("clipart", "sketch") and data.class_names == ("bird", "teapot", "zebra")
    assert data.train_images.shape == (8, 3, 64, 64) and data.test_images.shape == (4, 3, 64, 64)
    assert data.train_labels.tolist() == [0, 0, 2, 2, 0, 0, 1, 1] and data.train_domains.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert data.test_labels.tolist() == [0, 2, 0, 1] and data.test_domains.tolist() == [0, 0, 1, 1]
    assert abs(int(data.train_images[:4].mean()) - 30) <= 2 and abs(int(data.train_images[4:].mean()) - 220) <= 2


def test_a_listed_image_that_is_missing_or_a_bad_line_is_an_error(tmp_path):
    write_domain(tmp_path, "clipart", {"bird": 3}, 30, {"bird": 34})
    (tmp_path / "clipart" / "bird" / "clipart_000.jpg").unlink()
    with pytest.raises(DatasetNotFoundError, match="clipart_train.txt names 1 images that are not there"):
        load_dataset("domainnet", root=tmp_path)
    (tmp_path / "clipart_train.txt").write_text("clipart_000.jpg\n")
    with pytest.raises(DatasetNotFoundError, match="line 1: expected '<domain>/<class>/<file> <class number>'"):
        load_dataset("domainnet", root=tmp_path)


def test_no_domain_is_an_error_naming_the_lists(tmp_path):
    with pytest.raises(DatasetNotFoundError, match=f"^data.root {tmp_path} is empty: dataset 'domainnet' needs .*clipart_train.txt|<domain>_train.txt"):
        load_dataset("domainnet", root=tmp_path)
