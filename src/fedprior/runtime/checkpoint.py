"""Atomic checkpoints: server state, per-client states and progress in one safetensors file.

Written to a temporary file in the same folder, flushed to disk, then renamed over the
old checkpoint, so a run killed at any moment (SIGKILL included) leaves either the
previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors.torch import load_file
from safetensors import safe_open

from fedprior.atomic import save_tensors
from fedprior.algorithms.base import State

SERVER = "server/"
CLIENT = "client/"


@dataclass
class Progress:
    """How far a run got: the stage index and the last completed round in it, plus the history so far."""

    stage_index: int = 0
    round: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    initial: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunState:
    """Everything a run needs to continue: server state, per-client states, progress."""

    server: State
    clients: dict[int, State]
    progress: Progress


def save_checkpoint(path: Path, run: RunState) -> None:
    server, clients, progress = run.server, run.clients, run.progress
    tensors = {SERVER + k: v.detach().contiguous().clone() for k, v in server.items()}
    for client_id, state in clients.items():
        tensors.update({f"{CLIENT}{client_id}/{k}": v.detach().contiguous().clone() for k, v in state.items()})
    save_tensors(tensors, path, metadata={"progress": json.dumps(progress.__dict__)}, durable=True)


def load_checkpoint(path: Path) -> RunState:
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    tensors = load_file(str(path))
    server = {k[len(SERVER) :]: v for k, v in tensors.items() if k.startswith(SERVER)}
    clients: dict[int, State] = {}
    for key, value in tensors.items():
        if key.startswith(CLIENT):
            client_id, name = key[len(CLIENT) :].split("/", 1)
            clients.setdefault(int(client_id), {})[name] = value
    return RunState(server, clients, Progress(**json.loads(metadata["progress"])))
