"""``fedprior flower local``: a SuperLink and SuperNodes as real processes on loopback, with TLS or --insecure.

Every process a test starts is stopped by the code under test; each test checks
that none is left (no process whose command line or environment names the test's
folder: every Flower process has its FLWR_HOME there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("flwr")

from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.experiments.runner import start  # noqa: E402
from fedprior.flower.processes import command_line  # noqa: E402
from fedprior.runtime.checkpoint import load_checkpoint  # noqa: E402
from tests.support.cli import (  # noqa: E402
    fedprior,
    sigint_as_from_a_terminal,  # noqa: E402
    summary,
)

pytestmark = pytest.mark.slow

DIGITS = ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=2", "federation.fraction=0.5"]


@pytest.fixture(autouse=True)
def flower_env(monkeypatch, tmp_path):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)
    yield
    for pid in processes_naming(str(tmp_path)):  # a failed test's leftovers (this test's own processes only)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def processes_naming(text: str) -> list[int]:
    """Live processes (not this one) whose command line or environment contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes() + Path(f"/proc/{entry}/environ").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text.encode() in command and state != "Z" and int(entry) != os.getpid():
                found.append(int(entry))
    return found


def none_left_within(text: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while processes_naming(text) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_naming(text) == []


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.federation_processes
def test_flower_local_with_tls_runs_the_experiment_and_stops_every_process(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    reference = start(*load_config("fedavg-cnn", DIGITS), tmp_path / "ref")
    sets = [arg for item in DIGITS for arg in ("--set", item)]
    # a relative run directory, as a user would give it: the processes started must still find their files
    result = fedprior(
        "flower", "local", "--nodes", "3", "fedavg-cnn", *sets, "--tls", "--json", "--run-dir", "run", cache=tmp_path / "cache", timeout=400, cwd=tmp_path
    )
    out = summary(result)
    assert out["runtime"] == "flower-local" and out.keys() == reference.keys()
    assert out["history"] == reference["history"] and abs(out["final_accuracy"] - reference["final_accuracy"]) <= 1e-4
    log = (tmp_path / "run" / "flower" / "logs" / "superlink.log").read_text()
    assert "--insecure" not in log and "TLS disabled" not in log
    assert all(r["failed_clients"] == [] for r in records(tmp_path / "run"))
    assert not (tmp_path / "run" / "flower" / "nodes").exists()  # node folders (and certificates) removed at the end
    assert processes_naming(str(tmp_path)) == []


@pytest.mark.federation_processes
def test_killing_one_supernode_of_three_mid_round_does_not_end_the_run(tmp_path, monkeypatch):
    """--insecure; every client trains every round; node 1 (clients 1 and 4) is SIGKILLed while it trains in round 2.

    The round then waits for its replies until the round timeout (the SuperLink itself
    notices a dead node only after two missed heartbeats, about a minute), fails
    clients 1 and 4, and aggregates the other four.
    """
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    name, config = load_config(
        "fedavg-cnn", ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=2", "federation.fraction=1.0", "run.runtime='flower-local'"]
    )
    killed = threading.Event()
    federation_box = {}
    round_one_done = threading.Event()

    def killer():
        round_one_done.wait(300)
        federation = federation_box["federation"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until node 1 runs its ClientApp for round 2, then kill it
            if any(
                "flwr-clientapp" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
                for p in federation.node_tree(1)[1:]
                if Path(f"/proc/{p}").exists()
            ):
                break
            time.sleep(0.05)
        federation.kill_node(1)
        killed.set()

    def on_started(federation):
        federation_box["federation"] = federation
        threading.Thread(target=killer, daemon=True).start()

    def on_round(record):
        if record.get("round") == 1:
            round_one_done.set()

    out = start(
        name,
        config,
        tmp_path / "run",
        report_extras=False,
        on_round=on_round,
        runtime_options={"nodes": 3, "tls": False, "round_timeout": 45.0, "on_started": on_started},
    )
    assert killed.is_set()
    assert out["runtime"] == "flower-local" and out["rounds"] == 2 and len(out["history"]) == 2
    first, second = records(tmp_path / "run")
    assert first["failed_clients"] == [] and first["clients"] == second["clients"] == [0, 1, 2, 3, 4, 5]
    assert second["failed_clients"] == [1, 4]  # node 1 hosts clients 1 and 4
    assert set(second["failures"]) == {"1", "4"} and all(isinstance(v, str) and v for v in second["failures"].values())
    assert "aggregated" not in second  # the four others were aggregated
    assert out["failed_updates"] == 2 and out["failed_clients_per_round"] == {"2": 2}  # said in the summary (and --json)
    assert "warning: 2 client updates failed, in rounds 2 (2)" in (tmp_path / "run" / "report.md").read_text()
    assert "TLS disabled" in (tmp_path / "run" / "flower" / "logs" / "superlink.log").read_text()  # --insecure
    assert processes_naming(str(tmp_path)) == []  # the killed node's superexec and ClientApps too, when start returns


# -- interruptions of the command --------------------------------------------------------------

LEARNING = [*DIGITS[:2], "federation.rounds=3", "federation.fraction=0.5", "algorithm.lr=0.1", "federation.local_epochs=2", "federation.batch_size=16"]


def launch(tmp_path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "FEDPRIOR_CACHE": str(tmp_path / "cache")}
    return subprocess.Popen(
        [sys.executable, "-m", "fedprior", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        preexec_fn=sigint_as_from_a_terminal,
    )


def wait_for_rounds(run: Path, process: subprocess.Popen, rounds: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if (run / "metrics.jsonl").is_file() and len(records(run)) >= rounds:
            return
        time.sleep(0.2)
    raise AssertionError(f"round {rounds} did not land; stderr: {process.communicate()[1][-2000:]}")


def trained_rounds(run: Path) -> list[int]:
    """The checkpoint's rounds; each must have trained (no round with every client failed)."""
    history = load_checkpoint(run / "checkpoint.safetensors").progress.history
    assert all(r["failed_clients"] == [] and r.get("aggregated", True) for r in history), history
    return [r["round"] for r in history]


@pytest.mark.federation_processes
def test_sigint_then_sigterm_stop_flower_local_resumably_and_the_resumed_run_ends_as_an_uninterrupted_one(tmp_path):
    """Ctrl-C after round 1, SIGTERM after round 2 of the resumed run, then a resume to the end.

    Each stop ends the server before the nodes (else the ServerApp runs the remaining
    rounds with no node and checkpoints them as a finished run), exits 130 / 143 with
    a line saying how to resume, and leaves no process.
    """
    reference = start(*load_config("fedavg-cnn", LEARNING), tmp_path / "ref", report_extras=False)
    run = tmp_path / "run"
    sets = [arg for item in LEARNING for arg in ("--set", item)]
    for rounds, signum, command in (
        (1, signal.SIGINT, ["flower", "local", "--nodes", "1", "fedavg-cnn", *sets, "--run-dir", str(run)]),
        (2, signal.SIGTERM, ["resume", str(run)]),
    ):
        process = launch(tmp_path, *command, "--json")
        wait_for_rounds(run, process, rounds)
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
        assert process.returncode == 128 + signum, err
        assert f"interrupted ({signal.Signals(signum).name}); resume with `fedprior resume {run}`" in err
        assert "Traceback" not in err
        assert none_left_within(str(tmp_path), 5.0)
        assert trained_rounds(run)[:rounds] == list(range(1, rounds + 1)) and len(trained_rounds(run)) < 3
    resumed = summary(fedprior("resume", str(run), "--json", cache=tmp_path / "cache", timeout=400, cwd=tmp_path))
    assert resumed["history"] == reference["history"] and resumed["failed_updates"] == 0
    assert trained_rounds(run) == [1, 2, 3]
    assert processes_naming(str(tmp_path)) == []


def test_kill_9_of_flower_local_takes_every_process_of_the_federation_with_it(tmp_path):
    """SIGKILL of the command while a ClientApp trains: within a few seconds no process of the federation is left."""
    run = tmp_path / "run"
    sets = [arg for item in LEARNING for arg in ("--set", item)]
    process = launch(tmp_path, "flower", "local", "--nodes", "2", "fedavg-cnn", *sets, "--run-dir", str(run))
    deadline = time.monotonic() + 300
    while not any("flwr-clientapp" in command_line(p) for p in processes_naming(str(tmp_path))):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1][-2000:]
        time.sleep(0.1)
    process.kill()
    process.communicate()
    assert none_left_within(str(tmp_path), 5.0)
    checkpoint = run / "checkpoint.safetensors"
    stamp = checkpoint.stat().st_mtime_ns if checkpoint.exists() else None
    time.sleep(2.0)
    assert (checkpoint.stat().st_mtime_ns if checkpoint.exists() else None) == stamp  # nothing trains on into the run
    listed = json.loads((run / "flower" / "processes.json").read_text())  # what the next run on the folder checks
    assert listed["parent"]["pid"] == process.pid and len(listed["processes"]) >= 3  # SuperLink, 2 SuperNodes, ...


# -- SecAgg+ and SuperNode authentication ---------------------------------------------------------

SECURE = ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=1", "federation.fraction=1.0"]


def assert_within_secagg_bound(secure_run: Path, plain_run: Path, nodes: int, total_examples: int) -> float:
    """Each coordinate of the SecAgg+ run's model within the quantization bound (+ float32 rounding) of the plain run's; returns the largest gap."""
    from fedprior.flower.secagg import SecAggOptions, quantization_bound

    bound = quantization_bound(SecAggOptions(max_weight=float(total_examples)), nodes, total_examples)
    secure, plain = (load_checkpoint(d / "checkpoint.safetensors").server for d in (secure_run, plain_run))
    largest = 0.0
    for name, value in plain.items():
        gap = (secure[name].double() - value.double()).abs()
        assert bool((gap <= bound + 2 * torch.finfo(value.dtype).eps * value.double().abs()).all()), name
        largest = max(largest, float(gap.max()))
    return largest


@pytest.mark.federation_processes
def test_flower_local_under_secagg_gives_the_plain_aggregate_within_the_quantization_bound(tmp_path, monkeypatch):
    """3 SuperNodes (clients c mod 3), every client sampled: one SecAgg+ round sums the 3 nodes' masked vectors."""
    from fedprior.experiments.build import build_experiment
    from fedprior.flower.secagg import SecAggOptions

    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    reference = start(*load_config("fedavg-cnn", SECURE), tmp_path / "ref", report_extras=False)
    name, config = load_config("fedavg-cnn", [*SECURE, "run.runtime='flower-local'"])
    out = start(name, config, tmp_path / "run", report_extras=False, runtime_options={"nodes": 3, "tls": False, "secagg": SecAggOptions()})
    (record,) = records(tmp_path / "run")
    assert record["failed_clients"] == [] and record["clients"] == [0, 1, 2, 3, 4, 5]
    assert record["upload_bytes_by_client"].keys() == {"-1"}  # the server received one aggregate, no client's model
    experiment = build_experiment(name, config)
    total = sum(experiment.client_size(c) for c in range(6))
    assert assert_within_secagg_bound(tmp_path / "run", tmp_path / "ref", 3, total) > 0
    assert abs(out["final_accuracy"] - reference["final_accuracy"]) <= 1 / len(experiment.test["y"])
    assert processes_naming(str(tmp_path)) == []


@pytest.mark.federation_processes
def test_flower_local_under_secagg_with_client_side_dp_gives_the_in_process_run_within_the_sum_s_bound(tmp_path, monkeypatch):
    """Distributed DP on 3 SuperNode processes: each node sends the sum of its 2 clients' clipped updates and bits, SecAgg+ sums
    them, the server adds the round's noise; the in-process run's model within SecAgg+'s quantization of the sum over m = 6."""
    from fedprior.flower.secagg import SecAggOptions, sum_quantization_bound

    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    dp = [*SECURE, "privacy.dp=client", "privacy.clipping=adaptive", "privacy.noise_multiplier=0.5", "privacy.count_stddev=1.0"]
    start(*load_config("fedavg-cnn", dp), tmp_path / "ref", report_extras=False)
    name, config = load_config("fedavg-cnn", [*dp, "run.runtime='flower-local'"])
    start(name, config, tmp_path / "run", report_extras=False, runtime_options={"nodes": 3, "tls": False, "secagg": SecAggOptions()})
    (record,) = records(tmp_path / "run")
    (reference,) = records(tmp_path / "ref")
    assert record["failed_clients"] == [] and record["upload_bytes_by_client"].keys() == {"-1"} and record["dp_checked_replies"] == 0
    for key in ("dp_clip_norm", "dp_noise_std", "dp_unclipped_fraction", "dp_epsilon"):
        assert record[key] == reference[key], key
    bound = sum_quantization_bound(SecAggOptions(), 3) / 6
    secure, plain = (load_checkpoint(d / "checkpoint.safetensors").server for d in (tmp_path / "run", tmp_path / "ref"))
    for key, value in plain.items():
        if not key.startswith("privacy.") and value.is_floating_point():
            gap = (secure[key].double() - value.double()).abs()
            assert bool((gap <= bound + 2 * torch.finfo(value.dtype).eps * value.double().abs()).all()), key
    assert torch.equal(secure["privacy.clip_norm"], plain["privacy.clip_norm"])
    assert processes_naming(str(tmp_path)) == []


@pytest.mark.federation_processes
def test_with_auth_the_registered_supernodes_train_and_a_node_without_a_registered_key_is_refused(tmp_path, monkeypatch):
    """--tls --auth, 2 registered nodes; once they run, a node with a key the SuperLink does not know and a node with no key try to join."""
    from fedprior.flower.local import Supernode, free_port

    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    intruders: dict[str, Supernode] = {}

    def on_started(federation):
        for index, (label, key) in enumerate((("unregistered", federation.node_key("intruder").private), ("keyless", None)), start=len(federation.nodes)):
            node = Supernode(index, federation.nodes[0].data_dir, free_port(), federation.logs / f"{label}.log", key=key)
            federation.nodes.append(node)
            federation.start_node(index)
            intruders[label] = node

    name, config = load_config("fedavg-cnn", [*SECURE, "federation.rounds=2", "run.runtime='flower-local'"])
    reference = start(*load_config("fedavg-cnn", [*SECURE, "federation.rounds=2"]), tmp_path / "ref", report_extras=False)
    exits: dict[str, int | None] = {}

    def on_round(record):  # by the last round the intruders must have given up by themselves (not been stopped with the federation)
        deadline = time.monotonic() + 60
        while record.get("round") == 2 and time.monotonic() < deadline and any(n.process is None or n.process.poll() is None for n in intruders.values()):
            time.sleep(0.2)
        exits.update({label: n.process.poll() if n.process else None for label, n in intruders.items()})

    options = {"nodes": 2, "tls": True, "auth": True, "on_started": on_started}
    out = start(name, config, tmp_path / "run", report_extras=False, on_round=on_round, runtime_options=options)
    assert out["history"] == reference["history"] and all(r["failed_clients"] == [] for r in records(tmp_path / "run"))
    logs = tmp_path / "run" / "flower" / "logs"
    assert "[code: 2004] Failed to activate SuperNode" in (logs / "unregistered.log").read_text()
    assert "SuperNode authentication is enabled. All SuperNodes must be registered" in (logs / "keyless.log").read_text()
    assert "No SuperNode found with the given public key" in (logs / "superlink.log").read_text()
    assert exits.keys() == {"unregistered", "keyless"} and all(code not in (None, 0) for code in exits.values()), exits  # refused, they exited
    assert processes_naming(str(tmp_path)) == []
