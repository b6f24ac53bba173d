"""The on-disk feature cache: a frozen encoder's outputs on one split of one dataset, encoded once.

Files live at ``<cache>/features/<dataset>/<split>-<encoder fingerprint>-<data fingerprint>.safetensors``
(``<cache>`` is :func:`fedprior.data.locations.cache_dir`, ``$FEDPRIOR_CACHE`` if set), so a
different encoder, different weights or preprocessing, or different data never reuse a file.
Features an encoder computed on a GPU get the device type after the data fingerprint
(``...-cuda.safetensors``): GPU kernels round differently, and a run on the CPU must get
the CPU's features whatever ran before it.
Each file holds one float32 tensor ``features`` (N, dim) and metadata: encoder name, dataset,
split, count, dim and the SHA-256 of the tensor's bytes. A file that cannot be read, or whose
metadata, shape or checksum is wrong (a crash mid-write on a filesystem without atomic rename,
a truncated copy, flipped bits) is reported with a warning and rebuilt. Writes go to a
temporary file in the same folder followed by ``os.replace``, so readers never see half a file.
The cache is optional: a cache folder that cannot be written (full, read-only) is a
warning, and the run goes on with the features it computed.
"""

from __future__ import annotations

import hashlib
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedprior.atomic import save_tensors
from fedprior.data.fingerprint import array_fingerprint
from fedprior.data.locations import cache_dir

FORMAT = "fedprior-features-v1"
TENSOR_KEY = "features"


@dataclass(frozen=True)
class CacheResult:
    """What :func:`load_or_encode` did: the features, the file, whether it was a hit, and how long it took."""

    features: torch.Tensor
    path: Path | None
    hit: bool
    seconds: float


def features_dir() -> Path:
    return cache_dir() / "features"


def _safe(text: str) -> str:
    """A file-name-safe form of a dataset name or split."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text) or "_"


def cache_path(encoder, dataset_name: str, split: str, images: np.ndarray, labels: np.ndarray) -> Path:
    """Where the features of ``encoder`` on these ``images``/``labels`` are (or will be) cached."""
    data = array_fingerprint(images, labels)
    device = torch.device(getattr(encoder, "device", "cpu")).type
    suffix = "" if device == "cpu" else f"-{device}"
    return features_dir() / _safe(dataset_name) / f"{_safe(split)}-{encoder.fingerprint}-{data}{suffix}.safetensors"


def tensor_checksum(features: torch.Tensor) -> str:
    return hashlib.sha256(features.contiguous().numpy().tobytes()).hexdigest()


def read_features(path: Path, count: int, dim: int) -> tuple[torch.Tensor | None, str | None]:
    """(features, None) if ``path`` holds a complete, intact (count, dim) float32 tensor, else (None, what is wrong)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
            if TENSOR_KEY not in handle.keys():
                return None, f"no '{TENSOR_KEY}' tensor"
            features = handle.get_tensor(TENSOR_KEY)
    except Exception as error:  # safetensors raises its own error types for bad headers and truncation
        return None, f"unreadable ({type(error).__name__}: {error})"
    if meta.get("format") != FORMAT:
        return None, f"metadata format {meta.get('format')!r}, expected {FORMAT!r}"
    if meta.get("count") != str(count) or meta.get("dim") != str(dim):
        return None, f"metadata says {meta.get('count')} x {meta.get('dim')}, expected {count} x {dim}"
    if features.dtype != torch.float32 or tuple(features.shape) != (count, dim):
        return None, f"tensor is {features.dtype} {tuple(features.shape)}, expected float32 ({count}, {dim})"
    if meta.get("checksum") != tensor_checksum(features):
        return None, "checksum mismatch (the tensor bytes changed)"
    return features, None


def write_features(path: Path, features: torch.Tensor, metadata: dict[str, str]) -> None:
    """Write atomically: a temporary file in the same folder, then ``os.replace``."""
    save_tensors({TENSOR_KEY: features}, path, metadata=metadata)


