"""FedBN (``fedprior.algorithms.fedbn``; Li et al., ICLR 2021, Algorithm 1; issue 55, item 4): the batch-norm layers never
leave a client, the rest is FedAvg's example-weighted mean, and each client trains on from its own BN."""

from __future__ import annotations

import pytest
import torch

from fedprior.algorithms.base import ClientInfo, Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.fedbn import batch_norm_keys, fedbn
from fedprior.algorithms.pieces.personal import UPLOAD_PERSONAL, with_local_tests
from fedprior.errors import ConfigError
from fedprior.models import build_model
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)


def bn_keys() -> frozenset[str]:
    return batch_norm_keys(build_model("convnet-small", TASK))


def round_of(algorithm, state, clients, client_states, round_=1):
    replies = []
    for c in clients:
        info = ClientInfo(0, "federated", round_, client_id=c)
        reply, kept = algorithm.client_update(algorithm.broadcast(state, info), client_states.get(c, {}), toy_images(16, seed=c), info)
        client_states[c] = kept
        replies.append(Reply(reply.arrays, reply.num_examples, reply.metrics, client_id=c))
    return replies, algorithm.aggregate(state, replies, RoundInfo(0, "federated", round_))


def test_the_bn_layers_never_leave_a_client_and_the_server_never_holds_them():
    keys = bn_keys()
    assert keys and all(k.startswith("model.") for k in keys)
    assert any(k.endswith("running_mean") for k in keys) and any(k.endswith("weight") for k in keys)
    algorithm = fedbn(TASK, Runtime(1, 8), lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    assert not keys & set(state)
    states: dict[int, dict] = {}
    for round_ in (1, 2):
        replies, state = round_of(algorithm, state, (0, 2), states, round_)
        for reply in replies:
            assert not keys & set(reply.arrays) and reply.arrays  # the reply's parameters: no BN tensor
            assert not any(k.startswith("eval.") for k in reply.arrays)
        assert not keys & set(state) and not any(k.startswith("eval.") for k in state)  # the server's aggregate: none either
    assert set(states[0]) == set(states[2]) == keys  # each client keeps its own
    statistic = sorted(k for k in keys if k.endswith("running_mean"))[0]
    assert not torch.equal(states[0][statistic], states[2][statistic])  # trained on its own images


def test_a_client_trains_on_from_its_own_bn_and_the_rest_is_the_mean():
    algorithm = fedbn(TASK, Runtime(1, 8), lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    states: dict[int, dict] = {}
    replies, after = round_of(algorithm, state, (0, 1), states)
    shared = [k for k in after if k.startswith("model.")]
    weights = torch.tensor([r.num_examples for r in replies], dtype=torch.float64)
    for k in shared:  # FedAvg's example-weighted mean of the non-BN layers
        mean = sum(w * r.arrays[k].double() for w, r in zip(weights / weights.sum(), replies, strict=True))
        torch.testing.assert_close(after[k].double(), mean)
    info = ClientInfo(0, "federated", 2, client_id=0)
    message = algorithm.broadcast(after, info)
    fresh, _ = algorithm.client_update(message, {}, toy_images(16, seed=0), info)
    own, _ = algorithm.client_update(message, states[0], toy_images(16, seed=0), info)
    assert any(not torch.equal(fresh.arrays[k], own.arrays[k]) for k in fresh.arrays)  # its kept BN is what it trains with


def test_bn_is_uploaded_only_for_the_per_client_score_and_never_averaged():
    algorithm = fedbn(TASK, Runtime(1, 8), lr=0.1)
    splits = [toy_images(12, seed=10 + c) for c in range(4)]
    asking = with_local_tests(algorithm, splits)
    state = asking.init(RoundInfo(0, "federated", 0))
    info = ClientInfo(0, "federated", 1, client_id=2)
    message = asking.broadcast(state, info)
    assert message.config[UPLOAD_PERSONAL] is True and not asking.mean_aggregate and algorithm.mean_aggregate
    states: dict[int, dict] = {}
    replies, after = round_of(asking, state, (1, 2), states)
    assert not bn_keys() & {k for k in after if not k.startswith("eval.")}
    for c in (1, 2):
        for k, v in states[c].items():
            assert torch.equal(after[f"eval.{c}.{k}"], v)  # the measurement holds each client's own BN, not a mean
    scores = asking.evaluate(after, toy_images(30, 5))
    personal = asking.evaluate_client
    assert personal is not None and scores["client_ids"] == [1, 2]
    assert scores["client_accuracy"] == [personal(after, c, splits[c])["accuracy"] for c in (1, 2)]


def test_a_model_without_batch_norm_is_refused():
    with pytest.raises(ConfigError, match="^algorithm.model: fedbn keeps the BatchNorm layers local, and 'cnn' has none"):
        fedbn(TASK, Runtime(1, 8), model="cnn")
