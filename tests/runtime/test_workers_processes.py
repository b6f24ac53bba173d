"""Worker processes (run.workers) never outlive their run (issue 15, items 1 and 7): kill -9 of the main
process (fork and spawn, then a resume gives the uninterrupted numbers), Ctrl-C and SIGTERM sent to the
process group (quiet, one line), kill -9 during MFCL's server phase and FedBM's generator training; and
run.workers is capped at the clients of a round."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, Reply
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.flower.processes import alive, process_tree, start_time
from fedprior.orphans import die_with_parent
from fedprior.runtime.workers import WorkerClients
from tests.support.cli import invoke, sigint_as_from_a_terminal
from tests.support.toy_data import toy_images

ROUNDS = 3
RUN = [
    "--set",
    "data.dataset=digits",
    "--set",
    "partition.scheme=iid",
    "--set",
    "federation.num_clients=4",
    "--set",
    "federation.fraction=0.5",
    "--set",
    f"federation.rounds={ROUNDS}",
    "--set",
    "federation.batch_size=16",
]
"""fedavg-cnn on digits, 2 clients a round (a round takes about a second here)."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run, asked for 1,000 workers (it gets 2: the clients of a round)."""
    root = tmp_path_factory.mktemp("reference")
    result = invoke("run", "fedavg-cnn", *RUN, "--set", "run.workers=1000", "--run-dir", root / "run", "--json", cache=root / "cache")
    assert result.exit_code == 0, result.stderr
    return {"summary": json.loads(result.stdout), "stderr": result.stderr, "cache": root / "cache"}


# ----------------------------------------------------------------------------- helpers


def launch(preset: str, args: list[str], run: Path, cache: Path) -> subprocess.Popen:
    """``fedprior run`` in a session of its own (a signal to its process group reaches no test process), Ctrl-C not ignored."""
    env = {**os.environ, "FEDPRIOR_CACHE": str(cache)}
    with open(run.parent / f"{run.name}.stderr", "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "fedprior", "run", preset, *args, "--run-dir", str(run)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=sigint_as_from_a_terminal,
        )


