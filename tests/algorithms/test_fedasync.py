"""FedAsync: the staleness-weighted mixing of each arriving client model, by hand, and its one-client limit (FedAvg)."""

from __future__ import annotations

import pytest
import torch

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.fedasync import fedasync
from fedprior.algorithms.fedavg import fedavg
from fedprior.errors import ConfigError
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.cli import error_line, invoke
from tests.support.toy_data import toy_images

DATA = [toy_images(12, seed=c) for c in range(2)]
TEST = toy_images(30, seed=99)
NAMES = ("model.classifier.3.bias", "model.features.0.weight")


def task(clients: int) -> Task:
    return Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=clients)


def run(algorithm, clients: int, rounds: int):
    return simulate(algorithm, lambda c: DATA[c], clients, TEST, RoundLoop(seed=3, rounds=rounds, fraction=1.0))


def info(round_: int) -> RoundInfo:
    return RoundInfo(seed=3, stage="federated", round=round_)


def test_one_client_with_alpha_1_is_fedavg_and_alpha_mixes_the_first_step():
    """N = C = 1: every update is fresh. alpha = 1 takes the client's model (FedAvg's one-client round); alpha = 0.6 gives
    x_1 = 0.4 x_0 + 0.6 x_client (Algorithm 1's mixing)."""
    sync = run(fedavg(task(1), Runtime(1, 8), model="cnn", lr=0.1), 1, 2).state
    whole = run(fedasync(task(1), Runtime(1, 8), model="cnn", lr=0.1, concurrency=1, alpha=1.0), 1, 2).state
    assert all(torch.allclose(whole[k], sync[k], rtol=0, atol=1e-6) for k in sync)
    algorithm = fedasync(task(1), Runtime(1, 8), model="cnn", lr=0.1, concurrency=1, alpha=0.6)
    x0 = algorithm.init(info(0))
    first = run(fedavg(task(1), Runtime(1, 8), model="cnn", lr=0.1), 1, 1).state
    mixed = run(algorithm, 1, 1).state
    for name in NAMES:
        torch.testing.assert_close(mixed[name], 0.4 * x0[name] + 0.6 * first[name], rtol=0, atol=1e-6)


@pytest.mark.parametrize(("staleness", "weight"), [("polynomial", (2 + 1) ** -0.5), ("hinge", 1 / (10 * (2 - 1) + 1)), ("constant", 1.0)])
def test_a_stale_model_is_mixed_in_with_alpha_times_its_staleness_weight(staleness, weight):
    """The hand-made clock of tests/algorithms/pieces/test_async_schedule.py (N = C = 2, client 0 takes 1 s, client 1 3 s):
    step 3 applies client 1's model trained on x_0, two versions old: x_3 = (1 - alpha s(2)) x_2 + alpha s(2) x_1'."""
    runtime = Runtime(1, 8, client_duration=lambda client, version, model_bytes: (1.0, 3.0)[client])
    algorithm = fedasync(
        task(2), runtime, model="cnn", lr=0.1, concurrency=2, alpha=0.8, staleness=staleness, staleness_a=10.0 if staleness == "hinge" else 0.5, staleness_b=1.0
    )
    result = run(algorithm, 2, 3)
    assert [r["buffer_staleness_max"] for r in result.progress.history] == [0, 0, 2]
    two = run(algorithm, 2, 2).state
    x0 = algorithm.init(info(0))
    reply, _ = algorithm.client_update(algorithm.broadcast(x0, info(1)), {}, DATA[1], info(1).for_client(1))
    alpha = 0.8 * weight
    for name in NAMES:
        torch.testing.assert_close(result.state[name], (1 - alpha) * two[name] + alpha * reply.arrays[name], rtol=0, atol=1e-6)


def test_bad_hyperparameters_are_one_line_config_errors():
    line = error_line(invoke("run", "fedavg-cnn", "--algorithm", "fedasync", "--set", "algorithm.alpha=1.5", "--dry-run"))
    assert line.startswith("error: algorithm.alpha:")
    with pytest.raises(ConfigError, match=r"^algorithm.concurrency: 3 clients in flight of 2"):
        fedasync(task(2), Runtime(1, 8), concurrency=3)
