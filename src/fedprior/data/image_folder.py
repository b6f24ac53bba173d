"""Datasets stored as folders of image files, one folder per class: decoding, resizing and a decoded cache.

CINIC-10 (PNG), Kvasir-v2 and OCT-C8 (JPEG) come this way: ``<split>/<class>/*.<ext>``.
Decoding tens of thousands of files takes a while, so the decoded arrays of a split are
cached as an ``.npz`` in the user cache, keyed by the split folder's resolved path, its
number of image files and the target size: a second load reads one file instead.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedprior.atomic import atomic_write
from fedprior.data.locations import dataset_cache_dir
from fedprior.errors import DatasetNotFoundError

if TYPE_CHECKING:
    from fedprior.data.dataset import Dataset


def image_files(split_dir: Path, class_folders: Sequence[str], extensions: tuple[str, ...]) -> list[tuple[Path, int]]:
    """Every ``<class>/*<ext>`` under ``split_dir`` with its class index, in a fixed (sorted) order."""
    files: list[tuple[Path, int]] = []
    for label, folder in enumerate(class_folders):
        names = sorted(e.name for e in os.scandir(split_dir / folder) if e.name.lower().endswith(extensions))
        files.extend((split_dir / folder / name, label) for name in names)
    return files


def decode_images(files: Sequence[tuple[Path, int]], size: int, channels: int, description: str, resize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Decode images to ``(N, channels, size, size)`` uint8 (converted to RGB or grayscale; resized bilinearly when
    ``resize``, else required to be ``size`` x ``size``) and their int64 labels."""
    from PIL import Image
    from rich.console import Console
    from rich.progress import track

    mode = {1: "L", 3: "RGB"}[channels]
    images = np.empty((len(files), channels, size, size), dtype=np.uint8)
    labels = np.fromiter((label for _, label in files), dtype=np.int64, count=len(files))
    progress = track(files, description=description, transient=True, console=Console(stderr=True), disable=len(files) < 2000)
    for i, (path, _) in enumerate(progress):
        try:
            with Image.open(path) as opened:
                image = opened.convert(mode)
                if resize and image.size != (size, size):
                    image = image.resize((size, size), Image.Resampling.BILINEAR)
                pixels = np.asarray(image)
        except OSError as error:
            raise DatasetNotFoundError(f"{path} is not a readable image ({error})") from error
        if pixels.shape[:2] != (size, size):
            raise DatasetNotFoundError(f"{path}: expected a {size}x{size} image, got {pixels.shape[1]}x{pixels.shape[0]}")
        images[i] = pixels.reshape(size, size, channels).transpose(2, 0, 1)
    return images, labels


def _cache_path(cache_name: str, split_dir: Path, count: int, size: int) -> Path:
    key = hashlib.sha256(f"{split_dir.resolve()}\n{count}\n{size}".encode()).hexdigest()[:16]
    return dataset_cache_dir(cache_name) / "decoded" / f"{split_dir.name}-{count}-{key}.npz"


def write_npz(path: Path, **arrays: np.ndarray) -> None:
    """Save decoded arrays atomically (:func:`fedprior.atomic.atomic_write`, which also clears temp files a killed
    write left); a cache that cannot be written only costs speed next time."""
    try:
        atomic_write(path, lambda out: np.savez(out, allow_pickle=False, **arrays))  # numeric arrays only
    except OSError as error:
        warnings.warn(f"could not cache decoded images at {path}: {error}", stacklevel=3)


def load_class_folders(
    cache_name: str,
    split_dir: Path,
    class_folders: Sequence[str],
    *,
    size: int,
    channels: int = 3,
    extensions: tuple[str, ...] = (".png", ".jpg", ".jpeg"),
    resize: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one split folder (``<class>/*``), from the decoded cache when it is current."""
    files = image_files(split_dir, class_folders, extensions)
    cached = _cache_path(cache_name, split_dir, len(files), size)
    if cached.is_file():
        try:
            with np.load(cached) as arrays:
                return arrays["images"], arrays["labels"]
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache file: decode again and overwrite it
    images, labels = decode_images(files, size, channels, f"decoding {cache_name} {split_dir.name}", resize)
    write_npz(cached, images=images, labels=labels)
    return images, labels


def split_dataset(name: str, class_names: tuple[str, ...], parts: dict[str, tuple[np.ndarray, np.ndarray]]) -> Dataset:
    """A Dataset from ``{"train": (images, labels), "test": ...}`` and optionally ``"val"``."""
    from fedprior.data.dataset import Dataset

    val_images, val_labels = parts.get("val", (None, None))
    return Dataset(
        name=name,
        class_names=class_names,
        train_images=parts["train"][0],
        train_labels=parts["train"][1],
        test_images=parts["test"][0],
        test_labels=parts["test"][1],
        val_images=val_images,
        val_labels=val_labels,
    )


def stratified_split(labels: np.ndarray, fractions: Sequence[float], rng: np.random.Generator) -> list[np.ndarray]:
    """Sorted index arrays, one per fraction, drawing each class's share (the last part takes the remainder)."""
    parts: list[list[np.ndarray]] = [[] for _ in fractions]
    for k in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == k))
        bounds = np.round(np.cumsum(fractions) * members.size).astype(int)
        bounds[-1] = members.size
        for i, chunk in enumerate(np.split(members, bounds[:-1])):
            parts[i].append(chunk)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


def find_class_root(
    name: str, candidates: Sequence[Path], layouts: Sequence[Sequence[str]], class_folders: Sequence[str], url: str, root: Path | None = None
) -> tuple[Path, tuple[str, ...]]:
    """The first candidate folder holding ``<split>/<class>/`` for every split of one of ``layouts`` (a layout of
    ``("",)`` means the class folders directly), with the layout found; else a clear error naming both.

    With ``root`` (``data.root``) the candidates are the folders under it, the only places looked at,
    and the error starts with ``data.root ROOT``."""
    for folder in candidates:
        for layout in layouts:
            if all((folder / split / cls).is_dir() for split in layout for cls in class_folders):
                return folder, tuple(layout)
    wanted = " or ".join(", ".join(f"{s}/<class>/" if s else "<class>/" for s in layout) for layout in layouts)
    if root is not None:
        state = "does not exist" if not root.exists() else "is empty" if root.is_dir() and not any(root.iterdir()) else "lacks them"
        raise DatasetNotFoundError(
            f"data.root {root} {state}: dataset '{name}' needs the folders {wanted} (classes {', '.join(class_folders)}) "
            f"of image files there (or in {', '.join(str(f) for f in candidates[1:])}); get them from {url}, "
            f"or leave data.root unset to use the default places"
        )
    searched = "\n".join(f"  {folder}" for folder in candidates)
    raise DatasetNotFoundError(
        f"dataset '{name}' not found: put the folders {wanted} (classes {', '.join(class_folders)}) of image files in one of\n"
        f"{searched}\n(get them from {url}, or pass --set data.root=FOLDER)"
    )
