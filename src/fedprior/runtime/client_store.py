"""The clients' persistent states of a run, in one store: in memory up to a size, on disk beyond it.

Stateful algorithms keep something per client between the rounds it is sampled in
(SCAFFOLD's control variate c_i, FedDyn's gradient, FedRep's and FedRoD's personal heads,
FedDB's optimizer state, MFCL's modules). A cross-device population has millions of
clients of which a round samples a few, so these states must not all sit in RAM:
:class:`ClientStates` keeps them in memory while their bytes stay under ``memory_bytes``
(``run.client_state_memory_mb``) and, once they would exceed it, moves every state to disk
and keeps only each client's file name (a hash) in memory. A round then loads the states of
the clients it samples, and nothing else.

On disk each client's state is one safetensors file, named by the content hash the
checkpoint gives a part (``checkpoint.part_sha256`` of ``client/<id>/<name>`` tensors), written
atomically and flushed. The store's folder is the checkpoint's folder of parts
(``checkpoint.blobs_path``), so a checkpoint names these files by their hash instead of
copying them (``save_checkpoint`` with a store): checkpointed by reference. A stored file is
never rewritten in place, so the previous checkpoint's files stay valid; the checkpoint
deletes the ones neither it nor the previous one names. Without a checkpoint the store uses a
temporary folder of its own, deletes a client's old file when it replaces it, and deletes the
folder when the store (and every snapshot of it) is gone.

The tensors read back are the bytes written (safetensors keeps them exactly), so a run's
numbers do not depend on where its states are held.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path

from fedprior.algorithms.base import State
from fedprior.atomic import save_tensors
from fedprior.runtime.parts import CLIENT, CheckpointError, _unshared, part_sha256

DEFAULT_MEMORY_MB = 1024.0
"""``run.client_state_memory_mb``'s default: client states are held in memory up to 1 GiB in all."""


def state_bytes(state: State) -> int:
    """The bytes of a state's tensors' buffers."""
    return sum(value.numel() * value.element_size() for value in state.values())


def client_prefix(client_id: int) -> str:
    return f"{CLIENT}{client_id}/"


class ClientStates(MutableMapping[int, State]):
    """Client id -> its state (see the module docstring): a mapping whose values live in memory or on disk.

    ``folder``: where states go to disk (the checkpoint's parts folder; None: a temporary folder, made when first needed);
    ``memory_bytes``: the most bytes of states held in memory before they all move to disk (0: every state on disk);
    ``stored``: client id -> hash of a state already on disk in ``folder`` (a resumed run's, :func:`load_checkpoint`).
    """

    def __init__(self, folder: Path | None = None, memory_bytes: int = int(DEFAULT_MEMORY_MB * 2**20), stored: Mapping[int, str] | None = None) -> None:
        self._folder = Path(folder) if folder is not None else None
        self._own_folder = folder is None
        self.memory_bytes = memory_bytes
        self._memory: dict[int, State] = {}
        self._held = 0
        self._disk: dict[int, str] = dict(stored or {})
        self._verified: set[int] = set()  # stored states read back once and checked against their hash
        self._origin: ClientStates | None = None
        self.on_disk = bool(self._disk) or memory_bytes <= 0

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="fedprior-client-states-"))
            weakref.finalize(self, shutil.rmtree, self._folder, True)  # the store's own folder goes with it
        return self._folder

    def _path(self, digest: str) -> Path:
        return self.folder / f"{digest}.safetensors"

    def __getitem__(self, client_id: int) -> State:
        if client_id in self._memory:
            return self._memory[client_id]
        digest = self._disk[client_id]  # KeyError: no state
        from safetensors.torch import load_file

        path = self._path(digest)
        try:
            tensors = load_file(str(path))
        except FileNotFoundError:
            raise CheckpointError(f"client {client_id}'s state {path} is missing") from None
        if client_id not in self._verified:
            if part_sha256(tensors) != digest:
                raise CheckpointError(f"client {client_id}'s state {path} is damaged: it does not match its hash")
            self._verified.add(client_id)
        prefix = client_prefix(client_id)
        return {name[len(prefix) :]: value for name, value in tensors.items()}

    def __setitem__(self, client_id: int, state: State) -> None:
        self._drop(client_id)
        if not self.on_disk:
            self._memory[client_id] = state
            self._held += state_bytes(state)
            if self._held > self.memory_bytes:  # beyond the size held in memory: every state goes to disk from now on
                self.spill()
            return
        self._write(client_id, state)

    def _write(self, client_id: int, state: State) -> None:
        prefix = client_prefix(client_id)
        tensors = _unshared({prefix + name: value for name, value in state.items()})
        digest = part_sha256(tensors)
        path = self._path(digest)
        if not path.is_file():  # content-addressed: a file there already holds these tensors
            # not looking through the folder (a file per client) for abandoned temporary files: the checkpoint's writes do
            save_tensors(tensors, path, durable=not self._own_folder, clean=False)
        self._disk[client_id] = digest
        self._verified.add(client_id)

    def _drop(self, client_id: int) -> None:
        if client_id in self._memory:
            self._held -= state_bytes(self._memory.pop(client_id))
        digest = self._disk.pop(client_id, None)
        if digest is not None and self._own_folder and digest not in self._disk.values():
            self._path(digest).unlink(missing_ok=True)  # no checkpoint names it: nothing else reads it

    def __delitem__(self, client_id: int) -> None:
        if client_id not in self:
            raise KeyError(client_id)
        self._drop(client_id)

    def __contains__(self, client_id: object) -> bool:
        return client_id in self._memory or client_id in self._disk

    def __iter__(self) -> Iterator[int]:
        return iter(sorted({*self._memory, *self._disk}))

    def __len__(self) -> int:
        return len(self._memory) + len(self._disk)

    def spill(self) -> None:
        """Move every state held in memory to disk; states set from now on go to disk too."""
        self.on_disk = True
        for client_id in sorted(self._memory):
            self._write(client_id, self._memory.pop(client_id))
        self._held = 0

    @property
    def memory(self) -> dict[int, State]:
        """The states held in memory, by client id."""
        return self._memory

    def references(self) -> dict[int, str]:
        """Client id -> the hash naming its state's file in :attr:`folder`, for the states on disk."""
        return dict(self._disk)

    def snapshot(self) -> ClientStates:
        """The states as they are now, unchanged by later sets (which replace a state or write a new file, never change one):
        what a checkpoint written later must hold. It reads the same folder, and never deletes a file."""
        copy = ClientStates(self._folder, self.memory_bytes, self._disk)
        copy._own_folder, copy._origin = False, self  # the origin keeps its own folder (and so the files) alive
        copy._memory, copy._held, copy.on_disk = dict(self._memory), self._held, self.on_disk
        copy._verified = set(self._verified)
        return copy

    def adopt(self, states: Mapping[int, State]) -> None:
        """Take a resumed run's states: a store's files by reference (the same folder), any other mapping's states as if set."""
        if isinstance(states, ClientStates) and states._folder == self._folder and self._folder is not None:
            for client_id, state in states.memory.items():
                self[client_id] = state
            for client_id, digest in states.references().items():
                self._drop(client_id)
                self._disk[client_id] = digest
            self.on_disk = self.on_disk or bool(self._disk)
            return
        for client_id in states:
            self[client_id] = states[client_id]
