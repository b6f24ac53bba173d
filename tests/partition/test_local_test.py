"""Per-client evaluation on local test splits (``partition.local_test_fraction``; issue 46, item 2).

The split (disjoint, sizes, stratified, seeded, refusals), the statistics on a hand-made list
(mean, population sd, worst 10% = the mean of the lowest ceil(n / 10)), one tiny round of each
personalized method giving each client's accuracy with its own model, and a run's report.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fedprior.algorithms.base import ClientInfo, Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.fedproto import fedproto
from fedprior.algorithms.fedrep import fedrep
from fedprior.algorithms.fedrod import fedrod
from fedprior.algorithms.pieces.personal import UPLOAD_PERSONAL, client_spread, pooled_accuracy, stored_clients, with_local_tests
from fedprior.errors import ConfigError
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.partition.local_test import local_test_split
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.algorithm_setups import SETUPS, SMALL
from tests.support.toy_data import toy_images

PERSONALIZED = ("fedrep", "fedrod", "fedproto")
"""Scored with each client's own model (``Algorithm.evaluate_client``)."""
GLOBAL = ("fednh", "fedetf")
"""FedBM's other baselines: no personal part here, so each client's split is scored with the global model."""


def test_local_test_split_is_disjoint_sized_stratified_and_seeded():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 1000)
    parts = (np.arange(0, 400), np.arange(400, 403), np.arange(403, 1000), np.zeros(0, dtype=np.int64))
    train, test = local_test_split(parts, labels, 0.25, seed=3)
    for part, tr, te in zip(parts, train, test, strict=True):
        assert np.intersect1d(tr, te).size == 0 and np.array_equal(np.union1d(tr, te), part)
        assert te.size == (0 if part.size == 0 else max(1, round(0.25 * part.size)))
        assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)
    share = [np.sum(labels[test[0]] == k) - 0.25 * np.sum(labels[parts[0]] == k) for k in range(4)]
    assert max(abs(s) for s in share) <= 1  # each class gets its share to within one
    again, other = local_test_split(parts, labels, 0.25, seed=3), local_test_split(parts, labels, 0.25, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(again[1], test, strict=True))
    assert not np.array_equal(other[1][0], test[0])


@pytest.mark.parametrize(
    ("parts", "fraction", "message"),
    [
        ((np.arange(10),), 1.0, r"partition.local_test_fraction: 1.0 is not a fraction in \[0, 1\)"),
        ((np.arange(10),), -0.1, "is not a fraction"),
        ((np.arange(10), np.array([10])), 0.2, "client 1 holds 1 image, which leaves none to train on .* raise partition.min_size to 2"),
        # probe 5 #11: min_size cannot help where the fraction takes every image
        ((np.arange(11),), 0.99, r"^[^;]*client 0 holds 11 images, and round\(0.99 x 11\) = 11 .* lower partition.local_test_fraction to 0.909 or less$"),
    ],
)
def test_local_test_split_refuses_bad_fractions_and_clients_left_without_training_data(parts, fraction, message):
    with pytest.raises(ConfigError, match=message):
        local_test_split(parts, np.zeros(11, dtype=np.int64), fraction, seed=0)


def test_client_spread_on_a_hand_made_list():
    ten = [0.9, 0.1, 0.5, 0.7, 0.3, 1.0, 0.6, 0.2, 0.8, 0.4]
    assert client_spread(ten) == pytest.approx({"client_accuracy_mean": 0.55, "client_accuracy_sd": np.sqrt(0.0825), "client_accuracy_worst10": 0.1})
    # eleven clients: the worst decile is the lowest ceil(11 / 10) = 2
    assert client_spread([*ten, 0.0])["client_accuracy_worst10"] == pytest.approx(0.05)
    assert client_spread([0.25]) == {"client_accuracy_mean": 0.25, "client_accuracy_sd": 0.0, "client_accuracy_worst10": 0.25}


