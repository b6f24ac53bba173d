"""CIFAR-10 and CIFAR-100 (Krizhevsky, 2009) from the "python version" pickle batches.

CIFAR-10 lives in a folder ``cifar-10-batches-py/`` (``data_batch_1`` .. ``data_batch_5``,
``test_batch``, ``batches.meta``); CIFAR-100 in ``cifar-100-python/`` (``train``, ``test``,
``meta``; the 100 fine labels are used, the 20 coarse ones are ignored). ``data.root`` may
point at that folder or at its parent, and is then the only place looked at; without it,
the user cache is searched. With ``download=True`` only, a missing dataset is fetched as
the official ``.tar.gz`` into ``data.root`` (or the user cache) and unpacked there.

Each batch is a pickled dict with bytes keys: ``b'data'`` is an ``N x 3072`` uint8 array
holding the red, then green, then blue 32x32 plane of each image, row by row, so a
plain reshape gives ``(N, 3, 32, 32)``.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedprior.data.archive import extract_tar
from fedprior.data.dataset import Dataset
from fedprior.data.download import download_file
from fedprior.data.locations import dataset_cache_dir, download_dir, find_files, located
from fedprior.errors import DatasetNotFoundError


@dataclass(frozen=True)
class CifarLayout:
    """Where one CIFAR variant keeps its batches and which keys hold labels and class names."""

    name: str
    folder: str
    train_files: tuple[str, ...]
    test_file: str
    meta_file: str
    label_key: bytes
    names_key: bytes
    url: str


CIFAR10 = CifarLayout(
    name="cifar10",
    folder="cifar-10-batches-py",
    train_files=tuple(f"data_batch_{i}" for i in range(1, 6)),
    test_file="test_batch",
    meta_file="batches.meta",
    label_key=b"labels",
    names_key=b"label_names",
    url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
)
CIFAR100 = CifarLayout(
    name="cifar100",
    folder="cifar-100-python",
    train_files=("train",),
    test_file="test",
    meta_file="meta",
    label_key=b"fine_labels",
    names_key=b"fine_label_names",
    url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
)

# What a CIFAR pickle may reference: plain containers plus numpy arrays. Anything else
# (a tampered file trying to run code) is refused.
_ALLOWED_GLOBALS = {
    ("_codecs", "encode"),  # how Python 3 writes bytes in protocol-2 pickles
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, bytes and numpy arrays only; refuses every other global."""

    def find_class(self, module: str, name: str):
        module = module.replace("numpy.core.", "numpy._core.")  # files written by numpy 1.x
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def read_batch(path: Path) -> dict[bytes, object]:
    """Read one pickled CIFAR batch or meta file into a dict with bytes keys."""
    try:
        with open(path, "rb") as handle:
            batch = _ArrayUnpickler(handle, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as error:
        raise DatasetNotFoundError(f"{path} is not a CIFAR pickle batch ({error})") from error
    if not isinstance(batch, dict):
        raise DatasetNotFoundError(f"{path} is not a CIFAR pickle batch (holds a {type(batch).__name__}, not a dict)")
    return batch


def _images_and_labels(path: Path, layout: CifarLayout) -> tuple[np.ndarray, np.ndarray]:
    """The ``(N, 3, 32, 32)`` uint8 images and int64 labels of one batch file."""
    batch = read_batch(path)
    if b"data" not in batch or layout.label_key not in batch:
        raise DatasetNotFoundError(f"{path} lacks the keys b'data' and {layout.label_key!r}")
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    labels = np.asarray(batch[layout.label_key], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.shape[0] != labels.size:
        raise DatasetNotFoundError(f"{path}: expected data of shape (N, 3072) and N labels, got {data.shape} and {labels.size} labels")
    return data.reshape(-1, 3, 32, 32), labels


def _files(layout: CifarLayout) -> list[str]:
    return [*layout.train_files, layout.test_file, layout.meta_file]


def _folders(layout: CifarLayout, root: Path | None) -> list[Path]:
    """Folders searched, in order: ``root/<folder>`` and ``root`` if ``root`` is given, else the user cache."""
    return [root / layout.folder, root] if root else [dataset_cache_dir(layout.name) / layout.folder]


def locate_cifar(layout: CifarLayout, root: Path | None) -> Path:
    """The folder holding every batch of ``layout``, without touching the network."""
    return find_files(layout.name, _folders(layout, root), _files(layout), layout.url, root)


def _download(layout: CifarLayout, root: Path | None) -> None:
    """Fetch and unpack the official archive into ``root`` or the user cache (only called with download=True)."""
    target = download_dir(layout.name, root)
    archive = download_file(layout.url, target / layout.url.rsplit("/", 1)[1])
    extract_tar(archive, target)
    archive.unlink()


def load_cifar(layout: CifarLayout, root: Path | None = None, download: bool = False) -> Dataset:
    """Load a CIFAR variant as 3x32x32 uint8 images with the class names from its meta file."""
    folder = located(lambda: locate_cifar(layout, root), download, lambda: _download(layout, root))
    train = [_images_and_labels(folder / name, layout) for name in layout.train_files]
    test_images, test_labels = _images_and_labels(folder / layout.test_file, layout)
    meta = read_batch(folder / layout.meta_file)
    if layout.names_key not in meta:
        raise DatasetNotFoundError(f"{folder / layout.meta_file} lacks the key {layout.names_key!r}")
    names = meta[layout.names_key]
    if not isinstance(names, (list, tuple)):
        raise DatasetNotFoundError(f"{folder / layout.meta_file}: {layout.names_key!r} holds a {type(names).__name__}, not a list of names")
    class_names = tuple(n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names)
    return Dataset(
        name=layout.name,
        train_images=np.concatenate([images for images, _ in train]),
        train_labels=np.concatenate([labels for _, labels in train]),
        test_images=test_images,
        test_labels=test_labels,
        class_names=class_names,
        source=str(folder),
    )


def load_cifar10(root: Path | None = None, download: bool = False) -> Dataset:
    """CIFAR-10: 50,000 train / 10,000 test 3x32x32 images, 10 classes."""
    return load_cifar(CIFAR10, root, download)


def load_cifar100(root: Path | None = None, download: bool = False) -> Dataset:
    """CIFAR-100: 50,000 train / 10,000 test 3x32x32 images, 100 fine classes."""
    return load_cifar(CIFAR100, root, download)
