"""Writing files atomically: readers (and a run killed at any moment) see the old file or the new one.

Every file is written to a temporary file in the same folder, named
``<name>.<host>.<pid>.<token>.tmp``, then renamed over the target with ``os.replace``.
A process killed mid-write leaves its temporary file behind; the next write into that
folder removes the temporary files of processes of this host that are gone (and
safetensors' own ``.tmpXXXXXX`` files older than a day, left by older versions).
Files get the permissions ``open`` gives (0666 less the umask), like every other file
of a run. A failed write raises ``OSError`` whose ``filename`` is the target.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # torch is imported where tensors are written: reading run folders does not need it
    import torch

LEGACY_MAX_AGE = 24 * 3600.0
"""Seconds after which an anonymous ``.tmpXXXXXX`` file (no owner recorded) counts as abandoned."""


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete the temporary files in ``folder`` whose writer is gone; returns what was deleted."""
    removed: list[Path] = []
    pattern = re.compile(rf"^.+\.{re.escape(_host())}\.(\d+)\.[0-9a-f]+\.tmp$")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        try:
            stale = (match is not None and not _alive(int(match.group(1)))) or (
                entry.name.startswith(".tmp") and time.time() - entry.stat().st_mtime > LEGACY_MAX_AGE
            )
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass  # raced with another cleaner or not ours to delete
    return removed


def atomic_write(path: Path, write: Callable[[BinaryIO], object], durable: bool = False, clean: bool = True) -> None:
    """Create or replace ``path`` with what ``write(handle)`` writes, atomically.

    ``durable``: flush the file and its folder to disk before returning (checkpoints). ``clean``: first remove the
    folder's abandoned temporary files (False where a folder holds a file per client and is written each round:
    looking through it each time would cost its size; the folder's other writes clean it).
    """
    path = Path(path)
    tmp = path.parent / f"{path.name}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if clean:
            remove_stale_temp_files(path.parent)
        with open(tmp, "xb") as handle:
            write(handle)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        if durable:
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    except OSError as error:
        if error.filename is None or str(error.filename) == str(tmp):
            error.filename = str(path)
        raise
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_bytes(path: Path, data: bytes, durable: bool = False, clean: bool = True) -> None:
    atomic_write(path, lambda handle: handle.write(data), durable, clean)


def write_text(path: Path, text: str, durable: bool = False) -> None:
    write_bytes(path, text.encode("utf-8"), durable)


def save_figure(figure, path: Path, close: bool = True) -> Path:
    """Write a matplotlib ``figure`` to ``path`` (format from the suffix, PNG by default), atomically; returns ``path``.

    matplotlib's own ``savefig(path)`` leaves a partial file on a full disk and raises an
    error without the file's name; here a failed write leaves no file (or the old one) and
    raises ``OSError`` whose ``filename`` is ``path``. ``close``: close the figure in
    pyplot (if it is one of pyplot's) whether or not the write succeeded. Every figure
    fedprior writes goes through here.
    """
    import sys

    path = Path(path)
    try:
        atomic_write(path, lambda handle: figure.savefig(handle, format=path.suffix[1:].lower() or "png"))
    finally:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if close and pyplot is not None:
            pyplot.close(figure)
    return path


def save_tensors(tensors: Mapping[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None, durable: bool = False, clean: bool = True) -> None:
    """Save ``tensors`` as a safetensors file at ``path``, atomically (see the module docstring; ``clean``: :func:`atomic_write`'s).

    Tensors are detached, copied to the host where they are on a device (a run's resident states), and made
    contiguous (but not copied when they already are both).
    """
    from safetensors.torch import save

    write_bytes(path, save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, metadata=metadata), durable, clean)


def tensors_sha256(tensors: Mapping[str, torch.Tensor], extra: str = "") -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of ``tensors`` (in name order), then ``extra``."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(tensors):
        value = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}\0{value.dtype}\0{tuple(value.shape)}\0".encode())
        digest.update(value.reshape(-1).view(torch.uint8).numpy().tobytes())
    digest.update(extra.encode())
    return digest.hexdigest()
