"""A grid's processes (``table_runs.execute_runs``) stopped: one line, no noise (issue 46 item 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import pytest


class Thing:
    pass


def stop_here(ref):
    """A weakref callback (as WeakSet's, run by the garbage collector mid-round) in which the cell's SIGTERM arrives."""
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # the handler runs here: inside the callback, where Python drops its exception
        pass


@dataclass
class Cell:
    row: str = "r"
    column: str = "c"


@dataclass
class Stopped:
    """A grid's run (the parts execute_runs reads): ``seed`` 1 gets its SIGTERM inside a callback, then would train 60 s."""

    seed: int
    concurrent: int = 1
    action: str = "run"
    cell: Cell = field(default_factory=Cell)

    @property
    def config(self) -> SimpleNamespace:
        return SimpleNamespace(run=SimpleNamespace(device="cpu", concurrent_clients=self.concurrent))

    def single_threaded(self) -> Stopped:
        return replace(self, concurrent=1)

    def execute(self) -> dict:
        if self.seed == 1:
            thing = Thing()
            ref = weakref.ref(thing, stop_here)  # noqa: F841
            del thing
        end = time.monotonic() + (STOPPED_JOB_SECONDS if self.seed == 1 else 0)
        while time.monotonic() < end:
            pass
        return {"forked": bool(FORKED_MARK)}


STOPPED_JOB_SECONDS = 900
"""How long the stopped job would train: far above what starting two spawned processes takes on a loaded machine (issue 56 item 7)."""

FORKED_MARK: list[int] = []
"""Set in the test's process before the grid's processes start: a forked one has it, a spawned one does not."""


STOPPED_GRID = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.experiments.test_table_runs_processes import Stopped
from fedprior.experiments.table_runs import execute_runs

start = time.monotonic()
try:
    execute_runs([Stopped(0), Stopped(1)], 2, lambda run, summary: None)
except KeyboardInterrupt as error:
    print(f"{type(error).__name__} {time.monotonic() - start:.1f}", flush=True)
"""


def test_a_cell_whose_sigterm_lands_in_a_callback_stops_at_once_without_a_traceback():
    done = subprocess.run([sys.executable, "-c", STOPPED_GRID, str(Path(__file__).parents[2])], capture_output=True, text=True, timeout=STOPPED_JOB_SECONDS)
    name, seconds = done.stdout.split()
    assert name == "Interrupted" and float(seconds) < STOPPED_JOB_SECONDS / 3, done.stdout  # not the STOPPED_JOB_SECONDS it would train on
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_grids_processes_are_forked_when_its_runs_drop_their_client_threads(monkeypatch):
    """``run.concurrent_clients = 2`` with ``--jobs 2``: each process runs its run with 1 (single_threaded), so forking is safe."""
    from fedprior.experiments.table_runs import execute_runs

    monkeypatch.setattr(sys.modules[__name__], "FORKED_MARK", [1])
    seen = execute_runs([Stopped(0, concurrent=2), Stopped(2, concurrent=2)], 2, lambda run, summary: None)  # type: ignore[list-item]
    assert seen[("r", "c", 0)] == {"forked": True}


KILLED_SPAWNED_GRID = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.experiments.test_table_runs_processes import Sleeping
from fedprior.cli.app import quiet_resource_tracker
from fedprior.experiments.table_runs import execute_runs

quiet_resource_tracker()  # as every fedprior command does
execute_runs([Sleeping(0), Sleeping(1), Sleeping(2)], 2, lambda run, summary: print("started", flush=True))
"""


@dataclass
class Sleeping(Stopped):
    """A run that asks for client threads (so its process is spawned) and sleeps 60 s, but seed 0, which returns at once."""

    concurrent: int = 2

    def single_threaded(self) -> Sleeping:
        return self

    def execute(self) -> dict:
        time.sleep(60 if self.seed else 0)
        return {}


@pytest.mark.benchmark  # 10-20 s on 2 busy cores (two spawned processes import torch): with the benchmarks
def test_kill_9_of_a_grid_with_spawned_processes_leaves_no_resource_tracker_warning():
    grid = subprocess.Popen(
        [sys.executable, "-c", KILLED_SPAWNED_GRID, str(Path(__file__).parents[2])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert grid.stdout.readline().strip() == "started"  # type: ignore[union-attr]
    finally:
        grid.kill()
    _, errors = grid.communicate(timeout=300)  # the pipes close once the children and the resource tracker are gone
    assert "leaked semaphore" not in errors and "resource_tracker" not in errors, errors
