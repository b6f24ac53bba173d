"""The dataset registry: name -> loader, with a line of description each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fedprior.data.dataset import Dataset
from fedprior.data.digits import load_digits
from fedprior.data.fashion_mnist import load_fashion_mnist
from fedprior.errors import ConfigError


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    loader: Callable[[Path | None, bool], Dataset]
    description: str


DATASETS: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> None:
    DATASETS[spec.name] = spec


register(DatasetSpec("fashion-mnist", load_fashion_mnist, "Fashion-MNIST, 60k/10k 28x28 grayscale, 10 classes (embedded: Debian package)"))
register(DatasetSpec("digits", load_digits, "scikit-learn digits, 1,437/360 8x8 grayscale, 10 classes (embedded)"))


def check_dataset_name(name: str) -> None:
    if name not in DATASETS:
        raise ConfigError(f"data.dataset: unknown dataset '{name}'; accepted: {', '.join(sorted(DATASETS))}")


def load_dataset(name: str, root: str | Path | None = None, download: bool = False) -> Dataset:
    """Load dataset ``name`` from ``root`` (or its default places); download only if ``download``."""
    check_dataset_name(name)
    return DATASETS[name].loader(Path(root).expanduser() if root else None, download)
