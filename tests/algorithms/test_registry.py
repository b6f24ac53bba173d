"""The algorithm registry: a user's algorithm that raises or returns no Algorithm is named with its module (issue 46 item 6)."""

from __future__ import annotations

import re

import pytest
import torch

import fedprior
from fedprior.algorithms.base import MEAN_AGGREGATING, Runtime, Task, require_mean_aggregate
from fedprior.algorithms.registry import algorithm_spec
from tests.support.cli import TINY, error_line, invoke


def test_the_check_without_data_stops_a_factory_at_its_first_look_at_the_task(registry):
    looked = []

    def factory(task, *, lr: float = 0.1, device: torch.device = torch.device("cpu")):
        if lr > 1:
            raise fedprior.ConfigError("algorithm.lr: at most 1")
        looked.append(True)
        return task.num_classes  # the data's: never reached without it

    spec = fedprior.register_algorithm("looks-at-task", factory)
    spec.check_without_data({"lr": 0.5}, Runtime(1, 8))
    with pytest.raises(fedprior.ConfigError, match="algorithm.lr: at most 1"):
        spec.check_without_data({"lr": 2.0}, Runtime(1, 8))
    assert looked == [True]
    algorithm_spec("fedavg").check_without_data({}, Runtime(1, 8))  # a shipped factory stops at its model's task


def raising(task, *, device: torch.device = torch.device("cpu")):
    raise RuntimeError("boom")


def gives_dict(task, *, device: torch.device = torch.device("cpu")):
    return {"stages": ()}


def raising_aggregate(task, *, local_epochs: int = 1, batch_size: int = 32, device: torch.device = torch.device("cpu")):
    def aggregate(state, replies, info):
        raise RuntimeError("boom in aggregate")

    return algorithm_spec("fedavg").factory(task, Runtime(local_epochs, batch_size, device=device)).with_(aggregate=aggregate)


@pytest.mark.parametrize(
    "factory, says",
    [
        (raising, "its factory raised RuntimeError: boom"),
        (gives_dict, "its factory returned dict, not an Algorithm (fedprior.algorithms.base.Algorithm)"),
        (lambda task, *, device=torch.device("cpu"): None, "its factory returned NoneType, not an Algorithm (fedprior.algorithms.base.Algorithm)"),
        (raising_aggregate, "its aggregate raised RuntimeError: boom in aggregate"),
    ],
    ids=["raises", "dict", "none", "aggregate"],
)
def test_a_users_algorithm_that_fails_is_named_with_its_module_not_called_a_bug(registry, tmp_path, factory, says):
    fedprior.register_algorithm("mine", factory)
    result = invoke("run", "fedavg-cnn", *TINY, "--algorithm", "mine", "--run-dir", tmp_path / "run")
    assert result.exit_code == 2
    assert error_line(result) == f"error: algorithm 'mine' (module {factory.__module__}): {says}"


@pytest.mark.parametrize("name", MEAN_AGGREGATING)
def test_the_algorithms_dp_and_secagg_name_as_accepted_aggregate_by_the_mean(name):
    """DP-FedAvg's and SecAgg+'s refusals name MEAN_AGGREGATING as what they accept: each must be built mean_aggregate."""
    head = name == "fedntd"  # FedNTD trains a head on an encoder's feature vectors (a random start: no text features here)
    task = Task(num_classes=3, input_shape=(16,) if head else (1, 28, 28), class_names=("a", "b", "c"), num_clients=4)
    assert algorithm_spec(name).build(task, {"init": "random"} if head else {}, Runtime(1, 8)).mean_aggregate


def test_dp_and_secagg_refuse_by_the_same_line_naming_what_they_accept():
    scaffold = algorithm_spec("scaffold").build(Task(num_classes=3, input_shape=(1, 28, 28), class_names=("a", "b", "c"), num_clients=4), {}, Runtime(1, 8))
    for option in ("privacy.dp", "--secagg"):
        with pytest.raises(fedprior.ConfigError, match=rf"^{re.escape(option)}: algorithm 'scaffold' .*; accepted: {', '.join(MEAN_AGGREGATING)} and other"):
            require_mean_aggregate(scaffold, option, "reads more than the mean")
