"""Client-level DP runs: Poisson sampling's rounds without clients still release under DP (and keep the state without),
the noise's denominator is the expected qN, and a privacy budget stops the run before the round that would exceed it;
its resume does not step past it."""

from __future__ import annotations

import json

import pytest
import torch

from fedprior.algorithms.base import Reply, RoundInfo
from fedprior.algorithms.pieces.differential_privacy import NOISE_STD, RELEASES, ClientLevelDp, with_client_level_dp
from fedprior.experiments.config import load_config
from fedprior.privacy.config import accounting
from fedprior.runtime.sampling import Draw, Poisson
from tests.algorithms.pieces.test_differential_privacy import mean_algorithm
from tests.support.cli import error_line, invoke

INFO = RoundInfo(seed=3, stage="federated", round=1)
# 6 clients, each joining with probability 0.2: (0.8)^6 = 26% of rounds sample nobody
TINY = ["data.dataset=digits", "federation.num_clients=6", "federation.fraction=0.2", "federation.rounds=4", "run.threads=1", "run.workers=1"]


def empty_rounds(seed: int, rounds: int, q: float = 0.2) -> list[int]:
    return [r for r in range(1, rounds + 1) if not Poisson().select(Draw(seed, "federated", r, 6, 1, fraction=q))]


def test_a_dp_round_without_replies_releases_pure_noise_over_the_expected_count():
    x = {"w": torch.zeros(50_000)}
    dp = ClientLevelDp("server", 2.0, 0.5, 2.5)  # Poisson: qN = 2.5 expected clients, not rounded
    algorithm = with_client_level_dp(mean_algorithm().with_(init=lambda info: dict(x)), dp)
    assert algorithm.aggregates_no_reply and not mean_algorithm().aggregates_no_reply
    out = algorithm.aggregate(algorithm.init(INFO), [], INFO)
    assert float(out[NOISE_STD]) == 2.0 * 0.5 / 2.5 and int(out[RELEASES]) == 1  # a release like any other
    assert out["w"].std().item() == pytest.approx(0.4, rel=0.02) and out["w"].mean().abs().item() < 0.01
    one = algorithm.aggregate(algorithm.init(INFO), [Reply({"w": torch.full((50_000,), 0.001)}, 3, client_id=4)], INFO)
    torch.testing.assert_close(one["w"] - out["w"], torch.full((50_000,), 0.001 / 2.5))  # the same noise; the sum over qN


def test_adaptive_clipping_releases_the_centred_count():
    x = {"w": torch.zeros(4)}
    dp = ClientLevelDp("server", 0.5, 1.0, 2.5, adaptive=True, target_quantile=0.5, clip_lr=0.2, count_stddev=1.0)
    algorithm = with_client_level_dp(mean_algorithm().with_(init=lambda info: dict(x)), dp)
    replies = [Reply({"w": torch.full((4,), 0.1)}, 1, client_id=0), Reply({"w": torch.full((4,), 0.1)}, 1, client_id=1)]  # both unclipped
    out = algorithm.aggregate(algorithm.init(INFO), replies, INFO)
    noise = torch.randn((), generator=INFO.generator("privacy", "count"), dtype=torch.float64).item()
    b = (2 - 2 / 2 + noise) / 2.5 + 0.5  # sum_k (b_k - 1/2) + N(0, sigma_b^2), over qN, + 1/2 (Andrew et al. 2021, Theorem 1)
    assert algorithm.round_metrics is not None and algorithm.round_metrics(out)["dp_unclipped_fraction"] == pytest.approx(b, rel=1e-12)
    assert b != pytest.approx((2 + noise) / 2.5)  # the plain count would read otherwise where the count is not the denominator


@pytest.mark.slow
def test_rounds_without_clients_release_under_dp_and_keep_the_state_without(tmp_path, shared_cache):
    from fedprior.experiments.runner import resume, start

    seed = next(s for s in range(50) if empty_rounds(s, 4) and len(empty_rounds(s, 4)) < 4)
    empty = empty_rounds(seed, 4)
    name, config = load_config("fedavg-cnn", [*TINY, f"run.seed={seed}", "privacy.dp=server", "privacy.noise_multiplier=0.3"])
    assert config.federation.sampler == "poisson"
    run = start(name, config, tmp_path / "dp", report_extras=False)
    records = [json.loads(line) for line in (tmp_path / "dp" / "metrics.jsonl").read_text().splitlines() if '"step"' in line]
    assert len(run["dp_epsilon_per_round"]) == 4 and run["dp_epsilon_per_round"] == sorted(set(run["dp_epsilon_per_round"]))  # 4 releases
    for r in records:
        assert (r["clients"] == []) == (r["round"] in empty)
        assert r["dp_noise_std"] == pytest.approx(0.3 * 1.0 / 1.2) and r["dp_bound"] == "pld, add-or-remove, poisson q = 0.2"
    assert all("noised mean of no updates was released" in r["note"] for r in records if r["round"] in empty)
    acc = accounting(config.privacy, "poisson", 6, 0.2)
    assert run["dp_epsilon"] == acc.epsilon(4) and run["dp_accounting"]["relation"] == "add-or-remove"
    assert "PLD accountant, add-or-remove neighbours, poisson sampling q = 0.2" in (tmp_path / "dp" / "report.md").read_text()
    # resumed after round 1: the same numbers
    name, first = load_config("fedavg-cnn", [*TINY, f"run.seed={seed}", "privacy.dp=server", "privacy.noise_multiplier=0.3", "federation.rounds=1"])
    start(name, first, tmp_path / "again", report_extras=False)
    resumed = resume(tmp_path / "again", config=config, report_extras=False)
    assert resumed["history"] == run["history"] and resumed["dp_epsilon_per_round"] == run["dp_epsilon_per_round"]
    # two worker processes (q = 0.34: m = 2, so two workers start): the numbers of one process; a round without clients asks no worker
    wide = next(s for s in range(50) if empty_rounds(s, 4, 0.34))
    both = [*TINY, f"run.seed={wide}", "federation.fraction=0.34", "privacy.dp=server", "privacy.noise_multiplier=0.3"]
    one = start(*load_config("fedavg-cnn", both), tmp_path / "one", report_extras=False)
    two = start(*load_config("fedavg-cnn", [*both, "run.workers=2"]), tmp_path / "two", report_extras=False)
    assert two["history"] == one["history"] and two["dp_epsilon_per_round"] == one["dp_epsilon_per_round"]
    assert [] in [json.loads(line).get("clients") for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    # without DP the same sampler keeps the state in a round that sampled nobody
    name, plain = load_config("fedavg-cnn", [*TINY, f"run.seed={seed}", "federation.sampler=poisson"])
    start(name, plain, tmp_path / "plain", report_extras=False)
    records = [json.loads(line) for line in (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines() if '"step"' in line]
    assert [r["round"] for r in records if r.get("aggregated") is False] == empty
    assert all(r["note"] == "no client was sampled; the previous state is kept" for r in records if r["round"] in empty)


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


def test_dp_with_a_sampler_no_bound_covers_is_refused_by_the_dry_run_too():
    result = invoke("run", "dp-fedavg-cnn", "--set", "federation.sampler=size-weighted", "--dry-run")
    assert result.exit_code != 0
    assert error_line(result).startswith("error: federation.sampler: 'size-weighted' cannot run with privacy.dp on")
