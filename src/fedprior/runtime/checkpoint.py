"""Checksummed, atomic checkpoints: server state, per-client states and progress in one safetensors file.

Written to a temporary file in the same folder, flushed to disk, then renamed over the
old checkpoint, so a run killed at any moment (SIGKILL included) leaves either the
previous checkpoint or the new one, never a torn file. The checkpoint it replaces is
kept beside it as ``<name>.previous.safetensors``: the last two rounds are on disk.

The metadata holds the progress (JSON), the caller's own entries (the runner stores
the run's resolved config, so that a resume can refuse a changed one) and a SHA-256 of
every tensor and every metadata entry: a checkpoint whose bytes changed (a bad disk, a
careless copy, flipped bits) is refused on load with a :class:`CheckpointError` rather
than silently continuing from altered weights.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprior.atomic import save_tensors, tensors_sha256
from fedprior.errors import FedpriorError
from fedprior.runtime.traffic import upgrade_records

if TYPE_CHECKING:
    from fedprior.algorithms.base import State

SERVER = "server/"
CLIENT = "client/"
FORMAT = "fedprior-checkpoint-v2"


class CheckpointError(FedpriorError):
    """A checkpoint cannot be used: unreadable, incomplete, or its checksum does not match."""


@dataclass
class Progress:
    """How far a run got: the stage index and the last completed round in it, plus the history so far."""

    stage_index: int = 0
    round: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    initial: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunState:
    """Everything a run needs to continue: server state, per-client states, progress (and the caller's metadata)."""

    server: State
    clients: dict[int, State]
    progress: Progress
    metadata: dict[str, str] = field(default_factory=dict)


def previous_path(path: Path) -> Path:
    """Where the checkpoint before ``path``'s current one is kept."""
    path = Path(path)
    return path.with_name(f"{path.stem}.previous{path.suffix}")


def _checksum(tensors: dict, metadata: dict[str, str]) -> str:
    return tensors_sha256(tensors, json.dumps({k: v for k, v in metadata.items() if k != "checksum"}, sort_keys=True))


def save_checkpoint(path: Path, run: RunState) -> None:
    """Write ``run`` to ``path`` atomically; the checkpoint it replaces becomes ``previous_path(path)``."""
    path = Path(path)
    server, clients, progress = run.server, run.clients, run.progress
    tensors = {SERVER + k: v.detach().contiguous().clone() for k, v in server.items()}
    for client_id, state in clients.items():
        tensors.update({f"{CLIENT}{client_id}/{k}": v.detach().contiguous().clone() for k, v in state.items()})
    metadata = {**run.metadata, "format": FORMAT, "progress": json.dumps(progress.__dict__)}
    metadata["checksum"] = _checksum(tensors, metadata)
    if path.is_file():  # keep the current one as the previous one (a hard link: no copy, still atomic)
        previous, link = previous_path(path), path.with_name(f".{path.name}.previous-link")
        link.unlink(missing_ok=True)
        try:
            os.link(path, link)
        except OSError:  # a filesystem without hard links
            shutil.copyfile(path, link)
        os.replace(link, previous)
    save_tensors(tensors, path, metadata=metadata, durable=True)


def load_checkpoint(path: Path) -> RunState:
    """The run state in ``path``; :class:`CheckpointError` saying what is wrong if it cannot be trusted."""
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except Exception as error:  # safetensors raises its own types for bad headers and truncation
        raise CheckpointError(f"checkpoint {path} is unreadable ({type(error).__name__}: {error})") from None
    legacy = "progress" in metadata and "format" not in metadata and "checksum" not in metadata
    if legacy:  # written before checkpoints carried a checksum: usable, but nothing to verify it against
        warnings.warn(f"checkpoint {path} was written by an older fedprior without a checksum; it cannot be verified", stacklevel=2)
        metadata["format"] = FORMAT
        metadata["checksum"] = _checksum(tensors, metadata)
    missing = [key for key in ("format", "progress", "checksum") if key not in metadata]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks its metadata ({', '.join(missing)}): damaged, or not a fedprior checkpoint")
    if metadata["format"] != FORMAT:
        raise CheckpointError(f"checkpoint {path} has format {metadata['format']!r}, expected {FORMAT!r}")
    if metadata["checksum"] != _checksum(tensors, metadata):
        raise CheckpointError(f"checkpoint {path} is damaged: checksum mismatch (its bytes changed after it was written)")
    try:
        progress = Progress(**json.loads(metadata["progress"]))
        progress.history = upgrade_records(progress.history)  # per-client byte counts of an older fedprior -> the rounds' totals
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"checkpoint {path} has unreadable progress metadata ({error})") from None
    server = {k[len(SERVER) :]: v for k, v in tensors.items() if k.startswith(SERVER)}
    clients: dict[int, State] = {}
    for key, value in tensors.items():
        if key.startswith(CLIENT):
            client_id, name = key[len(CLIENT) :].split("/", 1)
            clients.setdefault(int(client_id), {})[name] = value
    extra = {k: v for k, v in metadata.items() if k not in ("format", "progress", "checksum")}
    return RunState(server, clients, progress, extra)
