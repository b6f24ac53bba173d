"""Safe extraction of downloaded dataset archives (.tar.gz)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from fedprior.errors import DatasetNotFoundError


def extract_tar(archive: Path, destination: Path) -> Path:
    """Unpack ``archive`` into ``destination`` with tarfile's ``'data'`` filter.

    The filter refuses absolute paths, ``..`` components, links pointing outside
    ``destination`` and device files, so a tampered archive cannot write elsewhere.
    """
    destination.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(destination, filter="data")
    except (tarfile.TarError, OSError) as error:
        raise DatasetNotFoundError(f"could not unpack {archive} ({error}); delete it and download again") from error
    return destination
