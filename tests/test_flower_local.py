"""``fedprior flower local``: a SuperLink and SuperNodes as real processes on loopback, with TLS or --insecure.

Every process a test starts is stopped by the code under test; each test checks
that none is left (no process whose command line names the test's folder).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from cli import fedprior, summary  # noqa: E402
from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.experiments.runner import start  # noqa: E402

pytestmark = pytest.mark.slow

DIGITS = ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=2", "federation.fraction=0.5"]


@pytest.fixture(autouse=True)
def flower_env(monkeypatch):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)


def processes_naming(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text in command and state != "Z" and int(entry) != os.getpid():
                found.append(int(entry))
    return found


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_flower_local_with_tls_runs_the_experiment_and_stops_every_process(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    reference = start(*load_config("fedavg-cnn", DIGITS), tmp_path / "ref")
    sets = [arg for item in DIGITS for arg in ("--set", item)]
    # a relative run directory, as a user would give it: the processes started must still find their files
    result = fedprior("flower", "local", "--nodes", "3", "fedavg-cnn", *sets, "--tls", "--json",
                      "--run-dir", "run", cache=tmp_path / "cache", timeout=400, cwd=tmp_path)
    out = summary(result)
    assert out["runtime"] == "flower-local" and out.keys() == reference.keys()
    assert out["history"] == reference["history"] and abs(out["final_accuracy"] - reference["final_accuracy"]) <= 1e-4
    log = (tmp_path / "run" / "flower" / "logs" / "superlink.log").read_text()
    assert "--insecure" not in log and "TLS disabled" not in log
    assert all(r["failed_clients"] == [] for r in records(tmp_path / "run"))
    assert not (tmp_path / "run" / "flower" / "nodes").exists()  # node folders (and certificates) removed at the end
    assert processes_naming(str(tmp_path)) == []


def test_killing_one_supernode_of_three_mid_round_does_not_end_the_run(tmp_path, monkeypatch):
    """--insecure; every client trains every round; node 1 (clients 1 and 4) is SIGKILLed while it trains in round 2.

    The round then waits for its replies until the round timeout (the SuperLink itself
    notices a dead node only after two missed heartbeats, about a minute), fails
    clients 1 and 4, and aggregates the other four.
    """
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=2",
                                              "federation.fraction=1.0", "run.runtime='flower-local'"])
    killed = threading.Event()
    federation_box = {}
    round_one_done = threading.Event()

    def killer():
        round_one_done.wait(300)
        federation = federation_box["federation"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until node 1 runs its ClientApp for round 2, then kill it
            if any("flwr-clientapp" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
                   for p in federation.node_tree(1)[1:] if Path(f"/proc/{p}").exists()):
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

    out = start(name, config, tmp_path / "run", report_extras=False, on_round=on_round,
                runtime_options={"nodes": 3, "tls": False, "round_timeout": 45.0, "on_started": on_started})
    assert killed.is_set()
    assert out["runtime"] == "flower-local" and out["rounds"] == 2 and len(out["history"]) == 2
    first, second = records(tmp_path / "run")
    assert first["failed_clients"] == [] and first["clients"] == second["clients"] == [0, 1, 2, 3, 4, 5]
    assert second["failed_clients"] == [1, 4]  # node 1 hosts clients 1 and 4
    assert set(second["failures"]) == {"1", "4"} and all(isinstance(v, str) and v for v in second["failures"].values())
    assert "aggregated" not in second  # the four others were aggregated
    assert "TLS disabled" in (tmp_path / "run" / "flower" / "logs" / "superlink.log").read_text()  # --insecure
    assert processes_naming(str(tmp_path)) == []
