"""Where dataset files are looked for, and the message when they are missing.

Without ``data.root`` a loader searches its default places (the user cache, and for
some datasets a system folder). With ``data.root`` that folder (and the subfolders a
dataset's archive unpacks to) is the only place looked at, and downloads go there: a
root that is missing, empty or incomplete is an error naming the missing files, never
a silent fall back to another copy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import platformdirs

from fedprior.errors import DatasetNotFoundError


def located(locate: Callable[[], Path], download: bool, fetch: Callable[[], object]) -> Path:
    """Where ``locate()`` finds a dataset; where it finds none and ``download`` allows, after ``fetch()`` has downloaded it."""
    try:
        return locate()
    except DatasetNotFoundError:
        if not download:
            raise
        fetch()
        return locate()


def cache_dir() -> Path:
    """fedprior's cache folder (``$FEDPRIOR_CACHE`` or the platform's user cache dir)."""
    override = os.environ.get("FEDPRIOR_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir("fedprior"))


def dataset_cache_dir(name: str) -> Path:
    """The folder in the user cache where dataset ``name`` is looked for and downloaded to."""
    return cache_dir() / "datasets" / name


def download_dir(name: str, root: Path | None) -> Path:
    """Where a download of dataset ``name`` goes: ``data.root`` when given (the only place looked at), else the user cache."""
    return root if root is not None else dataset_cache_dir(name)


def missing_in_root(name: str, root: Path, folders: list[Path], wanted: list[str], url: str) -> DatasetNotFoundError:
    """The error for a ``data.root`` that lacks files: which are missing, in the folder that holds the most of them."""

    def present(folder: Path) -> int:
        return sum((folder / f).exists() for f in wanted)

    best = max(folders, key=present)
    missing = [f for f in wanted if not (best / f).exists()]
    if not root.exists():
        state = "does not exist"
    elif not root.is_dir():
        state = "is not a folder"
    elif not any(root.iterdir()):
        state = "is empty"
    else:
        state = f"lacks {', '.join(missing)}" + (f" (looked in {best})" if best != root else "")
    return DatasetNotFoundError(
        f"data.root {root} {state}: dataset '{name}' needs {', '.join(wanted)} there"
        f"{'' if len(folders) == 1 else ' (or in ' + ', '.join(str(f) for f in folders[1:]) + ')'}; "
        f"get them from {url}, or leave data.root unset to use the default places"
    )


def none_found(name: str, root: Path | None, places: list[Path], wanted: str, url: str) -> DatasetNotFoundError:
    """The error of a multi-domain dataset (Digit-5, DomainNet, Office-Caltech-10) none of whose domains is in ``places``:
    ``wanted`` says what one domain needs; with ``root`` (``data.root``, the only place looked at) the message starts with it."""
    where = ", ".join(str(p) for p in places)
    if root is None:
        return DatasetNotFoundError(f"dataset '{name}' not found: put {wanted} in one of {where} (get them from {url}, or pass --set data.root=FOLDER)")
    state = "does not exist" if not root.exists() else "is not a folder" if not root.is_dir() else "is empty" if not any(root.iterdir()) else "lacks them"
    return DatasetNotFoundError(
        f"data.root {root} {state}: dataset '{name}' needs {wanted} there (looked in {where}); get them from {url}, or leave data.root unset to use the default places"
    )


def find_files(name: str, folders: list[Path], files: list[str], url: str, root: Path | None = None) -> Path:
    """The first folder in ``folders`` holding every file in ``files``, or a clear error.

    The error lists the files, every folder that was searched, and where to get them;
    with ``root`` (the user's ``data.root``) it names the files missing there.
    """
    for folder in folders:
        if all((folder / f).is_file() for f in files):
            return folder
    if root is not None:
        raise missing_in_root(name, root, folders, files, url)
    searched = "\n".join(f"  {folder}" for folder in folders)
    wanted = ", ".join(files)
    raise DatasetNotFoundError(f"dataset '{name}' not found: put {wanted} in one of\n{searched}\n(get them from {url}, or pass --set data.root=FOLDER)")
