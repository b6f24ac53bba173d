"""Downloads, only ever when the user asked for them (``--download``)."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from pathlib import Path

from fedprior.atomic import atomic_write
from fedprior.errors import FedpriorError


def download_file(url: str, destination: Path, timeout: float = 30.0) -> Path:
    """Fetch ``url`` to ``destination`` atomically; a clear error when the network is unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            atomic_write(destination, lambda out: shutil.copyfileobj(response, out, 1 << 20))
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise FedpriorError(f"could not download {url} ({error}); on a machine without network put the file at {destination}") from error
    return destination
