"""Weights files of frozen encoders: where they are looked for, and content hashes for fingerprints."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from fedprior.data.locations import cache_dir

WEIGHT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")


def weights_dir() -> Path:
    """Where fedprior looks for (and, when allowed, downloads) encoder weights: ``<cache>/weights``."""
    return cache_dir() / "weights"


def looks_like_path(text: str) -> bool:
    """True when ``text`` names a file (has a weights suffix or a path separator) rather than a tag."""
    return text.endswith(WEIGHT_SUFFIXES) or "/" in text or "\\" in text or text.startswith("~")


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file's whole content (streamed; about 1 GB/s)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(*parts: str, files: Sequence[Path] = (), root: Path | None = None) -> str:
    """16 hex digits over text ``parts`` and the names and full contents of ``files``.

    Names are taken relative to ``root`` when given (so moving a model folder keeps its
    fingerprint), else only the file name is used.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    for path in files:
        name = path.relative_to(root).as_posix() if root is not None else path.name
        digest.update(f"{name}:{file_sha256(path)}".encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def folder_files(folder: Path) -> list[Path]:
    """The regular files of a model folder, sorted, skipping hidden ones (e.g. ``.cache/``)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))