def test_pooled_accuracy_weights_each_client_by_its_local_test_images():
    """Client 0 gets 1 of 2 right, client 1 gets 9 of 10: the unweighted mean is 0.7, the pooled one 10 of 12 (issue 55, item 5)."""
    assert pooled_accuracy([0.5, 0.9], [2, 10]) == pytest.approx({"client_accuracy_pooled": 10 / 12})
    assert client_spread([0.5, 0.9])["client_accuracy_mean"] == pytest.approx(0.7)
    assert pooled_accuracy([0.25, 0.75], [4, 4])["client_accuracy_pooled"] == pytest.approx(0.5)  # equal sizes: the two agree


def one_round(name: str, *more: str):
    preset, overrides = SETUPS[name]
    config_name, config = load_config(preset, [*overrides, *SMALL, "partition.local_test_fraction=0.2", *more])
    experiment = build_experiment(config_name, config)
    loop = RoundLoop(seed=0, rounds=1, fraction=config.federation.fraction)
    result = simulate(experiment.algorithm, experiment.client_data, experiment.task.num_clients, experiment.test, loop)
    return experiment, result


@pytest.mark.parametrize("name", [*PERSONALIZED, *GLOBAL])
def test_one_round_gives_each_client_its_accuracy_on_its_local_test_split(shared_cache, one_torch_thread, name):
    experiment, result = one_round(name)
    record = result.progress.history[-1]
    clients = record["clients"] if name in PERSONALIZED else list(range(experiment.task.num_clients))
    assert record["client_ids"] == clients and len(record["client_accuracy"]) == len(clients)
    assert all(0 <= a <= 1 for a in record["client_accuracy"])
    assert record["client_accuracy_mean"] == pytest.approx(np.mean(record["client_accuracy"]))
    assert min(record["client_accuracy"]) <= record["client_accuracy_pooled"] <= max(record["client_accuracy"])
    assert result.progress.initial["client_ids"] == list(range(experiment.task.num_clients))  # before any round: the initial model on every split


def test_clients_never_train_on_their_local_test_images(shared_cache):
    from fedprior.data import load_dataset
    from fedprior.experiments.client_split import client_split

    preset, overrides = SETUPS["fedrep"]
    _, config = load_config(preset, [*overrides, *SMALL])
    dataset, none = load_dataset(config.data.dataset), np.zeros(0, dtype=np.int64)
    whole = client_split(config, dataset, none)
    held = client_split(config.model_copy(update={"partition": config.partition.model_copy(update={"local_test_fraction": 0.2})}), dataset, none)
    assert whole.local_tests is None and held.local_tests is not None
    for c in range(whole.partition.num_clients):
        train, test = held.partition.holdings(c), held.local_tests[c]
        assert np.intersect1d(train, test).size == 0 and np.array_equal(np.union1d(train, test), whole.partition.holdings(c))
    from fedprior.experiments.dry_run import dry_run

    shown = dry_run(config.model_copy(update={"partition": config.partition.model_copy(update={"local_test_fraction": 0.2})}))["roles"]
    assert shown["local_test"]["client_sizes"] == [t.size for t in held.local_tests]  # --dry-run shows the local test splits


@pytest.mark.parametrize("factory", ["fedrep", "fedproto", "fedrod"])
def test_a_clients_accuracy_is_its_own_model_on_its_own_split(factory):
    """Two clients train; each one's per-client accuracy is its own model on its own split, not the other's."""
    task = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=3)
    algorithm = {"fedrep": fedrep, "fedproto": fedproto, "fedrod": fedrod}[factory](task, Runtime(1, 8), lr=0.1)
    splits = [toy_images(12, seed=10 + c) for c in range(3)]
    asking = with_local_tests(algorithm, splits)
    state = asking.init(RoundInfo(0, "federated", 0))
    replies = []
    for c in (0, 2):
        info = ClientInfo(0, "federated", 1, client_id=c)
        reply, _ = asking.client_update(asking.broadcast(state, info), {}, toy_images(16, seed=c), info)
        replies.append(Reply(reply.arrays, reply.num_examples, reply.metrics, client_id=c))
    after = asking.aggregate(state, replies, RoundInfo(0, "federated", 1))
    scores = asking.evaluate(after, toy_images(30, 5))
    assert scores["client_ids"] == [0, 2]
    personal = asking.evaluate_client
    assert personal is not None
    assert scores["client_accuracy"] == [personal(after, c, splits[c])["accuracy"] for c in (0, 2)]
    if factory == "fedrod":  # the personalized logits are G(z) + P(z): a zero P-head gives the generic model, a P-head biased to class 1 predicts 1
        weight, split = after["eval.0.weight"], splits[0]
        zero = {**after, "eval.0.weight": torch.zeros_like(weight), "eval.0.bias": torch.zeros(3)}
        assert personal(zero, 0, split)["accuracy"] == algorithm.evaluate(after, split)["accuracy"]
        biased = {**zero, "eval.0.bias": torch.tensor([0.0, 1e6, 0.0])}
        assert personal(biased, 0, split)["accuracy"] == pytest.approx(float((split["y"] == 1).float().mean()))
    else:  # today's global evaluation of a state holding client c's model alone gives the same number
        for c, accuracy in zip((0, 2), scores["client_accuracy"], strict=True):
            alone = {k: v for k, v in after.items() if not k.startswith("eval.") or k.startswith(f"eval.{c}.")}
            assert stored_clients(alone) == [c] and algorithm.evaluate(alone, splits[c])["accuracy"] == pytest.approx(accuracy)


