"""Content-addressed parts of a run state: their hashes and what a part's tensors must be to be saved.

A part is a group of tensors saved in a file of its own and named by :func:`part_sha256`: a checkpoint's large
server tensors and client states (``checkpoint.py``), and the client-state store's files (``client_store.py``),
which a checkpoint names by the same hash instead of copying them. A tensor's hash is remembered while the tensor
object lives unmodified, so an unchanged part is not hashed twice.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fedprior.atomic import tensors_sha256
from fedprior.errors import FedpriorError

if TYPE_CHECKING:
    import torch

SERVER = "server/"
CLIENT = "client/"


class CheckpointError(FedpriorError):
    """A checkpoint cannot be used: unreadable, incomplete, or its checksum does not match."""


_HASHES: dict[int, tuple[weakref.ref, int, int, str]] = {}
"""id(tensor) -> (a weak reference to it, its version counter and data pointer then, its SHA-256)."""


def _remembered(tensor: torch.Tensor) -> str | None:
    """The hash remembered for this tensor object, if it has not been modified since (None: hash it)."""
    if tensor.is_inference():
        return None
    entry = _HASHES.get(id(tensor))
    if entry is not None and entry[0]() is tensor and entry[1] == tensor._version and entry[2] == tensor.data_ptr():
        return entry[3]
    return None


def tensor_sha256(tensor: torch.Tensor, host: torch.Tensor | None = None) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes; remembered for the tensor object while it is not modified
    (an inference-mode tensor has no version counter: it is hashed every time). ``host``: a host copy of a device
    tensor to read the bytes from (:func:`_host_copies`); the hash is remembered for the device tensor."""
    digest = _remembered(tensor)
    if digest is not None:
        return digest
    digest = tensors_sha256({"": tensor if host is None else host})
    if not tensor.is_inference():
        _HASHES[id(tensor)] = (weakref.ref(tensor), tensor._version, tensor.data_ptr(), digest)
    return digest


def _forget_dead_tensors() -> None:
    for key in [k for k, v in _HASHES.items() if v[0]() is None]:
        del _HASHES[key]


def part_sha256(tensors: Mapping[str, torch.Tensor], host: Mapping[str, torch.Tensor] | None = None) -> str:
    """The content hash of a part: over its names and its tensors' hashes (:func:`tensor_sha256`), in name order
    (``host``: host copies of device tensors to read from)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(f"{name}\0{tensor_sha256(tensors[name], (host or {}).get(name))}\0".encode())
    return digest.hexdigest()


def _unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` with every tensor that shares storage with an earlier one (or is not contiguous) copied.

    safetensors refuses tensors that share memory, and states may alias one another (a server's
    evaluation model holding a client's head, say). The first holder of a storage is saved as it
    is, so its remembered hash still applies; the others are copies, hashed anew.
    """
    seen: set[int] = set()
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        pointer = tensor.untyped_storage().data_ptr() if tensor.numel() else None
        if pointer is not None and pointer in seen or not tensor.is_contiguous():
            tensor = tensor.detach().contiguous().clone()
        elif pointer is not None:
            seen.add(pointer)
        out[name] = tensor
    return out
