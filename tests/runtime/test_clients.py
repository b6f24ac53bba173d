"""Failed and empty client updates reach the summary, the --json output and report.md (issue 7, item 2).

tests/results/test_report_failures.py covers the failed-update line on hand-made records; these run the
round loop with a pool that loses clients, and empty clients from a real partition.
"""

from __future__ import annotations

import json

import torch

from fedprior.algorithms.base import Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.experiments.runner import client_failures
from fedprior.results.run_log import summary_warnings
from fedprior.runtime.clients import InProcessClients
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import run_rounds
from tests.support.cli import TINY, invoke


class FlakyClients(InProcessClients):
    """In-process clients where clients 0 and 1 never answer (like a dead SuperNode hosting them)."""

    def update(self, message, info, step, clients, vectorize):
        replies, failures = super().update(message, info, step, clients, vectorize)
        lost = {r.client_id for r in replies if r.client_id in (0, 1)}
        return [r for r in replies if r.client_id not in lost], {**failures, **{c: "Node Unavailable" for c in lost}}


def features(n: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(n, 6, generator=g), "y": torch.randint(0, 3, (n,), generator=g)}


def test_counts_per_round_from_the_round_loop():
    task = Task(num_classes=3, input_shape=(6,), class_names=("a", "b", "c"), num_clients=4)
    algorithm = fedavg(task, Runtime(1, 8), model="linear", lr=0.1)
    data = [features(16, seed=c) for c in range(4)]
    pool = FlakyClients(algorithm, lambda c: data[c], 4)
    result = run_rounds(algorithm, pool, features(20, seed=9), RoundLoop(seed=0, rounds=6, fraction=0.75))
    lost = {str(r["step"]): len({0, 1} & set(r["clients"])) for r in result.progress.history}
    counts = client_failures(result.progress.history)
    assert counts["failed_clients_per_round"] == {step: n for step, n in lost.items() if n}
    assert counts["failed_updates"] == sum(lost.values()) > 0 and counts["client_updates"] == 18
    assert counts["empty_updates"] == 0 and counts["rounds_without_update"] == []
    assert summary_warnings(counts)[0].startswith(f"warning: {sum(lost.values())} client updates failed, in rounds ")


def test_a_clean_run_has_no_warnings():
    counts = client_failures([{"step": 1, "clients": [0, 1], "failed_clients": []}])
    assert summary_warnings(counts) == [] and counts["failed_updates"] == counts["empty_updates"] == 0


def test_cli_summary_and_report_show_failed_clients(tmp_path, monkeypatch):
    monkeypatch.setattr("fedprior.runtime.simulation.InProcessClients", FlakyClients)
    run = tmp_path / "run"
    result = invoke("run", "fedavg-cnn", *TINY, "--set", "federation.fraction=1.0", "--run-dir", run, "--json")
    assert result.exit_code == 0, result.stderr
    assert "warning: 4 client updates failed, in rounds 1 (2), 2 (2)" in result.stderr  # printed with --json too
    summary = json.loads(result.stdout)
    assert summary["failed_clients_per_round"] == {"1": 2, "2": 2} and summary["failed_updates"] == 4
    assert summary["client_updates"] == 8
    report = (run / "report.md").read_text()
    assert "## Failed and empty clients" in report and "| 1 | 2 | 0 |" in report and "| failed client updates | 4 |" in report


def test_empty_clients_are_counted_and_warned_about(tmp_path):
    result = invoke(
        "run",
        "fedavg-cnn",
        *TINY,
        "--set",
        "partition.scheme=dirichlet",
        "--set",
        "partition.alpha=0.001",
        "--set",
        "federation.num_clients=12",
        "--set",
        "federation.fraction=1.0",
        "--set",
        "federation.rounds=1",
        "--run-dir",
        tmp_path / "run",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    sizes = json.loads((tmp_path / "run" / "partition.json").read_text())["client_sizes"]
    empty = sum(1 for s in sizes if s == 0)
    assert summary["empty_updates"] == empty > 0 and summary["empty_clients_per_round"] == {"1": empty}
    assert f"warning: {empty} of 12 sampled clients held no data and trained nothing, in rounds 1 ({empty})" in result.stderr
    assert f"| clients without data | {empty} |" in (tmp_path / "run" / "report.md").read_text()
