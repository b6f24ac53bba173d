"""A privacy budget (privacy.max_epsilon): the run stops before the round whose release would exceed it, says so in the
checkpoint, metrics.jsonl, run.log, report.md and its summary, and its resume does not step past it; --dry-run tells the
rounds it allows."""

from __future__ import annotations

import json

import pytest

from fedprior.experiments.config import load_config
from fedprior.privacy.config import accounting
from tests.support.cli import invoke

TINY = ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=4", "run.threads=1", "run.workers=1"]


@pytest.mark.slow
def test_a_privacy_budget_stops_the_run_before_the_round_that_would_exceed_it_and_its_resume_stays_there(tmp_path, shared_cache):
    from fedprior.experiments.runner import resume, start
    from fedprior.runtime.checkpoint import load_checkpoint

    args = [*TINY, "privacy.dp=server", "federation.fraction=0.5", "federation.rounds=5"]
    _, probe = load_config("fedavg-cnn", args)
    acc = accounting(probe.privacy, "poisson", 6, 0.5)
    budget = (acc.epsilon(2) + acc.epsilon(3)) / 2  # two rounds fit, the third would exceed it
    name, config = load_config("fedavg-cnn", [*args, f"privacy.max_epsilon={budget}"])
    # --dry-run: the epsilon of the planned rounds and the rounds the budget allows
    shown = invoke("run", "fedavg-cnn", *[a for o in [*args, f"privacy.max_epsilon={budget}"] for a in ("--set", o)], "--dry-run")
    assert shown.exit_code == 0, shown.output
    line = next(x for x in shown.stdout.splitlines() if x.startswith("# privacy:"))
    assert f"epsilon {acc.epsilon(5):.4g} at delta 1e-05 after the 5 planned rounds (pld, add-or-remove, poisson q = 0.5)" in line
    assert f"allows 2 of them (epsilon {acc.epsilon(2):.4g}); the run stops before round 3" in line
    summary = start(name, config, tmp_path / "run", report_extras=False)
    assert summary["rounds"] == 2 and summary["dp_epsilon"] == acc.epsilon(2) <= budget
    stop = summary["stopped"]
    assert (stop["round"], stop["stopped_by"], stop["dp_epsilon"], stop["dp_epsilon_next"]) == (3, "privacy.max_epsilon", acc.epsilon(2), acc.epsilon(3))
    assert stop["dp_epsilon_next"] > budget
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["trained"] is False and last["stopped_by"] == "privacy.max_epsilon" and last["round"] == 3
    assert "stopped by the privacy budget before federated round 3" in (tmp_path / "run" / "report.md").read_text()
    assert "privacy budget: stopped before this round" in (tmp_path / "run" / "run.log").read_text()
    checkpoint = load_checkpoint(tmp_path / "run" / "checkpoint.safetensors")
    assert json.loads(checkpoint.metadata["stopped"])["round"] == 3 and len(checkpoint.progress.history) == 2
    said = []
    again = resume(tmp_path / "run", config=config, report_extras=False, on_finished=said.append)
    assert again == summary and "stopped by its privacy budget before federated round 3" in said[0]
    assert len(load_checkpoint(tmp_path / "run" / "checkpoint.safetensors").progress.history) == 2
    # with result.json gone (a run killed after its checkpoint), the resume asks the budget again and stops at the same round
    (tmp_path / "run" / "result.json").unlink()
    redone = resume(tmp_path / "run", config=config, report_extras=False)
    assert redone["rounds"] == 2 and redone["stopped"]["round"] == 3 and redone["history"] == summary["history"]
