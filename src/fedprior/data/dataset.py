"""The in-memory form every dataset loader returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedprior.errors import DatasetError


@dataclass(frozen=True)
class Dataset:
    """Images, labels and class names of one dataset, train and test splits (and a validation split where it has one).

    Images are ``uint8`` arrays laid out ``(N, C, H, W)`` (channels first, as torch
    wants them); labels are ``int64`` arrays of class indices into ``class_names``.
    ``source`` says where the files were read (named in the errors of a damaged dataset).
    ``train_groups`` (optional) gives each training image's natural owner (FEMNIST's
    writer), for the ``natural`` partition. ``train_domains`` and ``test_domains`` (optional, together with
    ``domain_names``) give each image's domain, an index into ``domain_names``: a multi-domain dataset's sources
    (Digit-5, DomainNet, Office-Caltech-10) or a feature-shift federation's (``partition.domains``).
    """

    name: str
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    class_names: tuple[str, ...]
    source: str = ""
    val_images: np.ndarray | None = None
    val_labels: np.ndarray | None = None
    train_groups: np.ndarray | None = None
    train_domains: np.ndarray | None = None
    test_domains: np.ndarray | None = None
    domain_names: tuple[str, ...] = ()

    @classmethod
    def from_splits(
        cls, name: str, folder: Path, files: Mapping[str, str], read: Callable[[Path], tuple[np.ndarray, np.ndarray]], class_names: tuple[str, ...]
    ) -> Dataset:
        """The dataset whose train and test images and labels ``read`` gives from ``folder / files['train']`` and ``folder / files['test']``."""
        train_images, train_labels = read(folder / files["train"])
        test_images, test_labels = read(folder / files["test"])
        return cls(name, train_images, train_labels, test_images, test_labels, class_names, source=str(folder))

    def __post_init__(self) -> None:
        where = f"{self.name} ({self.source})" if self.source else self.name
        damaged = "; the files are damaged or do not belong together"
        if (self.val_images is None) != (self.val_labels is None):
            raise DatasetError(f"{where}: give both val_images and val_labels, or neither")
        if self.train_groups is not None and self.train_groups.shape != self.train_labels.shape:
            raise DatasetError(f"{where}: train_groups must have one entry per training image{damaged}")
        if (self.train_domains is None) != (self.test_domains is None) or (self.train_domains is None) != (not self.domain_names):
            raise DatasetError(f"{where}: give train_domains, test_domains and domain_names together, or none of them")
        for split in ("train", "test"):
            domains = getattr(self, f"{split}_domains")
            if domains is not None and (
                domains.shape != getattr(self, f"{split}_labels").shape or (domains.size and not 0 <= domains.min() <= domains.max() < len(self.domain_names))
            ):
                raise DatasetError(f"{where}: {split}_domains must give each {split} image a domain in 0..{len(self.domain_names) - 1}{damaged}")
        for split in ("train", "test") + (("val",) if self.val_images is not None else ()):
            images = getattr(self, f"{split}_images")
            labels = getattr(self, f"{split}_labels")
            if images.ndim != 4 or images.dtype != np.uint8:
                raise DatasetError(f"{where}: {split} images must be uint8 (N, C, H, W), got {images.dtype} {images.shape}")
            if labels.shape != (images.shape[0],):
                raise DatasetError(f"{where}: {split} has {images.shape[0]} images but labels of shape {labels.shape}{damaged}")
            if labels.size and (labels.min() < 0 or labels.max() >= len(self.class_names)):
                raise DatasetError(f"{where}: {split} labels fall outside 0..{len(self.class_names) - 1} (found {labels.min()}..{labels.max()}){damaged}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.train_images.shape[1:])
