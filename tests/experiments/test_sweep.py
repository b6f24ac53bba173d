"""What the fourth reliability probe found (issue 46 item 6), one test each: every planned config of a sweep or table
checked whole before anything trains, ``--dry-run`` included; a user's algorithm that raises or returns no Algorithm
named with its module; and one clear line for each input the probe gave."""

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
import torch

import fedprior
from fedprior.algorithms.registry import ALGORITHMS, REGISTERED_HERE, algorithm_spec
from tests.support.cli import TINY, error_line, invoke


@pytest.fixture
def registry():
    """Algorithms a test registers are forgotten after it."""
    shipped, here = dict(ALGORITHMS), set(REGISTERED_HERE)
    yield ALGORITHMS
    ALGORITHMS.clear()
    ALGORITHMS.update(shipped)
    REGISTERED_HERE.clear()
    REGISTERED_HERE.update(here)


# ----------------------------------------------------------------------------- cross-field checks before anything trains

SERVER_GRID = ["--sweep", "algorithm.server_optimizer=adam,none", "--sweep", "algorithm.server_lr=0.01,0.1"]
NONE_WITH_LR = (
    "algorithm.server_lr: applies with algorithm.server_optimizer = 'avgm' or 'adagrad' or 'adam' or 'yogi', not with 'none'; "
    "leave it unset or choose a server optimizer that reads it"
)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_a_sweep_whose_later_run_breaks_a_cross_field_rule_is_refused_before_any_run(tmp_path, dry_run):
    out = tmp_path / "grid"
    result = invoke("run", "fedprox-cnn", *TINY, *SERVER_GRID, "--seeds", "2", "--out", out, *dry_run)
    assert error_line(result) == f"error: --sweep: the run server_optimizer=none--server_lr=0.01: {NONE_WITH_LR}"
    assert result.stderr.strip() == error_line(result) and not out.exists()  # no banner, nothing trained or written


def test_the_dry_run_of_one_run_refuses_what_its_algorithm_refuses():
    refused = error_line(invoke("run", "fedprox-cnn", *TINY, "--set", "algorithm.server_lr=0.1", "--dry-run"))
    assert refused == f"error: {NONE_WITH_LR}"
    scaffold = error_line(invoke("run", "scaffold-cnn", *TINY, "--set", "algorithm.server_optimizer=adam", "--set", "algorithm.global_lr=0.5", "--dry-run"))
    assert scaffold.startswith("error: algorithm.global_lr: is plain SCAFFOLD's server step")


def test_a_table_whose_cells_break_a_cross_field_rule_is_refused_before_its_banner(tmp_path):
    out = tmp_path / "table"
    result = invoke("table", "fst-cbdg-table2", "--embedded", "--rows", "FedAvg", "--columns", "s=2", "--set", "run.precision=bf16", "--out", out)
    line = error_line(result)
    assert line.startswith("error: cell FedAvg / s=2: run.precision: model = 'linear' trains batched heads on features in fp32 only")
    assert result.stderr.strip() == line and not out.exists()


def test_the_check_without_data_stops_a_factory_at_its_first_look_at_the_task(registry):
    looked = []

    def factory(task, *, lr: float = 0.1, device: torch.device = torch.device("cpu")):
        if lr > 1:
            raise fedprior.ConfigError("algorithm.lr: at most 1")
        looked.append(True)
        return task.num_classes  # the data's: never reached without it

    spec = fedprior.register_algorithm("looks-at-task", factory)
    spec.check_without_data({"lr": 0.5})
    with pytest.raises(fedprior.ConfigError, match="algorithm.lr: at most 1"):
        spec.check_without_data({"lr": 2.0})
    assert looked == [True]
    algorithm_spec("fedavg").check_without_data({}, local_epochs=1, batch_size=8)  # a shipped factory stops at its model's task


# ----------------------------------------------------------------------------- a user's own algorithm that fails


def raising(task, *, device: torch.device = torch.device("cpu")):
    raise RuntimeError("boom")


def gives_dict(task, *, device: torch.device = torch.device("cpu")):
    return {"stages": ()}


def raising_aggregate(task, *, local_epochs: int = 1, batch_size: int = 32, device: torch.device = torch.device("cpu")):
    def aggregate(state, replies, info):
        raise RuntimeError("boom in aggregate")

    return algorithm_spec("fedavg").factory(task, local_epochs=local_epochs, batch_size=batch_size, device=device).with_(aggregate=aggregate)


@pytest.mark.parametrize(
    "factory, says",
    [
        (raising, "its factory raised RuntimeError: boom"),
        (gives_dict, "its factory returned dict, not an Algorithm (fedprior.algorithms.base.Algorithm)"),
        (lambda task, *, device=torch.device("cpu"): None, "its factory returned NoneType, not an Algorithm (fedprior.algorithms.base.Algorithm)"),
        (raising_aggregate, "its aggregate raised RuntimeError: boom in aggregate"),
    ],
    ids=["raises", "dict", "none", "aggregate"],
)
def test_a_users_algorithm_that_fails_is_named_with_its_module_not_called_a_bug(registry, tmp_path, factory, says):
    fedprior.register_algorithm("mine", factory)
    result = invoke("run", "fedavg-cnn", *TINY, "--algorithm", "mine", "--run-dir", tmp_path / "run")
    assert result.exit_code == 2
    assert error_line(result) == f"error: algorithm 'mine' (module {factory.__module__}): {says}"


# ----------------------------------------------------------------------------- one clear line each


