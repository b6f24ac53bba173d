"""fedprior run / resume / presets from the command line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cli import SMALL, fedprior, summary

KEYS = {"algorithm", "dataset", "rounds", "final_accuracy", "best_accuracy", "history", "wall_seconds", "run_dir"}


def test_presets_lists_every_shipped_preset():
    result = fedprior("presets")
    assert result.returncode == 0
    for name in ("fedavg-cnn", "fedprox-cnn", "scaffold-cnn", "fst-cbdg", "zero-shot", "linear-probe", "fedavg-linear", "fedntd-linear"):
        assert name in result.stdout


@pytest.mark.parametrize("preset", ["fedavg-cnn", "fedprox-cnn", "scaffold-cnn"])
def test_run_json_summary_and_run_directory(tmp_path, preset):
    result = fedprior("run", preset, *SMALL, "--run-dir", str(tmp_path / "run"), "--json", cache=tmp_path / "cache")
    out = summary(result)
    assert KEYS <= out.keys()
    assert out["algorithm"] == preset.split("-")[0] and out["dataset"] == "digits" and out["rounds"] == 3
    assert len(out["history"]) == 3 and all(0 <= a <= 1 for a in out["history"])
    assert out["best_accuracy"] >= out["final_accuracy"] > 0.3
    run = tmp_path / "run"
    for name in (
        "config.toml",
        "partition.npz",
        "partition.json",
        "partition.png",
        "metrics.jsonl",
        "checkpoint.safetensors",
        "result.json",
        "report.md",
        "accuracy.png",
    ):
        assert (run / name).is_file(), name
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["round"] for m in metrics] == [1, 2, 3]
    assert [m["accuracy"] for m in metrics] == out["history"]
    assert json.loads((run / "result.json").read_text())["final_accuracy"] == out["final_accuracy"]
    stats = json.loads((run / "partition.json").read_text())
    assert sum(stats["client_sizes"]) == 1438 and len(stats["client_sizes"]) == 6


def test_same_seed_same_numbers_different_seed_different(tmp_path):
    runs = [
        summary(fedprior("run", "fedavg-cnn", *SMALL, "--set", f"run.seed={seed}", "--json", "--run-dir", str(tmp_path / f"r{i}"), cache=tmp_path / "cache"))
        for i, seed in enumerate([1, 1, 2])
    ]
    assert runs[0]["history"] == runs[1]["history"]
    assert runs[0]["history"] != runs[2]["history"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "nope"], "unknown preset 'nope'; accepted:"),
        (["run", "fedavg-cnn", "--set", "federation.roundz=2"], "federation.roundz: unknown key; accepted: rounds"),
        (["run", "fedavg-cnn", "--set", "algorithm.lr=-1"], "algorithm.lr: input should be greater than 0"),
        (["run", "fedavg-cnn", "--set", "federation.num_clients=-4"], "federation.num_clients: input should be greater than or equal to 1"),
        (["run", "fedavg-cnn", "--set", "federation.fraction=1.5"], "federation.fraction: input should be less than or equal to 1"),
        (
            ["run", "fedavg-cnn", "--set", "data.dataset=digits", "--set", "federation.num_clients=5000"],
            "federation.num_clients: 5000 clients but only 1438 training samples",
        ),
        (["run", "fedavg-cnn", "--set", "data.dataset=nope"], "data.dataset: unknown dataset 'nope'"),
        (["run", "fedavg-cnn", "--set", "encoder.name=clip"], "encoder.name: unknown encoder 'clip'"),
        (["resume", "/nonexistent/run"], "is not a fedprior run directory"),
    ],
)
def test_bad_input_exits_with_one_clear_line(tmp_path, args, message):
    result = fedprior(*args, "--run-dir", str(tmp_path / "run"), cache=tmp_path) if args[0] == "run" else fedprior(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "run" / "checkpoint.safetensors").exists()  # nothing trained


@pytest.mark.slow
def test_resume_after_sigkill_mid_round_equals_uninterrupted(tmp_path):
    """Kill -9 a run in the middle of round 3, resume it, compare with a run that was never interrupted."""
    slow = [
        *SMALL,
        "--set",
        "federation.rounds=5",
        "--set",
        "federation.fraction=1.0",
        "--set",
        "federation.local_epochs=4",
        "--set",
        "federation.batch_size=8",
    ]
    reference = summary(fedprior("run", "fedavg-cnn", *slow, "--json", "--run-dir", str(tmp_path / "ref"), cache=tmp_path / "c"))
    run = tmp_path / "cut"
    env = {**os.environ, "FEDPRIOR_CACHE": str(tmp_path / "c")}
    process = subprocess.Popen(
        [sys.executable, "-m", "fedprior", "run", "fedavg-cnn", *slow, "--json", "--run-dir", str(run)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    metrics = run / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 2):
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before_kill = len(metrics.read_text().splitlines())
    assert 2 <= done_before_kill < 5, "the run must be killed mid-way"
    assert not (run / "result.json").exists()
    resumed = summary(fedprior("resume", str(run), "--json", cache=tmp_path / "c"))
    assert resumed["history"] == reference["history"]
    assert resumed["final_accuracy"] == reference["final_accuracy"]
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [m["round"] for m in lines] == [1, 2, 3, 4, 5]
