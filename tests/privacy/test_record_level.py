"""privacy.dp = 'sample' (fedprior.privacy.record_level): DP-SGD clients in a run, the worst client's epsilon, refusals."""

from __future__ import annotations

import json
import math

import pytest
import torch

from fedprior.errors import ConfigError
from fedprior.experiments.config import load_config
from fedprior.privacy.record_level import HISTORY
from tests.support.cli import error_line, invoke

pytest.importorskip("opacus")

TINY = [
    "data.dataset=digits",
    "partition.scheme=iid",
    "federation.num_clients=4",
    "federation.fraction=0.5",
    "federation.batch_size=32",
    "run.workers=1",
    "run.threads=1",
    "privacy.dp=sample",
    "privacy.noise_multiplier=1.1",
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm.name=fedprox"], "privacy.dp: 'sample' runs DP-SGD in place of FedAvg's local SGD on labelled images; algorithm 'fedprox'"),
        (["algorithm.name=scaffold"], "privacy.dp: 'sample' runs DP-SGD in place of FedAvg's local SGD on labelled images; algorithm 'scaffold'"),
        (["algorithm.model=convnet"], "privacy.dp: 'sample' needs per-example gradients, which Opacus refuses for algorithm.model = 'convnet'"),
        (["algorithm.model=resnet18"], "privacy.dp: 'sample' needs per-example gradients, which Opacus refuses for algorithm.model = 'resnet18'"),
        (["algorithm.model=linear"], "privacy.dp: 'sample' trains an image model with DP-SGD; algorithm.model = 'linear'"),
        (["run.precision=bf16"], "run.precision: privacy.dp = 'sample' runs Opacus's DP-SGD in fp32 only"),
        (["privacy.clipping=adaptive"], "privacy.clipping: applies with privacy.dp = 'server' or 'client', not 'sample'"),
        (["privacy.accountant=rdp"], "privacy.accountant: applies with privacy.dp = 'server' or 'client', not 'sample'"),
        (["privacy.noise_multiplier=1e-300"], "privacy.noise_multiplier: 1e-300 gives Opacus's RDP accountant no finite epsilon"),
    ],
)
def test_what_sample_level_dp_cannot_run_is_refused_in_one_line_before_data_loads(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config("fedavg-cnn", [*TINY, *overrides])
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_the_server_optimizers_and_robust_rules_are_accepted():
    for overrides in (["algorithm.name=fedadam"], ["algorithm.name=fedavgm"], ["algorithm.aggregation_rule=median"]):
        _, config = load_config("fedavg-cnn", [*TINY, *overrides])
        assert config.privacy.dp == "sample"


def test_dry_run_and_secagg_refuse_it_in_one_line():
    line = error_line(invoke("run", "fedavg-cnn", "--dry-run", *[a for o in [*TINY, "algorithm.name=fedprox"] for a in ("--set", o)]))
    assert "privacy.dp: 'sample' runs DP-SGD in place of FedAvg's local SGD" in line
    line = error_line(invoke("flower", "local", "fedavg-cnn", "--secagg", *[a for o in TINY for a in ("--set", o)]))
    assert "--secagg: privacy.dp = 'sample' reports each client's own epsilon" in line


def independent_epsilons(run_dir, config, rounds: int) -> list[float]:
    """Each client's epsilon from Opacus's RDP analysis, from the partition's sizes and the rounds each client was sampled in."""
    from opacus.accountants.analysis import rdp
    from opacus.accountants.rdp import RDPAccountant

    sizes = json.loads((run_dir / "partition.json").read_text())["client_sizes"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    sampled = [c for r in records if r.get("step", 0) >= 1 for c in r["clients"]]
    assert len(sampled) == rounds * 2
    out = []
    for client, n in enumerate(sizes):
        per_epoch = math.ceil(n / config.federation.batch_size)
        steps = sampled.count(client) * config.federation.local_epochs * per_epoch
        if steps == 0:
            out.append(0.0)
            continue
        orders = RDPAccountant.DEFAULT_ALPHAS
        curve = rdp.compute_rdp(q=1 / per_epoch, noise_multiplier=config.privacy.noise_multiplier, steps=steps, orders=orders)
        out.append(float(rdp.get_privacy_spent(orders=orders, rdp=curve, delta=config.privacy.delta)[0]))
    return out


@pytest.mark.slow
def test_a_fedavg_cnn_run_reports_the_worst_clients_epsilon_the_same_for_the_same_seed_and_on_resume(tmp_path, shared_cache):
    from fedprior.experiments.runner import resume, start
    from fedprior.runtime.checkpoint import load_checkpoint

    name, config = load_config("fedavg-cnn", [*TINY, "federation.rounds=3"])
    whole = start(name, config, tmp_path / "whole", report_extras=False)
    assert whole["dp_accountant"] == "opacus-rdp" and whole["dp_level"] == "example" and len(whole["dp_epsilon_per_round"]) == 3
    expected = independent_epsilons(tmp_path / "whole", config, 3)
    assert whole["dp_epsilon"] == pytest.approx(max(expected), rel=1e-9)
    trained = torch.tensor([e for e in expected if e > 0], dtype=torch.float64)  # the median of the clients that trained
    assert len(trained) > 0 and whole["dp_epsilon_median"] == pytest.approx(float(torch.quantile(trained, 0.5)), rel=1e-9)
    assert whole["dp_epsilon"] > 0 and math.isfinite(whole["final_accuracy"])
    log = (tmp_path / "whole" / "run.log").read_text()
    assert f"epsilon {whole['dp_epsilon']:.3f} (worst client; median {whole['dp_epsilon_median']:.3f})" in log
    assert "record-level DP-SGD: epsilon at delta 1e-05 of the worst client (median client), opacus-rdp" in (tmp_path / "whole" / "report.md").read_text()

    again = start(name, config, tmp_path / "again", report_extras=False)
    assert again["history"] == whole["history"] and again["dp_epsilon_per_round"] == whole["dp_epsilon_per_round"]
    assert again["round_fingerprints"] == whole["round_fingerprints"]
    other = start(*load_config("fedavg-cnn", [*TINY, "federation.rounds=3", "run.seed=1"]), tmp_path / "other", report_extras=False)
    assert other["round_fingerprints"] != whole["round_fingerprints"]

    first = start(*load_config("fedavg-cnn", [*TINY, "federation.rounds=1"]), tmp_path / "stopped", report_extras=False)
    resumed = resume(tmp_path / "stopped", config=config, report_extras=False)
    assert resumed["history"] == whole["history"] and resumed["dp_epsilon_per_round"] == whole["dp_epsilon_per_round"]
    assert len(first["dp_epsilon_per_round"]) == 1
    a, b = (load_checkpoint(tmp_path / d / "checkpoint.safetensors") for d in ("whole", "stopped"))
    assert a.server.keys() == b.server.keys() and all(torch.equal(a.server[k], b.server[k]) for k in a.server)
    assert a.clients.keys() == b.clients.keys() and all(torch.equal(a.clients[c][HISTORY], b.clients[c][HISTORY]) for c in a.clients)
    assert {c for c, s in a.clients.items() if HISTORY in s} == {c for c, e in enumerate(expected) if e > 0}  # each sampled client's accountant


@pytest.mark.slow
def test_without_dp_the_run_is_unchanged_by_the_sample_mode(tmp_path, shared_cache):
    """The same run without privacy.dp trains FedAvg's own clients: other numbers, no epsilon."""
    from fedprior.experiments.runner import start

    plain = [o for o in TINY if not o.startswith("privacy.")]
    summary = start(*load_config("fedavg-cnn", [*plain, "federation.rounds=1"]), tmp_path / "plain", report_extras=False)
    private = start(*load_config("fedavg-cnn", [*TINY, "federation.rounds=1"]), tmp_path / "private", report_extras=False)
    assert "dp_epsilon" not in summary and private["round_fingerprints"][1] != summary["round_fingerprints"][1]


@pytest.mark.slow
def test_a_robust_rule_under_attack_and_a_server_optimizer_run_on_the_private_replies(tmp_path, shared_cache):
    from fedprior.experiments.runner import start

    for name, overrides in {
        "robust": ["algorithm.aggregation_rule=median", "federation.attack=sign_flip", "federation.malicious_fraction=0.25"],
        "fedadam": ["algorithm.name=fedadam"],
    }.items():
        summary = start(*load_config("fedavg-cnn", [*TINY, "federation.rounds=1", *overrides]), tmp_path / name, report_extras=False)
        assert summary["dp_epsilon"] > 0 and summary["dp_level"] == "example", name
