"""Failed client updates (a dead Flower node, a timeout) reach the summary, --json, the report and the console."""

from __future__ import annotations

import json

from fedprior.experiments.runner import client_failures
from fedprior.results.report import write_report
from fedprior.results.run_dir import RunDir
from fedprior.results.run_log import failure_warning

HISTORY = [
    {"step": 1, "round": 1, "clients": [0, 1, 2], "failed_clients": []},
    {"step": 2, "round": 2, "clients": [0, 1, 2], "failed_clients": [1]},
    {"step": 3, "round": 3, "clients": [0, 1, 2], "failed_clients": [1, 2]},
]


def summary(history):
    base = {
        "name": "x",
        "algorithm": "fedavg",
        "dataset": "digits",
        "encoder": "none",
        "partition": "iid",
        "num_clients": 3,
        "seed": 0,
        "rounds": 3,
        "initial_accuracy": 0.1,
        "final_accuracy": 0.5,
        "best_accuracy": 0.5,
        "history": [0.2, 0.4, 0.5],
        "wall_seconds": 1.0,
    }
    return {**base, **client_failures(history)}


def test_failed_updates_are_counted_per_round_and_warned_about(tmp_path, capsys):
    from fedprior.cli.run import report

    out = summary(HISTORY)
    assert out["failed_updates"] == 3 and out["failed_clients_per_round"] == {"2": 1, "3": 2}
    line = failure_warning(out)
    assert line.startswith("warning: 3 client updates failed") and "2 (1), 3 (2)" in line
    run = RunDir(tmp_path)
    write_report(run, out, {})
    assert line in run.report.read_text() and "| failed client updates | 3 |" in run.report.read_text()
    report(out, as_json=True)
    captured = capsys.readouterr()
    assert json.loads(captured.out)["failed_updates"] == 3 and "3 client updates failed" in captured.err
    clean = summary([{**r, "failed_clients": []} for r in HISTORY])
    assert clean["failed_updates"] == 0 and failure_warning(clean) == ""
    report(clean, as_json=True)
    assert "failed" not in capsys.readouterr().err
