"""fedprior run / resume / presets from the command line."""

import json

import pytest
from typer.testing import CliRunner

from fedprior.cli import app
from tests.support.cli import SMALL, fedprior, summary

ONE_ROUND = ["--set", "federation.rounds=1", "--set", "federation.local_epochs=1"]
KEYS = {"algorithm", "dataset", "rounds", "final_accuracy", "best_accuracy", "history", "wall_seconds", "run_dir"}


def test_presets_lists_every_shipped_preset():
    result = fedprior("presets")
    assert result.returncode == 0
    for name in ("fedavg-cnn", "fedprox-cnn", "scaffold-cnn", "fst-cbdg", "zero-shot", "linear-probe", "fedavg-linear", "fedntd-linear"):
        assert name in result.stdout


@pytest.mark.parametrize("preset", ["fedavg-cnn"])  # fedprox-cnn and scaffold-cnn: the same command path; their round is tested in test_experiments
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
        summary(
            fedprior(
                "run", "fedavg-cnn", *SMALL, *ONE_ROUND, "--set", f"run.seed={seed}", "--json", "--run-dir", str(tmp_path / f"r{i}"), cache=tmp_path / "cache"
            )
        )
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
    """In process (the command's own code path, without a 5 s interpreter start per case); the first case also as a real process."""
    argv = [*args, "--run-dir", str(tmp_path / "run")] if args[0] == "run" else args
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "run" / "checkpoint.safetensors").exists()  # nothing trained


def test_bad_input_in_a_real_process_exits_2_with_one_line(tmp_path):
    result = fedprior("run", "nope", "--run-dir", str(tmp_path / "run"), cache=tmp_path)
    assert result.returncode == 2 and "unknown preset 'nope'; accepted:" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
