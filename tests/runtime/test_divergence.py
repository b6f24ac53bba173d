"""Divergence (issue 7, item 6): non-finite config values fail validation for every float field
(algorithm hyperparameters included); NaN/inf in training stops the run naming the round and
client, or, with run.non_finite = 'drop', leaves that client out and counts it as failed."""

from __future__ import annotations

import json
import typing

import pytest
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.fst_cbdg import fst_cbdg
from fedprior.algorithms.registry import ALGORITHMS
from fedprior.errors import ConfigError
from fedprior.experiments.config import SECTIONS, ExperimentConfig, load_config
from fedprior.runtime.divergence import DivergedError
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.cli import TINY, error_line, invoke
from tests.support.toy_data import toy_images


def float_fields() -> list[str]:
    """Every float field of the config, each algorithm's hyperparameters included (as 'algorithm:NAME.key')."""
    fields = [
        f"{section}.{key}"
        for section in SECTIONS
        if section != "algorithm"
        for key, info in ExperimentConfig.model_fields[section].annotation.model_fields.items()
        if info.annotation is float
    ]
    for name, spec in ALGORITHMS.items():
        for key, parameter in spec.hyperparameters().items():
            if typing.get_args(parameter.annotation)[:1] == (float,) or parameter.annotation is float:
                fields.append(f"algorithm:{name}.{key}")
    return fields


FLOATS = float_fields()


def test_the_float_fields_include_the_probes():
    assert {"federation.fraction", "partition.alpha", "algorithm:fst-cbdg.lr", "algorithm:fst-cbdg.sigma", "algorithm:fedavg.lr"} <= set(FLOATS)


@pytest.mark.parametrize("value", ["inf", "nan"])
@pytest.mark.parametrize("field", FLOATS)
def test_non_finite_values_fail_validation_for_every_float_field(field, value):
    overrides = [f"{field}={value}"]
    if field.startswith("algorithm:"):
        name, key = field[len("algorithm:") :].split(".")
        overrides = [f"algorithm.name='{name}'", f"algorithm.{key}={value}"]
        field = f"algorithm.{key}"
    # the non-finite value is named (other errors of the combination, e.g. a model the algorithm does not take, may come first)
    with pytest.raises(ConfigError, match=f"(^|; ){field}: input should be a finite number"):
        load_config("fedavg-cnn", overrides)


@pytest.mark.parametrize("override", ["federation.rounds=true", "run.seed=false", "algorithm.lr=true", "partition.alpha=true"])
def test_a_bool_is_not_a_number(override):
    with pytest.raises(ConfigError, match="input should be a number, not true or false"):
        load_config("fedavg-cnn", [override])


def test_fedavg_cnn_with_a_huge_lr_stops_naming_round_and_client(tmp_path):
    run = tmp_path / "run"
    line = error_line(invoke("run", "fedavg-cnn", *TINY, "--set", "algorithm.lr=1e30", "--run-dir", run))
    assert line.startswith("error: training diverged in round 1: client ") and "returned non-finite values (model." in line
    assert not (run / "result.json").exists()  # never a finished-looking result
    assert (run / "checkpoint.safetensors").is_file()  # round 0 is kept, resumable


def test_drop_leaves_non_finite_clients_out_and_counts_them(tmp_path):
    result = invoke("run", "fedavg-cnn", *TINY, "--set", "algorithm.lr=1e30", "--set", "run.non_finite='drop'", "--run-dir", tmp_path / "run", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["failed_updates"] == summary["client_updates"] == 4  # every update diverged: none aggregated
    assert summary["rounds_without_update"] == [1, 2] and summary["history"] == [summary["initial_accuracy"]] * 2
    assert "warning: 4 client updates failed, in rounds 1 (2), 2 (2)" in result.stderr
    assert "warning: no client trained in rounds 1, 2: the global model was not updated there" in result.stderr


def make_feature_task() -> Task:
    g = torch.Generator().manual_seed(0)
    text = F.normalize(torch.randn(3, 6, generator=g), dim=1)
    return Task(num_classes=3, input_shape=(6,), class_names=("a", "b", "c"), num_clients=4, prior={"text_features": text})


def test_fst_cbdg_with_a_huge_lr_is_reported_as_divergence_not_a_linalg_error():
    task = make_feature_task()
    g = torch.Generator().manual_seed(1)
    data = [{"x": F.normalize(torch.randn(20, 6, generator=g), dim=1)} for _ in range(4)]
    test = {"x": data[0]["x"], "y": torch.zeros(20, dtype=torch.long)}
    algorithm = fst_cbdg(task, Runtime(2, 5), lr=1e30)
    with pytest.raises(DivergedError, match=r"training diverged in round 1: client \d returned non-finite values"):
        simulate(algorithm, lambda c: data[c], 4, test, RoundLoop(seed=0, rounds=2, fraction=0.5))


def test_the_global_model_is_checked_too():
    """A server step that turns the model non-finite stops the run even though every client was finite."""
    task = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=2)
    algorithm = fedavg(task, Runtime(1, 8), model="cnn", lr=0.1)
    poisoned = algorithm.with_(aggregate=lambda state, replies, info: {k: v * float("inf") for k, v in state.items()})
    data = [toy_images(16, seed=c) for c in range(2)]
    with pytest.raises(DivergedError, match="round 1: the global model holds non-finite values"):
        simulate(poisoned, lambda c: data[c], 2, toy_images(20, seed=9), RoundLoop(seed=0, rounds=1, fraction=1.0))