def test_sweeping_algorithm_names_whose_fields_differ_points_to_a_config_per_algorithm():
    line = error_line(invoke("run", "fedavg-cnn", *TINY, "--sweep", "algorithm.name=fedavg,fedntd", "--dry-run"))
    assert line.endswith(
        "algorithm.model comes from the preset 'fedavg-cnn', written for its algorithm 'fedavg' (--sweep algorithm.name changes only the name): "
        "write a config for fedntd (fedprior presets show fedavg-cnn --algorithm fedntd > fedntd.toml) and run it on its own, "
        "or sweep only names that take these fields"
    )


@pytest.mark.parametrize(
    "option, message",
    [
        (["--seeds", "99999999999999999999"], "--seeds '99999999999999999999': a count of at most 10,000 seeds (one run each)"),
        (["--sweep", "=1,2"], "--sweep '=1,2': the key must be section.key with a section among data, partition"),
    ],
)
def test_a_huge_seed_count_and_a_sweep_without_key_are_one_line_quoting_what_was_given(tmp_path, option, message):
    assert error_line(invoke("run", "fedavg-cnn", *TINY, *option, "--out", tmp_path / "grid")).startswith(f"error: {message}")


@pytest.mark.parametrize("command, what", [(["table", "fst-cbdg-table2", "--embedded"], "table"), (["run", "fedavg-cnn", *TINY, "--seeds", "2"], "sweep")])
def test_an_out_that_is_a_run_folder_or_cannot_be_created_is_refused_naming_out(tmp_path, command, what):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text("")
    result = invoke(*command, "--out", run)
    assert error_line(result) == (
        f"error: --out: {run} is the folder of one run (it holds config.toml); the {what}'s runs each get a folder inside --out: "
        f"give a new folder, or the folder of a stopped {what} to continue it"
    )
    assert result.stderr.strip() == error_line(result)
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    blocked.chmod(0o555)
    unwritable = Path("/proc/1") if os.access(blocked, os.W_OK) else blocked  # root writes anywhere but into /proc
    result = invoke(*command, "--out", unwritable / "new")
    assert (
        error_line(result)
        == f"error: --out: cannot create {unwritable / 'new'}: {unwritable} is not writable (a read-only file system, or another user's folder)"
    )
    assert result.stderr.strip() == error_line(result)  # no banner, no run started


def test_verify_names_a_damaged_result_json_and_an_unrecorded_machine(tmp_path):
    from fedprior.reproduce.table_verify import recorded_machine, unrecorded_machine

    kept = tmp_path / "cells" / "fst-cbdg-table2" / "FedAvg--s=2--seed0"
    kept.mkdir(parents=True)
    (kept / "result.json").write_text('{"final_accuracy": 0.5,')
    result = invoke("table", "fst-cbdg-table2", "--embedded", "--columns", "s=2", "--rows", "FedAvg", "--verify", "--cells", tmp_path / "cells")
    assert error_line(result).startswith(f"error: --cells: {kept / 'result.json'} is not valid JSON (Expecting property name")
    machine = recorded_machine({}, tmp_path / "no-record.json")
    assert unrecorded_machine(machine) == (
        f"the machine it ran on is not recorded (neither the cell's result.json nor {tmp_path / 'no-record.json'} says): another machine may give other bits"
    )


def test_tables_names_a_damaged_record_and_a_missing_results_folder(tmp_path):
    (tmp_path / "fst-cbdg-table2.json").write_text("{damaged")
    line = error_line(invoke("tables", "--results", tmp_path))
    assert line.startswith(f"error: --results: {tmp_path / 'fst-cbdg-table2.json'} is not valid JSON (")
    missing = tmp_path / "no" / "such"
    line = error_line(invoke("tables", "--results", missing))
    assert line == f"error: --results: {missing} is not a folder; give the folder of the tables' records NAME.json (benchmarks/results/tables)"


# ----------------------------------------------------------------------------- a grid's processes stopped: one line, no noise


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
        end = time.monotonic() + (60 if self.seed == 1 else 0)
        while time.monotonic() < end:
            pass
        return {"forked": bool(FORKED_MARK)}


FORKED_MARK: list[int] = []
"""Set in the test's process before the grid's processes start: a forked one has it, a spawned one does not."""

STOPPED_GRID = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.experiments.test_sweep import Stopped
from fedprior.experiments.table_runs import execute_runs

start = time.monotonic()
try:
    execute_runs([Stopped(0), Stopped(1)], 2, lambda run, summary: None)
except KeyboardInterrupt as error:
    print(f"{type(error).__name__} {time.monotonic() - start:.1f}", flush=True)
"""


def test_a_cell_whose_sigterm_lands_in_a_callback_stops_at_once_without_a_traceback():
    done = subprocess.run([sys.executable, "-c", STOPPED_GRID, str(Path(__file__).parents[2])], capture_output=True, text=True, timeout=120)
    name, seconds = done.stdout.split()
    assert name == "Interrupted" and float(seconds) < 20, done.stdout  # not the 60 s it would train on
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
from tests.experiments.test_sweep import Sleeping
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
    _, errors = grid.communicate(timeout=60)  # the pipes close once the children and the resource tracker are gone
    assert "leaked semaphore" not in errors and "resource_tracker" not in errors, errors


def test_a_tau_that_float32_rounds_to_zero_is_refused_naming_tau():
    line = error_line(invoke("run", "fedyogi-cnn", "--set", "algorithm.tau=1e-50", "--dry-run"))
    assert line.startswith("error: algorithm.tau: input should be greater than or equal to 0.0000") and line.endswith("(got 1e-50)")
    assert algorithm_spec("fedyogi").validate({"tau": 1e-38})["tau"] == 1e-38
    assert float(torch.tensor(1e-50, dtype=torch.float32)) == 0 and float(torch.tensor(1e-38, dtype=torch.float32)) > 0
