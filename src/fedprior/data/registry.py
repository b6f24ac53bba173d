"""The dataset registry: name -> loader, with a line of description each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedprior.data.cifar import load_cifar10, load_cifar100
from fedprior.data.cinic import load_cinic10
from fedprior.data.dataset import Dataset
from fedprior.data.digit5 import load_digit5
from fedprior.data.digits import load_digits
from fedprior.data.domainnet import load_domainnet
from fedprior.data.fashion_mnist import load_fashion_mnist
from fedprior.data.femnist import load_femnist
from fedprior.data.huggingface import hf_path, is_hf
from fedprior.data.kvasir import load_kvasir
from fedprior.data.medmnist import medmnist_loader
from fedprior.data.oct_c8 import load_oct_c8
from fedprior.data.office_caltech import load_office_caltech10
from fedprior.data.svhn import load_svhn
from fedprior.errors import ConfigError


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    loader: Callable[[Path | None, bool], Dataset]
    description: str
    builtin: bool = False
    """Shipped inside a Python package: reads no files, so ``data.root`` has no meaning for it."""
    generated: bool = False
    """Generated per client during a run (``synthetic``): it has no arrays to load, and no files."""
    domains: bool = False
    """Its images come from several domains (``Dataset.domain_names``): ``partition.domains = 'dataset'`` deals clients to them."""


DATASETS: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> None:
    DATASETS[spec.name] = spec


register(DatasetSpec("fashion-mnist", load_fashion_mnist, "Fashion-MNIST, 60k/10k 28x28 grayscale, 10 classes (embedded: Debian package)"))
register(DatasetSpec("digits", load_digits, "scikit-learn digits, 1,438/359 8x8 grayscale, 10 classes (embedded)", builtin=True))
register(DatasetSpec("cifar10", load_cifar10, "CIFAR-10, 50k/10k 32x32 RGB, 10 classes (python pickle batches)"))
register(DatasetSpec("cifar100", load_cifar100, "CIFAR-100, 50k/10k 32x32 RGB, 100 fine classes (python pickle batches)"))
register(DatasetSpec("cinic10", load_cinic10, "CINIC-10, 90k/90k 32x32 RGB, CIFAR-10's classes (PNG folders; train=train/, valid/ unused)"))
register(DatasetSpec("svhn", load_svhn, "SVHN cropped digits, 73,257/26,032 32x32 RGB, 10 classes (.mat files)"))
register(DatasetSpec("bloodmnist", medmnist_loader("bloodmnist"), "MedMNIST BloodMNIST, 11,959/3,421 28x28 RGB blood cells, 8 classes (.npz)"))
register(DatasetSpec("dermamnist", medmnist_loader("dermamnist"), "MedMNIST DermaMNIST, 7,007/2,005 28x28 RGB skin lesions, 7 classes (.npz)"))
register(DatasetSpec("octmnist", medmnist_loader("octmnist"), "MedMNIST OCTMNIST, 97,477/1,000 28x28 grayscale retinal OCT, 4 classes (.npz)"))
register(DatasetSpec("pathmnist", medmnist_loader("pathmnist"), "MedMNIST PathMNIST, 89,996/7,180 28x28 RGB colon pathology, 9 classes (.npz)"))
register(DatasetSpec("kvasir", load_kvasir, "Kvasir-v2, 8,000 endoscopic images resized to 128x128 RGB, 8 classes (class folders; split 7:1:2)"))
register(DatasetSpec("oct-c8", load_oct_c8, "OCT-C8, 18,400/2,800/2,800 retinal OCT images resized to 128x128 RGB, 8 classes (class folders)"))
register(DatasetSpec("femnist", load_femnist, "FEMNIST (LEAF JSON), FedBM's 35/5/10 writers with < 150 samples, 28x28 grayscale, 62 classes"))


def _generated(name: str) -> Callable[[Path | None, bool], Dataset]:
    def refuse(root: Path | None, download: bool) -> Dataset:
        raise ConfigError(f"data.dataset: '{name}' is generated per client as a run asks for its clients (fedprior run); it has no training set to load here")

    return refuse


register(
    DatasetSpec(
        "synthetic",
        _generated("synthetic"),
        "Synthetic(alpha, beta) of FedProx (Li et al., MLSys 2020): 60-d features, 10 classes, per-client models, power-law sizes; generated per client",
        builtin=True,
        generated=True,
    )
)
register(DatasetSpec("organamnist", medmnist_loader("organamnist"), "MedMNIST OrganAMNIST, 34,581/17,778 28x28 grayscale abdominal CT, 11 classes (.npz)"))
register(
    DatasetSpec(
        "digit5",
        load_digit5,
        "Digit-5: MNIST, MNIST-M, SVHN, SynthDigits, USPS as domains (the parts placed), 32x32 RGB, 10 classes (Digit-Five .mat files)",
        domains=True,
    )
)
register(
    DatasetSpec(
        "domainnet",
        load_domainnet,
        "DomainNet: clipart, infograph, painting, quickdraw, real, sketch as domains (those placed), 64x64 RGB, the listed classes (folders + split lists)",
        domains=True,
    )
)
register(
    DatasetSpec(
        "office-caltech10",
        load_office_caltech10,
        "Office-Caltech-10: amazon, caltech, dslr, webcam as domains (those placed), 64x64 RGB, 10 classes (class folders; split 8:2)",
        domains=True,
    )
)


def check_dataset_name(name: str) -> None:
    if is_hf(name):
        hf_path(name)
        return
    if name not in DATASETS:
        raise ConfigError(f"data.dataset: unknown dataset '{name}'; accepted: {', '.join(sorted(DATASETS))}, or hf:PATH (a Hugging Face dataset)")


def load_dataset(
    name: str,
    root: str | Path | None = None,
    download: bool = False,
    image_column: str | None = None,
    label_column: str | None = None,
    group_column: str | None = None,
) -> Dataset:
    """Load dataset ``name`` from ``root`` (only there), or from its default places; download only if ``download``.

    ``hf:PATH`` is a Hugging Face dataset (:mod:`fedprior.data.huggingface`), read with ``image_column`` and
    ``label_column`` (unset: its ``image``/``img`` and ``label`` columns), and ``group_column`` (unset: none) as each training
    image's natural owner; PATH says where, so ``root`` is refused.
    """
    check_dataset_name(name)
    check_columns(name, root, image_column, label_column, group_column)
    if is_hf(name):
        from fedprior.data.huggingface import load_hf

        return load_hf(name, download, image_column, label_column, group_column)
    if root and DATASETS[name].builtin:
        raise ConfigError(f"data.root: dataset '{name}' is built into a Python package and reads no files; remove data.root")
    return DATASETS[name].loader(Path(root).expanduser() if root else None, download)


def check_columns(name: str, root: str | Path | None, image_column: str | None, label_column: str | None, group_column: str | None = None) -> None:
    """``data.image_column``, ``data.label_column`` and ``data.group_column`` only with ``hf:PATH``, and ``data.root`` never with it."""
    if is_hf(name):
        if root:
            raise ConfigError(f"data.root: {name} names its own folder; remove data.root")
        return
    for field, value in (("image_column", image_column), ("label_column", label_column), ("group_column", group_column)):
        if value is not None:
            raise ConfigError(f"data.{field}: applies to data.dataset = 'hf:PATH' only (it is '{name}'); remove it")
