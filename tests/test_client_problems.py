"""Failed and empty client updates reach the summary, the --json output and report.md (issue 7, item 2)."""

from __future__ import annotations

import json


from cli import TINY, invoke
from conftest import toy_images
from fedprior.algorithms.base import Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.experiments.client_problems import client_problems, problem_warnings, rounds_text
from fedprior.runtime.clients import InProcessClients
from fedprior.runtime.simulation import run_rounds


class FlakyClients(InProcessClients):
    """In-process clients where client 0 and 1 never answer (like a dead SuperNode hosting them)."""

    def update(self, message, info, step, clients, vectorize):
        replies, failures = super().update(message, info, step, clients, vectorize)
        lost = {r.client_id for r in replies if r.client_id in (0, 1)}
        return [r for r in replies if r.client_id not in lost], {**failures, **{c: "Node Unavailable" for c in lost}}


def test_counts_per_round_and_warning_lines():
    task = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
    algorithm = fedavg(task, local_epochs=1, batch_size=8, model="cnn", lr=0.1)
    data = [toy_images(16, seed=c) for c in range(4)]
    pool = FlakyClients(algorithm, lambda c: data[c], 4)
    result = run_rounds(algorithm, pool, toy_images(20, seed=9), seed=0, rounds=4, fraction=0.5)
    sampled = [r["clients"] for r in result.progress.history]
    failed = [len([c for c in s if c in (0, 1)]) for s in sampled]
    counts = client_problems(result.progress.history)
    assert counts["failed_per_round"] == failed and counts["failed_updates"] == sum(failed) > 0
    assert counts["client_updates"] == 8 and counts["empty_updates"] == 0
    assert counts["rounds_without_update"] == [i + 1 for i, s in enumerate(sampled) if set(s) <= {0, 1}]
    steps = [i + 1 for i, f in enumerate(failed) if f]
    assert problem_warnings(result.progress.history)[0].startswith(
        f"{sum(failed)} of 8 client updates failed (round{'s' * (len(steps) > 1)} {rounds_text(steps)})")


def test_rounds_text():
    assert rounds_text([2, 3, 4, 7, 9, 10]) == "2-4, 7, 9-10" and rounds_text([5]) == "5"


def test_a_clean_run_has_no_warnings():
    history = [{"step": 1, "clients": [0, 1], "failed_clients": []}]
    assert problem_warnings(history) == [] and client_problems(history)["failed_updates"] == 0


def test_cli_summary_and_report_show_failed_clients(tmp_path, monkeypatch):
    monkeypatch.setattr("fedprior.runtime.simulation.InProcessClients", FlakyClients)
    run = tmp_path / "run"
    result = invoke("run", "fedavg-cnn", *TINY, "--set", "federation.fraction=1.0", "--run-dir", run, "--json")
    assert result.exit_code == 0, result.stderr
    warning = "warning: 4 of 8 client updates failed (rounds 1-2) and were left out of the aggregation"
    assert warning in result.stderr  # printed with or without --json
    summary = json.loads(result.stdout)
    assert summary["failed_per_round"] == [2, 2] and summary["failed_updates"] == 4
    assert summary["warnings"][0].startswith(warning.removeprefix("warning: "))
    report = (run / "report.md").read_text()
    assert "## Failed and empty clients" in report and "| 1 | 4 | 2 | 0 | yes |" in report


def test_empty_clients_are_counted(tmp_path):
    result = invoke("run", "fedavg-cnn", *TINY, "--set", "partition.scheme=dirichlet", "--set", "partition.alpha=0.001",
                    "--set", "federation.num_clients=12", "--set", "federation.fraction=1.0", "--set", "federation.rounds=1",
                    "--run-dir", tmp_path / "run", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    sizes = json.loads((tmp_path / "run" / "partition.json").read_text())["client_sizes"]
    assert summary["empty_updates"] == sum(1 for s in sizes if s == 0) > 0
    assert "sampled clients held no data and trained nothing (round 1)" in result.stderr
