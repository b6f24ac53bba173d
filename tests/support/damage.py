"""Damaged inputs the tests build: a tiny Fashion-MNIST folder, cut or flipped files, a full disk."""

from __future__ import annotations

import errno
import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np


def fashion_root(tmp: Path, damage: Callable[[Path], None] | None = None) -> Path:
    """A tiny Fashion-MNIST folder (20 train, 10 test images) in the real gzipped IDX format, then damaged."""
    folder = tmp / "fashion"
    folder.mkdir()
    rng = np.random.default_rng(0)

    def idx(name: str, array: np.ndarray) -> None:
        header = bytes([0, 0, 0x08, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
        with gzip.open(folder / name, "wb") as handle:
            handle.write(header + array.astype(np.uint8).tobytes())

    idx("train-images-idx3-ubyte.gz", rng.integers(0, 256, (20, 28, 28)))
    idx("train-labels-idx1-ubyte.gz", np.arange(20) % 10)
    idx("t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (10, 28, 28)))
    idx("t10k-labels-idx1-ubyte.gz", np.arange(10))
    if damage:
        damage(folder)
    return folder


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _cut(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def _flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def no_space(real: Callable, after: int = 0):
    """A stand-in for a writer that fails with ENOSPC once it has been called ``after`` times."""
    calls = {"n": 0}

    def write(tensors, path, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(tensors, path, *args, **kwargs)

    return write


def figure_disk_full(monkeypatch, name: str) -> None:
    """matplotlib's savefig on a full disk while writing figure ``name``: some bytes reach the file, then ENOSPC
    without a file name (what matplotlib raises: the error of the file handle's write)."""
    from matplotlib.figure import Figure

    real = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        target = str(getattr(fname, "name", fname))
        if name not in Path(target).name:
            return real(self, fname, *args, **kwargs)
        if isinstance(fname, (str, Path)):
            Path(fname).write_bytes(b"\x89PNG")
        else:
            fname.write(b"\x89PNG")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", savefig)
