"""Building experiments from configs; every registered algorithm through one round."""

import math

import numpy as np
import pytest
import torch

from fedprior.algorithms.registry import ALGORITHMS
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate, total_rounds
from tests.support.algorithm_setups import SETUPS, SMALL
from tests.support.cli import STANDIN, error_line, invoke


def test_every_algorithm_has_a_setup():
    assert set(SETUPS) == set(ALGORITHMS)


def run_once(name, seed=0):
    preset, overrides = SETUPS[name]
    config_name, config = load_config(preset, [*overrides, *SMALL, f"run.seed={seed}"])
    experiment = build_experiment(config_name, config)
    result = simulate(
        experiment.algorithm,
        experiment.client_data,
        experiment.task.num_clients,
        experiment.test,
        RoundLoop(seed=seed, rounds=config.federation.rounds, fraction=config.federation.fraction),
    )
    return experiment, result


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_one_round_is_finite_and_reproducible(shared_cache, name):
    experiment, first = run_once(name)
    _, again = run_once(name)
    assert all(torch.isfinite(v).all() for v in first.state.values())

    def strip(history):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in history]

    assert strip(first.progress.history) == strip(again.progress.history)
    assert all(torch.equal(first.state[k], again.state[k]) for k in first.state)
    expected_rounds = total_rounds(experiment.algorithm, 1)  # one round of every stage (MFCL: phase 1, upload, one server epoch)
    assert len(first.progress.history) == expected_rounds == len(experiment.algorithm.stages)
    accuracy = first.progress.history[-1]["accuracy"] if expected_rounds else first.progress.initial["accuracy"]
    assert 0.0 <= accuracy <= 1.0 and math.isfinite(accuracy)


def test_the_pretraining_split_never_reaches_a_client(shared_cache):
    name, config = load_config("fst-cbdg", [*STANDIN, "federation.num_clients=10"])
    experiment = build_experiment(name, config)
    encoder_reserved = np.setdiff1d(np.arange(experiment.dataset.train_labels.size), experiment.pool)
    assert encoder_reserved.size == 300
    held = np.concatenate([experiment.partition.holdings(c) for c in range(10)])
    assert np.intersect1d(held, encoder_reserved).size == 0
    assert np.array_equal(np.sort(held), experiment.pool)  # shards cover the rest, no overlap


def test_clients_of_unsupervised_algorithms_get_no_labels(shared_cache):
    name, config = load_config("fst-cbdg", [*STANDIN, "federation.num_clients=10"])
    experiment = build_experiment(name, config)
    assert set(experiment.client_data(0)) == {"x"}
    name, config = load_config("fedavg-linear", [*STANDIN, "federation.num_clients=10"])
    assert set(build_experiment(name, config).client_data(0)) == {"x", "y"}


def test_features_are_normalized_and_text_prior_present(shared_cache):
    name, config = load_config("fst-cbdg", [*STANDIN, "federation.num_clients=10"])
    experiment = build_experiment(name, config)
    assert torch.allclose(experiment.train["x"].norm(dim=1), torch.ones(experiment.train["x"].shape[0]), atol=1e-5)
    text = experiment.task.prior["text_features"]
    assert text.shape == (10, experiment.train["x"].shape[1])
    assert torch.allclose(text.norm(dim=1), torch.ones(10), atol=1e-5)


def test_centralized_baseline_trains_one_client_on_everything(shared_cache):
    name, config = load_config("linear-probe", [*STANDIN, "federation.num_clients=10"])
    experiment = build_experiment(name, config)
    assert experiment.task.num_clients == 1 and experiment.config.federation.fraction == 1.0
    assert np.array_equal(experiment.partition.holdings(0), experiment.pool)


@pytest.mark.parametrize(
    "preset, setting, refusal",
    [
        ("mfcl", "run.precision=bf16", "error: run.precision: algorithm 'mfcl' trains and evaluates in fp32 only"),
        ("scaffold-cnn", "run.compile=true", "error: run.compile: compiles on an accelerator only"),
    ],
)
def test_precision_and_compile_are_refused_before_the_data_loads(monkeypatch, preset, setting, refusal):
    from fedprior.experiments import build, dry_run

    def no_data(*args, **kwargs):
        raise AssertionError("the data was loaded before the refusal")

    monkeypatch.setattr(build, "prepared_data", no_data)
    monkeypatch.setattr(dry_run, "planned_split", no_data)
    assert error_line(invoke("run", preset, "--set", setting, "--set", "run.device=cpu")).startswith(refusal)
    if setting.startswith("run.precision"):  # the dry run refuses it too (compile on the CPU is the device's, which a dry run leaves alone)
        assert error_line(invoke("run", preset, "--set", setting, "--dry-run")).startswith(refusal)
