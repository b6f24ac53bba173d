"""Per-client state on a SuperNode: in the node's Context, with a copy on the node's disk.

An algorithm's client state (SCAFFOLD's control variate, FST-CBDG's soft
pseudo-labels) never leaves the node. Within a Flower run it lives in
``context.state`` (Flower keeps a node's Context between the messages of a run):
``client-state.<id>`` (an ArrayRecord) and ``client-state-meta.<id>`` (a
ConfigRecord saying which run and which step produced it).

A Context lasts one Flower run, so a server that is restarted (a new run resuming
from its checkpoint) would find every client state gone. Hence each state is also
written to the node's own disk, ``<state dir>/<run key>/<client id>/<step>.safetensors``,
versioned by the step (round counted over all stages) that produced it. A client
asked to train in step s uses its latest state from a step before s: if the server
died after the client trained in step s but before it checkpointed step s, the
replayed step s starts from the same state as the first time, and the run ends
with the numbers of an uninterrupted one. Versions older than the one in use are
deleted, so at most two are kept per client.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Context
from safetensors.torch import load_file

from fedprior.algorithms.base import State
from fedprior.atomic import save_tensors
from fedprior.flower.records import config_scalar, from_array_record, to_array_record

STATE = "client-state.{}"
META = "client-state-meta.{}"
_VERSION = re.compile(r"^(\d+)\.safetensors$")


def _safe_key(run_key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", run_key)[:120]


class ClientStateStore:
    """The client states of one node in one fedprior run (see the module docstring)."""

    def __init__(self, context: Context, directory: Path | None, run_key: str) -> None:
        self.context = context
        self.run_key = run_key
        self.directory = Path(directory) / _safe_key(run_key) if directory is not None else None

    def _versions(self, client_id: int) -> list[tuple[int, Path]]:
        if self.directory is None:
            return []
        folder = self.directory / str(client_id)
        if not folder.is_dir():
            return []
        found = []
        for path in folder.iterdir():
            match = _VERSION.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def load(self, client_id: int, step: int) -> State:
        """The client's latest state from a step before ``step`` (``{}`` if it never trained)."""
        meta = self.context.state.get(META.format(client_id))
        if isinstance(meta, ConfigRecord) and meta.get("run-key") == self.run_key and int(config_scalar(meta["step"])) < step:
            record = self.context.state.get(STATE.format(client_id))
            if isinstance(record, ArrayRecord):
                return from_array_record(record)
        earlier = [(s, p) for s, p in self._versions(client_id) if s < step]
        if earlier:
            return load_file(str(earlier[-1][1]))
        return {}

    def save(self, client_id: int, step: int, state: State) -> None:
        """Keep the state produced in ``step``; drop versions older than the one this step started from."""
        if not state:
            return
        self.context.state[STATE.format(client_id)] = to_array_record(state)
        self.context.state[META.format(client_id)] = ConfigRecord({"run-key": self.run_key, "step": int(step)})
        if self.directory is None:
            return
        save_tensors(state, self.directory / str(client_id) / f"{step}.safetensors")
        versions = self._versions(client_id)
        used = [s for s, _ in versions if s < step]
        keep_from = used[-1] if used else step
        for s, path in versions:
            if s < keep_from or s > step:
                path.unlink(missing_ok=True)


def remove_run_states(directory: Path, run_key: str) -> None:
    """Delete a finished run's client states from a node's disk."""
    shutil.rmtree(Path(directory) / _safe_key(run_key), ignore_errors=True)