def encode_with_progress(encoder, images: np.ndarray, batch_size: int, progress: bool, label: str) -> torch.Tensor:
    """Encode ``images`` batch by batch, with a rich progress bar (images/second) on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class ImagesPerSecond(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} images/s" if speed else "? images/s")

    parts = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), ImagesPerSecond(), TimeElapsedColumn())
    console = Console(stderr=True)
    # a bar only where it can redraw itself; in a log it would leave blank lines behind
    with Progress(*columns, console=console, disable=not (progress and console.is_terminal), transient=True) as bar:
        task = bar.add_task(label, total=len(images))
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            out = encoder.encode_images(chunk, batch_size=batch_size)
            if out.shape != (len(chunk), encoder.dim):
                raise RuntimeError(f"{encoder.name} returned features of shape {tuple(out.shape)} for {len(chunk)} images, expected dim {encoder.dim}")
            parts.append(out.detach().to("cpu", torch.float32))
            bar.advance(task, len(chunk))
    return torch.cat(parts) if parts else torch.zeros(0, encoder.dim)


def load_or_encode(
    encoder,
    dataset_name: str,
    split: str,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    batch_size: int = 256,
    use_cache: bool = True,
    progress: bool = True,
) -> CacheResult:
    """The features of ``images`` under ``encoder``, from the cache when a valid file is there, else encoded (and cached)."""
    start = time.perf_counter()
    label = f"encoding {dataset_name} {split}"
    if not use_cache:
        features = encode_with_progress(encoder, images, batch_size, progress, label)
        return CacheResult(features, None, False, time.perf_counter() - start)
    path = cache_path(encoder, dataset_name, split, images, labels)
    if path.exists():
        cached, problem = read_features(path, len(images), encoder.dim)
        if cached is not None:
            return CacheResult(cached, path, True, time.perf_counter() - start)
        warnings.warn(f"feature cache {path}: {problem}; rebuilding it", stacklevel=2)
    features = encode_with_progress(encoder, images, batch_size, progress, label).contiguous()
    metadata = {
        "format": FORMAT,
        "encoder": encoder.name,
        "encoder_fingerprint": encoder.fingerprint,
        "dataset": dataset_name,
        "split": split,
        "count": str(len(images)),
        "dim": str(encoder.dim),
        "checksum": tensor_checksum(features),
    }
    written: Path | None = path
    try:
        write_features(path, features, metadata)
    except OSError as error:
        warnings.warn(f"feature cache {path} cannot be written ({error.strerror or error}); going on without the cache", stacklevel=2)
        written = None
    return CacheResult(features, written, False, time.perf_counter() - start)


def text_cache_path(encoder, texts: list[str]) -> Path:
    """Where the embeddings of ``texts`` under ``encoder`` are cached: keyed by its fingerprint and the texts."""
    digest = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]
    return features_dir() / "texts" / f"{encoder.fingerprint}-{len(texts)}-{digest}.safetensors"


def cached_text_features(encoder, texts: list[str], *, use_cache: bool = True) -> torch.Tensor:
    """float32 (len(texts), dim) text embeddings of ``encoder``, read from the cache when a valid file is there.

    The same file format, checks and atomic writes as the image features: a language
    model embeds a class's prompts once, and every later run (and every Flower client
    rebuilding the same classifier) reads them back.
    """
    if not use_cache:
        return encoder.encode_texts(list(texts)).float()
    path = text_cache_path(encoder, texts)
    if path.exists():
        features, problem = read_features(path, len(texts), encoder.dim)
        if features is not None:
            return features
        warnings.warn(f"text feature cache {path}: {problem}; rebuilding it", stacklevel=2)
    features = encoder.encode_texts(list(texts)).float().contiguous()
    metadata = {
        "format": FORMAT,
        "encoder": encoder.name,
        "encoder_fingerprint": encoder.fingerprint,
        "dataset": "texts",
        "split": "texts",
        "count": str(len(texts)),
        "dim": str(encoder.dim),
        "checksum": tensor_checksum(features),
    }
    write_features(path, features, metadata)
    return features
