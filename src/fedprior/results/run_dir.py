"""A run directory: everything needed to inspect, resume and report one run.

config.toml                       the resolved config (every field), with the experiment name (experiments/run_config.py)
partition.npz                     each client's training indices, by role
partition.json                    partition statistics (sizes, class counts, beta_cib, beta_hetero)
partition.png                     clients x classes heatmap
metrics.jsonl                     one JSON line per round
run.log                           plain time-stamped lines: start or resume, one per round, warnings, the summary (run_log.py)
checkpoint.safetensors            the whole run state after the last completed round (atomic, checksummed)
checkpoint.previous.safetensors   the one before it (offered when the last one is damaged)
checkpoint.blobs/                 the large parts both name (client states, large server tensors), one file per content hash;
                                  a checkpoint file is whole only with this folder (runtime/checkpoint.py)
result.json                       the summary, once the run has finished
report.md, accuracy.png           a short report
run.lock                          while a process drives the run: its PID (see :meth:`RunDir.locked`)
tensorboard/                      TensorBoard event files (per-round metrics, the report's figures)
tracking.json                     the MLflow store (absolute URI) and run, and the W&B run id, this run logs to (run.mlflow, run.wandb)
wandb/                            the W&B run's files, when run.wandb is set (and $WANDB_DIR is not)
imports.json                      where each module of run.imports was imported from (import_origins.py), when it names any
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedprior.atomic import atomic_write, write_text
from fedprior.errors import FedpriorError
from fedprior.results.run_log import RunLog
from fedprior.runtime.checkpoint import CheckpointError, RunState, load_checkpoint, previous_path

if TYPE_CHECKING:  # reading a run folder (fedprior compare) needs neither the config models nor torch
    from fedprior.partition import Partition


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.journal = RunLog(self.log)
        """Appends to run.log (the runner writes it; see :class:`RunLog`)."""
        self.result_written = False
        """Set once this process wrote result.json: the run is complete, whatever a later write (a tracker's) does."""

    config = property(lambda self: self.path / "config.toml")
    checkpoint = property(lambda self: self.path / "checkpoint.safetensors")
    previous_checkpoint = property(lambda self: previous_path(self.checkpoint))
    metrics = property(lambda self: self.path / "metrics.jsonl")
    log = property(lambda self: self.path / "run.log")
    result = property(lambda self: self.path / "result.json")
    partition_indices = property(lambda self: self.path / "partition.npz")
    partition_stats = property(lambda self: self.path / "partition.json")
    partition_plot = property(lambda self: self.path / "partition.png")
    report = property(lambda self: self.path / "report.md")
    accuracy_plot = property(lambda self: self.path / "accuracy.png")
    client_accuracy_plot = property(lambda self: self.path / "client_accuracy.png")
    lock_file = property(lambda self: self.path / "run.lock")
    tensorboard = property(lambda self: self.path / "tensorboard")
    tracking = property(lambda self: self.path / "tracking.json")
    imports = property(lambda self: self.path / "imports.json")

    @classmethod
    def new(cls, name: str, base: Path = Path("runs")) -> RunDir:
        """A fresh folder ``runs/<name>-<timestamp>`` (suffixed if it exists)."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = base / f"{name}-{stamp}"
        suffix = 1
        while path.exists():
            suffix += 1
            path = base / f"{name}-{stamp}-{suffix}"
        return cls(path)

    @classmethod
    def existing(cls, path: Path) -> RunDir:
        run = cls(path)
        if not run.config.is_file():
            raise FedpriorError(f"{path} is not a fedprior run directory (no config.toml)")
        return run

    def check_new(self) -> None:
        """Refuse, before any work, a ``--run-dir`` that is a file, holds another run, or holds other files."""
        if self.path.exists() and not self.path.is_dir():
            raise FedpriorError(f"--run-dir: {self.path} is a file, not a folder; give a new or empty folder")
        if self.checkpoint.exists() or self.previous_checkpoint.exists():
            holder = self.lock_holder()
            if holder is not None:
                raise FedpriorError(f"--run-dir: {self.path} holds a run that is in use by process {holder}; give another folder")
            raise FedpriorError(f"--run-dir: {self.path} already holds a run; resume it with `fedprior resume {self.path}`")
        if self.path.is_dir() and not self.config.is_file():
            others = sorted(p.name for p in self.path.iterdir() if p.name != self.lock_file.name)
            if others:
                shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
                raise FedpriorError(f"--run-dir: {self.path} is not empty ({shown}) and is not a fedprior run; give a new or empty folder")

    def lock_holder(self) -> str | None:
        """The PID in ``run.lock`` if another process holds the lock now (a run or a resume of this folder), else None.

        The lock is tried and at once let go; a lock file this process holds is not touched (closing any handle on it
        would drop this process's lock), and one that cannot be opened for writing says nothing.
        """
        try:
            text = self.lock_file.read_text().strip()
        except OSError:
            return None
        if text == str(os.getpid()):
            return text
        try:
            with open(self.lock_file, "a+") as handle:
                try:
                    fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as error:
                    return (text or "another process") if error.errno in (errno.EAGAIN, errno.EACCES) else None
                fcntl.lockf(handle, fcntl.LOCK_UN)
        except OSError:
            return None
        return None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``run.lock`` (an exclusive POSIX lock on a file holding this PID) while the body runs.

        A second process on the same run directory is refused with the PID of the first. The
        kernel drops the lock when its holder dies, however it dies, so a lock file left by a
        dead process is simply taken over. A POSIX (``lockf``) lock belongs to this process
        alone: worker processes forked from it do not hold it, so a killed run's leftover
        workers never block its resume. Creating the folder and the lock file is also the
        first write into the run directory: an unwritable one fails here, before any work. A
        folder this call created and that is still empty at the end (the run stopped before
        writing anything) is removed.
        """
        created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise FedpriorError(f"--run-dir: cannot create {self.path} ({error.strerror or error})") from None
        while True:
            try:
                handle = open(self.lock_file, "a+")
            except OSError as error:
                raise FedpriorError(f"run directory {self.path} is not writable ({error.strerror or error})") from None
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise FedpriorError(f"cannot lock {self.lock_file} ({error.strerror or error})") from None
                raise FedpriorError(
                    f"run directory {self.path} is in use by process {holder}; wait for it to finish or stop it (two processes must not drive one run)"
                ) from None
            try:
                same = os.path.samestat(os.fstat(handle.fileno()), os.stat(self.lock_file))
            except FileNotFoundError:
                same = False
            if same:
                break
            handle.close()  # the holder we waited on removed the file: lock the new one
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield
        finally:
            self.lock_file.unlink(missing_ok=True)
            handle.close()
            if created and not any(self.path.iterdir()):  # stopped before writing anything: leave no empty folder
                self.path.rmdir()

    def load_checkpoint(self, previous: bool = False) -> RunState | None:
        """The run state to resume from (None: nothing trained yet), or a CheckpointError that says what to do.

        ``previous``: continue from the checkpoint before the last one (when the last is damaged);
        it is copied over the last one first, so the run goes on from there.
        """
        current, earlier = self.checkpoint, self.previous_checkpoint
        if previous:
            if not earlier.is_file():
                raise CheckpointError(f"{earlier} does not exist: there is no previous checkpoint to resume from")
            state = load_checkpoint(earlier)
            atomic_write(current, lambda handle: handle.write(earlier.read_bytes()), durable=True)
            return state
        if not current.is_file():
            if earlier.is_file():
                raise CheckpointError(f"checkpoint {current} is missing; {self._offer_previous()}")
            return None
        try:
            return load_checkpoint(current)
        except CheckpointError as error:
            raise CheckpointError(f"{error}; {self._offer_previous()}") from None

    def _offer_previous(self) -> str:
        try:
            state = load_checkpoint(self.previous_checkpoint) if self.previous_checkpoint.is_file() else None
        except CheckpointError:
            state = None
        if state is None:
            return f"no intact earlier checkpoint: start again with `fedprior run {self.config} --run-dir NEW_FOLDER`"
        rounds = len(state.progress.history)
        return f"the previous checkpoint (after {rounds} round{'s' * (rounds != 1)}) is intact: `fedprior resume {self.path} --previous` continues from it"

    def write_partition(self, partition: Partition, stats: dict[str, Any]) -> None:
        arrays = {f"{role}/{client}": idx for role, parts in partition.roles.items() for client, idx in enumerate(parts)}
        # numpy's stub types **kwds as if a key could be its allow_pickle flag; these keys are "role/client"
        atomic_write(self.partition_indices, lambda handle: np.savez_compressed(handle, **arrays))  # type: ignore[arg-type]
        write_text(self.partition_stats, json.dumps(stats))

    def partition_intact(self, partition: Partition) -> bool:
        """Whether partition.npz holds exactly ``partition``'s indices."""
        arrays = {f"{role}/{client}": idx for role, parts in partition.roles.items() for client, idx in enumerate(parts)}
        try:
            with np.load(io.BytesIO(self.partition_indices.read_bytes())) as saved:
                return set(saved.files) == set(arrays) and all(np.array_equal(saved[k], v) for k, v in arrays.items())
        except Exception:  # missing, truncated, not an npz: rewrite it
            return False

    def append_metrics(self, record: dict[str, Any]) -> None:
        """One line more in metrics.jsonl; a write that fails (a full disk) names the file, which an open handle's error does not."""
        try:
            with self.metrics.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
        except OSError as error:
            if not error.filename:
                error.filename = str(self.metrics)
            raise

    def rewrite_metrics(self, records: list[dict[str, Any]]) -> None:
        write_text(self.metrics, "".join(json.dumps(r) + "\n" for r in records))

    def write_result(self, summary: dict[str, Any]) -> None:
        write_text(self.result, json.dumps(summary, indent=2))
        self.result_written = True
