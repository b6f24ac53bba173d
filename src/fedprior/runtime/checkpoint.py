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

Only what changed is rewritten. The large parts of a run state are kept in
content-addressed files beside the checkpoint, in ``<name>.blobs/`` (``<sha256>.safetensors``,
the SHA-256 of the part's names, dtypes, shapes and bytes): each client's state as one
part, and each server tensor on its own, when it holds at least :data:`BLOB_BYTES`. The
checkpoint file holds the small tensors and, in its metadata, the hash of every part;
a part whose hash names a file that is already there is not written again. So FedDB's
100 clients' momentum is rewritten only for the clients trained in the round, and
MFCL's representations (the server state's largest tensors, unchanged through its
server epochs) are written once, in the round they arrive. A part's hash is remembered
for the tensor object it was computed from (while that tensor lives and is not modified
in place: its version counter), so an unchanged part is not even hashed again. Parts are
written (atomically, flushed) before the checkpoint that names them; after it, the
parts named by neither the checkpoint nor the previous one are deleted. On load every
part is checked against its hash.

A run whose client states are in a client-state store on disk (``client_store.py``, beyond
``run.client_state_memory_mb``) keeps them in this same folder: the checkpoint names each
stored client's file by its hash and copies nothing (metadata ``client_store``); on load
those states are not read, only checked to be there, and the store reads (and checks) a
client's file when a round samples it.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprior.atomic import save_tensors, tensors_sha256, write_bytes
from fedprior.runtime.client_store import ClientStates
from fedprior.runtime.parts import CLIENT, SERVER, CheckpointError, _forget_dead_tensors, _remembered, _unshared, part_sha256
from fedprior.runtime.traffic import upgrade_records

if TYPE_CHECKING:
    import torch

    from fedprior.algorithms.base import State

FORMAT = "fedprior-checkpoint-v3"
"""v3: large parts in content-addressed files (``blobs`` in the metadata); v2 (everything in the file) still loads."""
FORMATS = ("fedprior-checkpoint-v2", FORMAT)
STORED = "client_store"
"""Metadata flag: the client parts are a client-state store's files (``client_store.py``), loaded lazily on resume."""
BLOB_BYTES = 1 << 20
"""A client's state, or a server tensor, of at least this many bytes is kept in its own content-addressed file."""


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
    clients: Mapping[int, State]
    """By client id; a :class:`~fedprior.runtime.client_store.ClientStates` store where they are on disk."""
    progress: Progress
    metadata: dict[str, str] = field(default_factory=dict)


def previous_path(path: Path) -> Path:
    """Where the checkpoint before ``path``'s current one is kept."""
    path = Path(path)
    return path.with_name(f"{path.stem}.previous{path.suffix}")


def blobs_path(path: Path) -> Path:
    """The folder of the content-addressed parts of the checkpoint ``path`` (and of its previous one)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.blobs")


def _checksum(tensors: dict, metadata: dict[str, str]) -> str:
    return tensors_sha256(tensors, json.dumps({k: v for k, v in metadata.items() if k != "checksum"}, sort_keys=True))


def _host_copies(tensors: Mapping[str, torch.Tensor], needed: set[str]) -> dict[str, torch.Tensor]:
    """Host copies of the device tensors among ``needed`` (the checkpoint's reads: tensors not hashed yet, and
    what it writes), each copied once, into pinned memory without blocking where the device is CUDA, then waited
    for once; host tensors are themselves."""
    import torch

    out: dict[str, torch.Tensor] = {}
    cuda = False
    for name in needed:
        value = tensors[name]
        if value.device.type == "cpu":
            out[name] = value
        elif value.device.type == "cuda":
            out[name] = torch.empty(value.shape, dtype=value.dtype, pin_memory=True).copy_(value.detach(), non_blocking=True)
            cuda = True
        else:
            out[name] = value.detach().cpu()
    if cuda:
        torch.cuda.synchronize()
    return out


def _parts(tensors: dict[str, torch.Tensor], blob_bytes: int) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
    """(the tensors kept in the checkpoint file, the parts kept apart by name): a client's state as one part, a server
    tensor alone, when it holds at least ``blob_bytes``."""
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        group = key if key.startswith(SERVER) else key[: key.index("/", len(CLIENT)) + 1]
        groups.setdefault(group, {})[key] = value
    inline: dict[str, torch.Tensor] = {}
    apart: dict[str, dict[str, torch.Tensor]] = {}
    for group, members in groups.items():
        if sum(v.numel() * v.element_size() for v in members.values()) >= blob_bytes:
            apart[group] = members
        else:
            inline.update(members)
    return inline, apart


def _blob_names(path: Path) -> set[str]:
    """The hashes of the parts the checkpoint at ``path`` names (its header only is read); empty if it has none or is unreadable."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return set(json.loads((handle.metadata() or {}).get("blobs", "{}")).values())
    except Exception:  # noqa: BLE001 (damaged or missing: it names nothing we can trust)
        return set()


