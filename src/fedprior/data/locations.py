"""Where dataset files are looked for, and the message when they are missing."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from fedprior.errors import DatasetNotFoundError


def cache_dir() -> Path:
    """fedprior's cache folder (``$FEDPRIOR_CACHE`` or the platform's user cache dir)."""
    override = os.environ.get("FEDPRIOR_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir("fedprior"))


def dataset_cache_dir(name: str) -> Path:
    """The folder in the user cache where dataset ``name`` is looked for and downloaded to."""
    return cache_dir() / "datasets" / name


def find_files(name: str, folders: list[Path], files: list[str], url: str) -> Path:
    """The first folder in ``folders`` holding every file in ``files``, or a clear error.

    The error lists the files, every folder that was searched, and where to get them.
    """
    for folder in folders:
        if all((folder / f).is_file() for f in files):
            return folder
    searched = "\n".join(f"  {folder}" for folder in folders)
    wanted = ", ".join(files)
    raise DatasetNotFoundError(
        f"dataset '{name}' not found: put {wanted} in one of\n{searched}\n"
        f"(get them from {url}, or pass --set data.root=FOLDER)"
    )
