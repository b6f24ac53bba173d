"""Weights files of frozen encoders: where they are looked for, and content hashes for fingerprints."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from fedprior.data.locations import cache_dir
from fedprior.errors import FedpriorError

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


def damaged_file(folder: Path) -> tuple[Path, str] | None:
    """The first file of a model folder that cannot be what its name says, and why; None if none.

    Every ``*.json`` must parse and every ``*.safetensors`` must have a readable header: a
    loader that meets such a file fails with an error that names neither the file nor the
    folder (``JSONDecodeError``, ``SafetensorError``), so this runs before it.
    """
    import json

    from safetensors import SafetensorError, safe_open

    for path in folder_files(folder):
        try:
            if path.suffix == ".json":
                json.loads(path.read_bytes().decode("utf-8"))
            elif path.suffix == ".safetensors":
                with safe_open(str(path), framework="pt") as handle:
                    handle.keys()
        except OSError as error:
            return path, f"unreadable: {error.strerror or error}"
        except UnicodeDecodeError as error:
            return path, f"not UTF-8 text ({error.reason} at byte {error.start})"
        except json.JSONDecodeError as error:
            return path, f"not valid JSON: {error}"
        except SafetensorError as error:  # a damaged, truncated or foreign header
            return path, str(error)
    return None


def check_model_folder(folder: Path, field: str, what: str) -> None:
    """Raise a :class:`~fedprior.errors.FedpriorError` naming ``field`` and the file if a file of ``folder`` is damaged."""
    found = damaged_file(folder)
    if found is not None:
        path, reason = found
        raise FedpriorError(f"{field}: cannot load {what} from {folder}: {path.relative_to(folder).as_posix()} is damaged ({reason})")