def save_checkpoint(path: Path, run: RunState, blob_bytes: int | None = None) -> int:
    """Write ``run`` to ``path`` atomically; the checkpoint it replaces becomes ``previous_path(path)``.

    ``blob_bytes``: the size from which a part is kept apart (:data:`BLOB_BYTES` when None).
    Returns the bytes written: the checkpoint file and the parts that were not on disk already.
    """
    path = Path(path)
    blob_bytes = BLOB_BYTES if blob_bytes is None else blob_bytes
    server, clients, progress = run.server, run.clients, run.progress
    tensors = {SERVER + k: v for k, v in server.items()}  # the State's own tensor objects: their hashes are remembered
    stored = stored_references(clients)  # states a client-state store holds on disk: named by their hash, not read
    for client_id, state in (clients.memory if stored is not None else clients).items():  # type: ignore[attr-defined]
        tensors.update({f"{CLIENT}{client_id}/{k}": v for k, v in state.items()})
    inline, apart = _parts(_unshared(tensors), blob_bytes)
    folder = blobs_path(path)
    # a run's states may live on its device: the tensors read here (not hashed yet, or written inline) are copied to the
    # host once, together (pinned and non-blocking on CUDA)
    unhashed = {name for members in apart.values() for name, value in members.items() if value.device.type != "cpu" and _remembered(value) is None}
    host = _host_copies({**inline, **{n: v for m in apart.values() for n, v in m.items()}}, unhashed | set(inline))
    inline = {name: host[name] for name in inline}
    blobs, written = {}, 0
    for group, members in apart.items():
        digest = blobs[group] = part_sha256(members, host)
        blob = folder / f"{digest}.safetensors"
        if not blob.is_file():  # content-addressed and written atomically: a file there holds these tensors
            host.update(_host_copies(members, members.keys() - host.keys()))
            save_tensors({n: host[n] for n in members}, blob, durable=True)
            written += blob.stat().st_size
    for client_id, digest in (stored or {}).items():
        blobs[f"{CLIENT}{client_id}/"] = digest
        blob = folder / f"{digest}.safetensors"
        if not blob.is_file():  # a store whose folder is not this checkpoint's: its file is copied here once
            write_bytes(blob, (clients.folder / blob.name).read_bytes(), durable=True)  # type: ignore[attr-defined]
            written += blob.stat().st_size
    metadata = {**run.metadata, "format": FORMAT, "progress": json.dumps(progress.__dict__)}
    if stored:
        metadata[STORED] = "1"
    if blobs:
        metadata["blobs"] = json.dumps(blobs, sort_keys=True)
        metadata["blob_folder"] = folder.name
    metadata["checksum"] = _checksum(inline, metadata)
    previous = previous_path(path)
    if path.is_file():  # keep the current one as the previous one (a hard link: no copy, still atomic)
        link = path.with_name(f".{path.name}.previous-link")
        link.unlink(missing_ok=True)
        try:
            os.link(path, link)
        except OSError:  # a filesystem without hard links
            shutil.copyfile(path, link)
        os.replace(link, previous)
    save_tensors(inline, path, metadata=metadata, durable=True)
    written += path.stat().st_size
    if folder.is_dir():  # the parts neither this checkpoint nor the previous one names
        keep = set(blobs.values()) | _blob_names(previous)
        for entry in folder.glob("*.safetensors"):
            if entry.stem not in keep:
                entry.unlink(missing_ok=True)
    _forget_dead_tensors()
    return written


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
    if metadata["format"] not in FORMATS:
        raise CheckpointError(f"checkpoint {path} has format {metadata['format']!r}, expected {FORMAT!r}")
    if metadata["checksum"] != _checksum(tensors, metadata):
        raise CheckpointError(f"checkpoint {path} is damaged: checksum mismatch (its bytes changed after it was written)")
    stored: dict[int, str] = {}
    if "blobs" in metadata:
        if metadata.get(STORED):  # a client-state store's files: named here, read when a round samples the client
            stored = _stored_clients(path, metadata)
        tensors.update(_load_parts(path, metadata, skip=CLIENT if stored else None))
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
    extra = {k: v for k, v in metadata.items() if k not in ("format", "progress", "checksum", "blobs", "blob_folder", STORED)}
    if stored:
        store = ClientStates(_parts_folder(path, metadata), stored=stored)
        for client_id, state in clients.items():
            store.memory[client_id] = state
        return RunState(server, store, progress, extra)
    return RunState(server, clients, progress, extra)