def test_fedrod_uploads_its_personal_head_only_when_asked():
    task = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
    algorithm = fedrod(task, Runtime(1, 8), lr=0.1)
    info = ClientInfo(0, "federated", 1, client_id=2)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    plain, _ = algorithm.client_update(algorithm.broadcast(state, info), {}, toy_images(16), info)
    assert not any(k.startswith("eval.") for k in plain.arrays)  # today's upload, unchanged
    asking = with_local_tests(algorithm, [toy_images(6, seed=c) for c in range(4)])
    message = asking.broadcast(state, info)
    assert message.config[UPLOAD_PERSONAL] is True
    reply, kept = asking.client_update(message, {}, toy_images(16), info)
    assert torch.equal(reply.arrays["eval.2.weight"], kept["personal.weight"])
    assert not asking.mean_aggregate and algorithm.mean_aggregate  # the P-heads are no mean of the replies


def test_a_fedrep_run_reports_and_plots_the_per_client_accuracy(shared_cache, one_torch_thread, tmp_path):
    preset, overrides = SETUPS["fedrep"]
    name, config = load_config(preset, [*overrides, *SMALL, "partition.local_test_fraction=0.2"])
    summary = start(name, config, tmp_path / "run")
    assert len(summary["final_client_accuracy"]) == len(summary["final_client_ids"]) == 2
    for key in ("mean", "sd", "worst10", "pooled"):
        assert f"final_client_accuracy_{key}" in json.loads((tmp_path / "run" / "result.json").read_text())
    report = (tmp_path / "run" / "report.md").read_text()
    assert "worst 10% (mean of the lowest 1)" in report and "client_accuracy.png" in report
    assert "pooled (all local test images, sample-weighted)" in report
    assert (tmp_path / "run" / "client_accuracy.png").stat().st_size > 0
    assert "per client" in (tmp_path / "run" / "run.log").read_text()


@pytest.mark.parametrize(
    ("preset", "more", "message"),
    [
        ("fedbm-central", [], "is a centralized baseline"),
        ("feddb", ["data.dataset=digits", "partition.num_unlabeled=0"], "which a labeled/unlabeled split"),
    ],
)
def test_local_test_splits_are_refused_where_there_are_no_clients_splits(shared_cache, preset, more, message):
    from fedprior.data import load_dataset
    from fedprior.experiments.client_split import client_split

    _, config = load_config(preset, [*more, "partition.local_test_fraction=0.2"])
    with pytest.raises(ConfigError, match=f"partition.local_test_fraction: .*{message}"):
        client_split(config, load_dataset(config.data.dataset), np.zeros(0, dtype=np.int64))


def test_a_method_scored_by_linear_evaluation_is_refused(shared_cache):
    preset, overrides = SETUPS["fedsimclr"]
    name, config = load_config(preset, [*overrides, *SMALL, "partition.local_test_fraction=0.2"])
    with pytest.raises(ConfigError, match="partition.local_test_fraction: 'fedsimclr' is scored by a linear evaluation"):
        build_experiment(name, config)
