"""Writing tensor files atomically: readers (and a run killed at any moment) see the old file or the new one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file


def save_tensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None,
                 durable: bool = False) -> None:
    """Save ``tensors`` as safetensors at ``path`` via a temporary file in the same folder and ``os.replace``.

    Tensors are detached and made contiguous (but not copied when they already are).
    ``durable``: flush the file and its folder to disk before returning (checkpoints).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        save_file({k: v.detach().contiguous() for k, v in tensors.items()}, tmp, metadata=metadata)
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if durable:
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
