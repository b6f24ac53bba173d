"""A grid's runs in its ``--out`` folder, so that the same table (or sweep) command run again continues a stopped grid.

Each seed of each cell (:class:`~fedprior.experiments.cell.Cell`) runs in ``OUT/ROW--COLUMN--seedN``. A paper table's
grid (:mod:`fedprior.reproduce.tables`) and a sweep's (``fedprior run --seeds/--sweep``,
:mod:`fedprior.experiments.sweep`) run the same way. When the table command runs
again into the same ``--out`` (after Ctrl-C, SIGTERM, ``kill -9`` or a crash), each
folder is taken as it is:

- it holds ``result.json``: the run finished; its summary is **reused** (nothing trains,
  nothing in the folder is written);
- it holds a checkpoint but no ``result.json`` (or a damaged one): the run stopped
  mid-way; it is **resumed** from its last checkpoint as ``fedprior resume`` does, and
  ends with the numbers of an uninterrupted run;
- it holds only ``config.toml`` (stopped before its first round was saved), or there is
  no folder: the run starts (again) from the beginning.

A folder holding work whose ``config.toml`` differs from what the table would run there now
(another ``--set``) is refused before any cell runs, naming the cell and the fields; the
fields a resume may find changed (threads, workers, device, where the data is:
``resume_check.RESUME_MAY_CHANGE``) do not count.

:func:`execute_runs` runs what is left, one after the other in this process (``jobs = 1``)
or in ``jobs`` processes at once (forked on Linux where no run can use CUDA, else spawned), each run with ``run.threads = 1`` and ``run.workers = 1``
so that jobs x threads never oversubscribe the cores. The numbers do not depend on it: a
run's numbers do not depend on its threads or workers (``fedprior.runtime.threads``), and
each run is its own run folder, seeded by its config alone.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprior.errors import ConfigError, FedpriorError, Interrupted, redeliver_swallowed_stop
from fedprior.experiments.resume_check import RESUME_MAY_CHANGE, changes_that_matter, describe_changes
from fedprior.experiments.run_config import read_config
from fedprior.results.config_fields import flatten
from fedprior.results.run_dir import RunDir

if TYPE_CHECKING:
    from fedprior.experiments.cell import Cell
    from fedprior.experiments.config import ExperimentConfig

REUSED, RESUMED, RUN, COPIED = "reused", "resumed", "run", "copied"
"""What a cell's run does: read its finished result, continue it from its checkpoint, run it, or copy the finished run of
another cell of the grid whose config is the same (:func:`twins`)."""


def check_grid_folder(folder: Path, option: str = "--out", command: str = "table") -> None:
    """A ConfigError naming ``option``, before anything runs or is printed, where ``folder`` cannot hold the grid's run
    folders: it, or a folder above it, is a file; it is itself a run's folder (``config.toml``); it does not exist and
    the folder above it where it would be created is not writable (a read-only file system)."""
    again = f"give a new folder, or the folder of a stopped {command} to continue it"
    for path in (folder, *folder.parents):
        if path.exists():
            if not path.is_dir():
                raise ConfigError(f"{option}: {path} is a file, not a folder; {again}")
            if path == folder and RunDir(folder).config.is_file():
                raise ConfigError(
                    f"{option}: {folder} is the folder of one run (it holds config.toml); the {command}'s runs each get a folder inside --out: {again}"
                )
            if path != folder and not os.access(path, os.W_OK | os.X_OK):
                raise ConfigError(f"{option}: cannot create {folder}: {path} is not writable (a read-only file system, or another user's folder)")
            return


def check_grid_writable(folder: Path, runs: Iterable[CellRun], option: str = "--out", command: str = "table") -> None:
    """A ConfigError naming ``option``, before anything runs, where ``folder`` exists but cannot be written and a run of the
    grid is still to start there (its folder to be made); a grid whose runs are all finished or started is read as it is."""
    if any(r.action == RUN for r in runs) and folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{option}: {folder} is not writable (a read-only file system, or another user's folder), and the {command}'s runs make their "
            f"folders in it; give another {option}"
        )


def cell_folder(folder: Path, cell: Cell, seed: int) -> Path:
    """``folder/ROW--COLUMN--seedN`` (an empty row or column left out: a sweep's ``lr=0.01--seedN``), with characters a file
    name should not hold replaced by '_'."""
    name = "--".join(part for part in (cell.row, cell.column, f"seed{seed}") if part)
    return folder / re.sub(r"[^A-Za-z0-9.=-]+", "_", name).strip("_")


@dataclass
class CellRun:
    """One seed of one cell: where it runs, with which config, and what running it does now."""

    cell: Cell
    seed: int
    name: str
    config: ExperimentConfig
    path: Path
    action: str
    """REUSED, RESUMED or RUN."""
    result: dict[str, Any] = field(default_factory=dict)
    """The finished run's summary (REUSED)."""

    def execute(self) -> dict[str, Any]:
        """The run's summary: read (REUSED), or after resuming or running it."""
        from fedprior.experiments.runner import resume, start

        if self.action == REUSED:
            return self.result
        if self.action == RESUMED:  # with the config the table runs now (it differs at most in what a resume may change)
            return resume(self.path, config=self.config, report_extras=False)
        return start(self.name, self.config, self.path, report_extras=False)

    def single_threaded(self) -> CellRun:
        """This run with ``run.threads = 1``, ``run.workers = 1`` and ``run.concurrent_clients = 1`` (one of several running at once)."""
        run = self.config.run.model_copy(update={"threads": 1, "workers": 1, "concurrent_clients": 1})
        return replace(self, config=self.config.model_copy(update={"run": run}))


def twins(runs: list[CellRun]) -> dict[int, int]:
    """``{i: j}``: run ``i`` would start from nothing (RUN) with the config of run ``j`` as far as the numbers go (every
    field but :data:`~fedprior.experiments.resume_check.RESUME_MAY_CHANGE`); ``j`` is a finished or started run of
    that config where there is one, else the first run of it.

    Cells of different columns can resolve to one config: a central control clears the column's scenario (MFCL), so
    ``Central FedSimCLR`` is the same run in Sc2 and Sc10. Such a run trains once; the others copy it (:func:`copy_twin`).
    """
    groups: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        fields = {k: v for k, v in flatten(run.config.to_dict()).items() if k not in RESUME_MAY_CHANGE}
        groups.setdefault(json.dumps(fields, sort_keys=True), []).append(i)
    found: dict[int, int] = {}
    for members in groups.values():
        first = next((j for j in members if runs[j].action != RUN), members[0])
        found |= {i: first for i in members if i != first and runs[i].action == RUN}
    return found


def copy_twin(original: CellRun, twin: CellRun) -> CellRun:
    """``twin`` (see :func:`twins`) as a copy of ``original``'s finished run folder, its ``result.json`` naming its own
    folder; the returned run is COPIED and holds the summary."""
    import shutil

    if twin.path.exists():  # a RUN holds at most the config.toml of a run stopped before its first round
        shutil.rmtree(twin.path)
    shutil.copytree(original.path, twin.path)
    result = RunDir(twin.path).result
    summary = {**json.loads(result.read_text()), "run_dir": str(twin.path)}
    result.write_text(json.dumps(summary, indent=2))
    return replace(twin, action=COPIED, result=summary)


def finished_result(run: RunDir) -> dict[str, Any] | None:
    """The summary in ``result.json``; None if there is none or it cannot be read (the run is resumed, which rewrites it)."""
    try:
        summary = json.loads(run.result.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and "initial_accuracy" in summary else None


def plan_cell(folder: Path, cell: Cell, seed: int, name: str, config: ExperimentConfig, option: str = "--out", command: str = "table") -> CellRun:
    """What running ``cell`` with ``seed`` in ``folder`` does now; a ConfigError if its folder holds a run of another config
    or one that another process drives now (a second sweep or table on the same folder).

    ``option`` is the command-line option that named ``folder``, ``command`` what runs the grid ('table', 'sweep'), for the
    error message."""
    path = cell_folder(folder, cell, seed)
    run = RunDir(path)
    which = f"cell {cell.row} / {cell.column} seed {seed}" if cell.column else f"run {path.name}"
    holder = run.lock_holder() if run.lock_file.exists() else None
    if holder is not None and holder != str(os.getpid()):  # before the grid announces anything it would run
        raise ConfigError(
            f"{option}: {which} ({path}) is in use by process {holder} (another {command} on this {option}?); "
            f"wait for it to finish or stop it, or give another {option}"
        )
    result = finished_result(run) if run.result.is_file() else None
    started = run.checkpoint.exists() or run.previous_checkpoint.exists()
    if result is None and not started:
        return CellRun(cell, seed, name, config, path, RUN)
    _, saved = read_config(run)
    changed = changes_that_matter(saved.to_dict(), config.to_dict())
    if changed:
        raise ConfigError(
            f"{option}: {which} ({path}) holds a run of another config: "
            f"{describe_changes(changed, 'there')}; rerun the {command} with the settings it started with, or give another {option}"
        )
    if result is not None:
        return CellRun(cell, seed, name, config, path, REUSED, result)
    return CellRun(cell, seed, name, config, path, RESUMED)


def run_order(run: CellRun) -> tuple[bool, int]:
    """A paper table's order of runs (``sorted(runs, key=run_order)``): those a stopped grid had begun first, then seed by
    seed across the cells.

    Seed-major, so that a table stopped part-way (a seed plan of tens of seeds, a session that ends) has run the
    same seeds of every cell, and each paired claim gains every seed both of its cells finished; within a seed,
    the cells keep the table's order (the sort is stable). The numbers do not depend on the order: each run is
    its own folder, seeded by its config alone. A sweep keeps the order it lists (value by value).
    """
    return (run.action != RESUMED, run.seed)


def execute_runs(
    runs: list[CellRun], jobs: int, on_done: Callable[[CellRun, dict[str, Any]], None], on_start: Callable[[CellRun], None] | None = None
) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Every run's summary by (row, column, seed): the finished ones read, the others run, ``on_done`` after each.

    ``jobs = 1`` (or one run left): in this process, in order, ``on_start`` before each run that trains. Otherwise in
    ``jobs`` processes (each run single-threaded, see the module docstring), reported in the order they finish.
    A failed run, Ctrl-C or SIGTERM stops the others at their last checkpoint (they resume
    when the table runs again) and raises.
    """
    summaries: dict[tuple[str, str, int], dict[str, Any]] = {}

    def done(run: CellRun, summary: dict[str, Any]) -> None:
        summaries[run.cell.row, run.cell.column, run.seed] = summary
        on_done(run, summary)

    for run in runs:
        if run.action == REUSED:
            done(run, run.result)
    pending = [run for run in runs if run.action != REUSED]
    if jobs <= 1 or len(pending) <= 1:
        for run in pending:
            if on_start is not None:
                on_start(run)
            done(run, run.execute())
        return summaries
    _in_processes(pending, jobs, done)
    return summaries


def _in_processes(pending: list[CellRun], jobs: int, done: Callable[[CellRun, dict[str, Any]], None]) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    single = {id(run): run.single_threaded() for run in pending}  # as the processes run them: forked, where no run uses threads
    context = multiprocessing.get_context(start_method(list(single.values())))
    stopping = context.Event()
    pool = ProcessPoolExecutor(min(jobs, len(pending)), mp_context=context, initializer=_child_start, initargs=(os.getpid(), stopping))
    try:
        futures = {pool.submit(_child_run, single[id(run)]): run for run in pending}
        for future in as_completed(futures):
            done(futures[future], future.result())
    except BrokenProcessPool:
        _stop(pool, stopping)
        raise FedpriorError("a process running a cell of the table died (killed?); run the same table command again to continue it") from None
    except BaseException:
        _stop(pool, stopping)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def start_method(pending: list[CellRun]) -> str:
    """``fork`` (no start-up cost) where no run can use CUDA nor runs client updates in threads, else ``spawn``: CUDA cannot
    be used in a process forked after CUDA started, and this process may have started it (e.g. a test run before); threads
    in a forked process crash now and then (``fedprior.runtime.workers``)."""
    from fedprior.runtime.workers import default_start_method

    method = default_start_method(max((run.config.run.concurrent_clients for run in pending), default=1))
    if method == "fork" and any(run.config.run.device != "cpu" for run in pending) and cuda_possible():
        return "spawn"
    return method


def cuda_possible() -> bool:
    """Whether this torch could use a GPU here, asked without starting CUDA: a CUDA build and an NVIDIA device node."""
    import torch

    return torch.backends.cuda.is_built() and any(Path("/dev").glob("nvidia[0-9]*"))


def _stop(pool: Any, stopping: Any) -> None:
    """Stop the cells of ``pool``: none starts any more (``stopping``), and SIGTERM to every process stops the running ones
    at their last checkpoint (an idle process waits to be shut down)."""
    stopping.set()  # before the signals: a process between two cells sees it before it starts the next
    for process in list(getattr(pool, "_processes", {}).values()):
        if process.is_alive() and process.pid is not None:
            try:
                os.kill(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


_BUSY = {"run": False}
"""In a table's child process: whether a cell is running (a SIGTERM then stops it)."""
_PARENT: dict[str, Any] = {"pid": 0, "stopping": None}
"""In a table's child process: the table's process (when it is gone, the child exits once its run has stopped) and the
event it sets when the table stops (no cell starts after it)."""


def _child_start(parent: int, stopping: Any) -> None:
    """A child process of a table: stopped by SIGTERM only (Ctrl-C reaches the whole process group: the parent
    stops the runs), and by the kernel when the parent dies (Linux), one torch thread, warnings one line each."""
    import torch

    _PARENT.update(pid=parent, stopping=stopping)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _child_terminated)
    sys.unraisablehook = redeliver_swallowed_stop  # a SIGTERM raised inside a callback stops the cell, not a traceback
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)
    torch.set_num_threads(1)
    warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: print(f"warning: {message}", file=sys.stderr)


def _child_terminated(signum: int, frame: Any) -> None:
    """SIGTERM: stop the running cell (Interrupted, at its last checkpoint); an idle process exits if the table's is gone,
    else waits to be shut down."""
    if _BUSY["run"]:
        raise Interrupted(signum)
    if os.getppid() != _PARENT["pid"]:
        os._exit(128 + signum)


def _child_run(run: CellRun) -> dict[str, Any]:
    try:
        # SIGTERM held off while reading the event: raised inside Event.is_set, it could leave the event's process-shared
        # lock held, and every other process of the table would wait on it forever. One that arrives meanwhile is
        # delivered on unblocking, with the cell marked busy: it stops the cell here.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            stopped = _PARENT["stopping"].is_set()
            _BUSY["run"] = True
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        if stopped:  # the table stopped (a SIGTERM before this cell was taken up was ignored)
            raise Interrupted(signal.SIGTERM)
        return run.execute()
    finally:
        _BUSY["run"] = False
        if os.getppid() != _PARENT["pid"]:  # the table's process was killed: nobody reads the result, and the pool's pipes
            os._exit(1)  # stay open in the other children, so this process would wait forever
