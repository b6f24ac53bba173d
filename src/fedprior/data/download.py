"""Downloads, only ever when the user asked for them (``--download``)."""

from __future__ import annotations

import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from fedprior.errors import FedpriorError


def download_file(url: str, destination: Path, timeout: float = 30.0) -> Path:
    """Fetch ``url`` to ``destination`` atomically; a clear error when the network is unreachable."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            handle, tmp = tempfile.mkstemp(dir=destination.parent, prefix=destination.name, suffix=".part")
            with os.fdopen(handle, "wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
        os.replace(tmp, destination)
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise FedpriorError(
            f"could not download {url} ({error}); on a machine without network put the file at {destination}"
        ) from error
    return destination