def metrics(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended (exit code {process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)


def children(process: subprocess.Popen) -> list[tuple[int, int | None]]:
    """The run's own processes besides its main one (its workers; with spawn also multiprocessing's resource tracker), with their start times."""
    return [(pid, start_time(pid)) for pid in process_tree(process.pid)[1:]]


def assert_all_gone(processes: list[tuple[int, int | None]], within: float = 120.0) -> None:
    """None of ``processes`` runs ``within`` seconds from now (a zombie counts as gone); leftovers are killed, then reported.

    ``within`` is generous (it returns as soon as they are gone): a loaded machine may take seconds to schedule a worker
    that noticed its parent's death (issue 56 item 7)."""

    def left() -> list[int]:
        return [pid for pid, started in processes if alive(pid) and start_time(pid) == started]

    deadline = time.monotonic() + within
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    leftovers = left()
    for pid in leftovers:  # never leak them, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"processes {leftovers} of the killed run still ran {within} s later"


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


# ----------------------------------------------------------------------------- kill -9, fork and spawn


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_kill_9_mid_round_leaves_no_worker_and_resume_gives_the_uninterrupted_numbers(reference, tmp_path, method):
    """The pre-issue-15 workers outlived a kill -9 of their run forever (fork: each held its pipe's other end open)."""
    run = tmp_path / "run"
    process = launch("fedavg-cnn", [*RUN, "--set", "run.workers=2", "--set", f"run.start_method={method}"], run, reference["cache"])
    wait_for(lambda: len(metrics(run)) >= 1, process, "a first round")
    workers = children(process)
    assert len(workers) >= 2 and all(alive(pid) for pid, _ in workers)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert len(metrics(run)) < ROUNDS, "the run must be killed mid-way"
    assert_all_gone(workers)
    if method == "spawn":  # a resume may change how workers start (spawning from this test process would take long)
        config = run / "config.toml"
        config.write_text(config.read_text().replace('start_method = "spawn"', 'start_method = "fork"'))
    resumed = invoke("resume", run, "--json", cache=reference["cache"])
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)["history"] == reference["summary"]["history"]
    assert [m["round"] for m in metrics(run)] == list(range(1, ROUNDS + 1))


# ----------------------------------------------------------------------------- Ctrl-C, SIGTERM to the process group


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_process_group_ends_the_workers_quietly_and_the_run_with_one_line(reference, tmp_path, signum):
    """What a terminal's Ctrl-C or a scheduler's stop does: each worker printed a 20-line traceback before issue 15."""
    run = tmp_path / "run"
    process = launch("fedavg-cnn", [*RUN, "--set", "run.workers=2"], run, reference["cache"])
    wait_for(lambda: len(metrics(run)) >= 1, process, "a first round")
    workers = children(process)
    assert len(workers) == 2
    os.killpg(process.pid, signum)
    assert process.wait(timeout=300) == 128 + signum  # the last checkpoint is written first: seconds, more on a loaded machine
    err = (tmp_path / "run.stderr").read_text()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "fedprior-worker" not in err and "Interrupted" not in err, err
    assert [line for line in err.splitlines() if "interrupted" in line] == [f"interrupted ({signal.Signals(signum).name}); resume with `fedprior resume {run}`"]
    assert_all_gone(workers)


# ----------------------------------------------------------------------------- server-side phases


@pytest.mark.slow
def test_kill_9_during_mfcls_server_phase_leaves_no_worker(session_cache, tmp_path):
    """Phase 2 trains the discriminator on the server alone; the phase-1 workers idle meanwhile (and outlived a kill -9)."""
    args = ["--set", "data.dataset=digits", "--set", "data.train_subset=400", "--set", 'partition.scenario=""', "--set", "partition.scheme=iid"]
    args += ["--set", "federation.num_clients=4", "--set", "federation.rounds=1", "--set", "algorithm.server_epochs=4", "--set", "run.workers=2"]
    run = tmp_path / "run"
    process = launch("mfcl", args, run, session_cache)
    wait_for(lambda: any(m["stage"] == "server" for m in metrics(run)), process, "a server epoch")
    workers = children(process)
    assert len(workers) == 2 and all(alive(pid) for pid, _ in workers)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert [m["stage"] for m in metrics(run)][-1] == "server" and len(metrics(run)) < 6  # killed in the server phase
    assert_all_gone(workers)


@pytest.mark.slow
def test_kill_9_during_fedbms_generator_training_leaves_no_worker(session_cache, tmp_path):
    """CGDE trains the generator in ``aggregate``, after the clients of round 1 (killed there: workers idle, the
    main process busy for over a second, before round 1 ends; the generator's 100 steps are most of a round)."""
    args = ["--set", "data.dataset=digits", "--set", "data.train_subset=400", "--set", "federation.num_clients=4", "--set", "federation.fraction=1.0"]
    args += ["--set", "federation.rounds=2", "--set", "algorithm.generator_every=1", "--set", "run.workers=2"]
    run = tmp_path / "run"
    process = launch("fedbm", args, run, session_cache)
    wait_for(lambda: len(children(process)) == 2, process, "the workers")
    workers = children(process)
    busy_server = {"since": None}

    def server_busy_for_a_second() -> bool:
        if state(process.pid) == "R" and all(state(pid) == "S" for pid, _ in workers):
            busy_server["since"] = busy_server["since"] or time.monotonic()
            return time.monotonic() - busy_server["since"] > 1.0
        busy_server["since"] = None
        return False

    wait_for(server_busy_for_a_second, process, "server-side training")
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert metrics(run) == [], "killed in round 1, after its clients"
    assert_all_gone(workers)


# ----------------------------------------------------------------------------- the mechanism itself


def toy() -> Algorithm:
    return Algorithm(
        name="toy",
        inputs=("x",),
        init=lambda info: {"v": torch.zeros(())},
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=lambda message, state, data, info: (Reply(dict(message.arrays), 1), {}),
        aggregate=lambda state, replies, info: state,
        evaluate=lambda state, data: {"accuracy": 0.5},
    )


def test_a_forked_worker_keeps_no_pipe_end_of_the_main_process():
    """Each worker sees the end of its pipe when the main process's end closes, without a 'stop' message:
    neither it nor a worker forked after it holds a copy of that end (so none waits forever after a kill -9)."""
    data = toy_images(8, seed=0)
    pool = WorkerClients(toy(), lambda c: data, 2, workers=2, start_method="fork")
    try:
        pool.prepare()
        for worker in pool.workers:
            worker.conn.close()
            worker.process.join(timeout=120)  # returns once it exits: generous for a loaded machine
            assert worker.process.exitcode == 0, "the worker did not see the end of its pipe"
    finally:
        for worker in pool.workers:
            if worker.process.is_alive():
                worker.process.kill()
        pool.workers = []


ORPHAN = textwrap.dedent(
    """
    import os, signal, sys, time
    from fedprior import orphans
    if sys.argv[1] == "watch":
        orphans._prctl = None  # as on a system without PR_SET_PDEATHSIG: the polling thread
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        orphans.stay_with_parent(parent, every=0.05)
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
    time.sleep(0.2)
    os.kill(parent, signal.SIGKILL)
    """
)


@pytest.mark.parametrize("how", ["prctl", "watch"])
def test_a_child_that_stays_with_its_parent_dies_with_it(how):
    parent = subprocess.run([sys.executable, "-c", ORPHAN, how], capture_output=True, text=True, timeout=300)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    child = int(parent.stdout.split()[0])
    assert_all_gone([(child, start_time(child))])


def test_a_child_whose_parent_died_before_prctl_exits_at_once():
    """The PR_SET_PDEATHSIG race: the expected parent is gone already (here: another PID), so the signal would never come."""
    child = os.fork()
    if child == 0:
        try:
            die_with_parent(os.getppid() + 1 if os.getppid() < 2**22 else 1)
        finally:
            os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 1


# ----------------------------------------------------------------------------- item 7b: how many workers


def test_workers_are_capped_at_the_clients_of_a_round_and_the_summary_says_so(reference):
    assert reference["summary"]["workers"] == 2
    assert "warning: run.workers = 1000: starting 2 worker processes, the most clients a round trains; more would idle" in reference["stderr"]


def test_the_cap_is_the_largest_stage_and_more_workers_than_cores_warn(monkeypatch):
    # MFCL samples 1 of 4 clients a round in its sensor stage, all 4 in its upload stage, none on the server
    name, config = load_config(
        "mfcl",
        [
            "data.dataset=digits",
            "data.train_subset=0",
            'partition.scenario=""',
            "partition.scheme=iid",
            "federation.num_clients=4",
            "federation.fraction=0.25",
            "run.workers=8",
        ],
    )
    monkeypatch.setattr("fedprior.experiments.workers_setup.available_cores", lambda: 3)
    with pytest.warns(UserWarning) as caught:
        experiment = build_experiment(name, config)
    assert experiment.workers == 4
    assert [str(w.message) for w in caught if str(w.message).startswith("run.workers")] == [
        "run.workers = 8: starting 4 worker processes, the most clients a round trains; more would idle",
        "run.workers = 8: 4 worker processes on 3 cores; they share the cores, which makes a round no faster, often slower, than with run.workers = 3 (the numbers are the same)",
    ]
