"""Fashion-MNIST (Xiao et al., 2017) from its gzipped IDX files.

Looked for in ``data.root`` only when it is given, else in the Debian package's folder
(``apt-get install dataset-fashion-mnist`` puts them in /usr/share/datasets/fashion-mnist/)
and in the user cache; downloaded (into ``data.root`` or the user cache) only with ``download=True``.
"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.download import download_file
from fedprior.data.locations import dataset_cache_dir, download_dir, find_files
from fedprior.errors import DatasetNotFoundError

URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
CLASS_NAMES = ("T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot")


def read_idx(path: Path) -> np.ndarray:
    """Read a (gzipped) IDX file of unsigned bytes: magic 0x0000080D, then big-endian dimensions."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError; a cut .gz raises EOFError
        raise DatasetNotFoundError(f"{path} is damaged ({type(error).__name__}: {error}); replace it with an intact copy") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DatasetNotFoundError(f"{path} is not an IDX file of unsigned bytes (bad magic number)")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).copy()
    expected = math.prod(dims)
    if data.size != expected:
        raise DatasetNotFoundError(f"{path} is truncated: expected {expected} values, found {data.size}")
    return data.reshape(dims)


def load_fashion_mnist(root: Path | None = None, download: bool = False) -> Dataset:
    """Load Fashion-MNIST as 1x28x28 uint8 images and 10 class names."""
    folders = [root] if root else [DEBIAN_DIR, dataset_cache_dir("fashion-mnist")]
    files = list(FILES.values())
    if download and not any(all((f / n).is_file() for n in files) for f in folders):
        for name in files:
            target = download_dir("fashion-mnist", root) / name
            if not target.is_file():
                download_file(URL + name, target)
    folder = find_files("fashion-mnist", folders, files, URL + " (or: apt-get install dataset-fashion-mnist)", root)
    arrays = {key: read_idx(folder / name) for key, name in FILES.items()}
    return Dataset(
        name="fashion-mnist",
        train_images=arrays["train_images"][:, None],
        train_labels=arrays["train_labels"].astype(np.int64),
        test_images=arrays["test_images"][:, None],
        test_labels=arrays["test_labels"].astype(np.int64),
        class_names=CLASS_NAMES,
        source=str(folder),
    )