def stored_references(clients: Mapping[int, State]) -> dict[int, str] | None:
    """Client id -> the hash of its state's file, where ``clients`` is a client-state store (``client_store.py``); None otherwise."""
    references = getattr(clients, "references", None)
    return references() if callable(references) else None


def _parts_folder(path: Path, metadata: dict[str, str]) -> Path:
    return path.parent / metadata.get("blob_folder", blobs_path(path).name)


def _stored_clients(path: Path, metadata: dict[str, str]) -> dict[int, str]:
    """The client parts a store-backed checkpoint names (client id -> hash), each checked to be there (its hash is checked when read)."""
    folder = _parts_folder(path, metadata)
    try:
        names = json.loads(metadata["blobs"])
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} has unreadable part names ({error})") from None
    out: dict[int, str] = {}
    for group, digest in names.items():
        if group.startswith(CLIENT):
            if not (folder / f"{digest}.safetensors").is_file():
                raise CheckpointError(f"checkpoint {path} is incomplete: its part {group!r} ({folder / digest}.safetensors) is missing")
            out[int(group[len(CLIENT) : -1])] = digest
    return out


def _load_parts(path: Path, metadata: dict[str, str], skip: str | None = None) -> dict[str, torch.Tensor]:
    """The tensors of the parts the checkpoint names (but those whose name starts with ``skip``), each part checked against its hash."""
    from safetensors.torch import load_file

    folder = _parts_folder(path, metadata)
    out: dict[str, torch.Tensor] = {}
    try:
        names = json.loads(metadata["blobs"])
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} has unreadable part names ({error})") from None
    for group, digest in sorted(names.items()):
        if skip is not None and group.startswith(skip):
            continue
        blob = folder / f"{digest}.safetensors"
        try:
            members = load_file(str(blob))
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {path} is incomplete: its part {group!r} ({blob}) is missing") from None
        except Exception as error:  # safetensors raises its own types for bad headers and truncation
            raise CheckpointError(f"checkpoint {path}: its part {group!r} ({blob}) is unreadable ({type(error).__name__}: {error})") from None
        if part_sha256(members) != digest:
            raise CheckpointError(f"checkpoint {path} is damaged: its part {group!r} ({blob}) does not match its hash")
        out.update(members)
    return out
