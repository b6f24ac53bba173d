"""Robust aggregation rules against Flower's (flwr 1.41 ``flwr.server.strategy.aggregate``) and by hand, their composition with the
algorithms whose aggregate is a mean of models, the simulated misbehaving clients, and the one-line refusals of bad values."""

import numpy as np
import pytest
import torch
from flwr.server.strategy.aggregate import aggregate_krum, aggregate_median, aggregate_trimmed_avg

from fedprior.algorithms.base import Algorithm, Broadcast, ClientInfo, Reply, RoundInfo, Runtime
from fedprior.algorithms.fedopt import fedadam
from fedprior.algorithms.pieces.robust_aggregation import RobustAggregation, with_robust_aggregation
from fedprior.algorithms.pieces.server_optimizers import ServerOptimizer, with_server_optimizer
from fedprior.algorithms.pieces.tensors import MODEL, weighted_mean, with_prefix
from fedprior.errors import ConfigError
from fedprior.experiments.config import load_config
from fedprior.runtime.attacks import Misbehaviour, malicious_clients, with_attack

INFO = RoundInfo(seed=0, stage="federated", round=1)
SHAPES = {"model.conv.weight": (2, 3), "model.fc.bias": (4,)}


def replies(n: int, seed: int = 0, outliers: int = 0) -> list[Reply]:
    """n hand-made replies (two float arrays and an integer counter), the last ``outliers`` of them far away; example counts differ."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        far = 50.0 if i >= n - outliers else 0.0
        arrays = {name: torch.randn(shape, generator=g, dtype=torch.float32) + far for name, shape in SHAPES.items()}
        out.append(Reply({**arrays, "model.bn.count": torch.tensor(7 + i)}, num_examples=10 + 5 * i, client_id=i))
    return out


def flower(rs: list[Reply]) -> list[tuple[list[np.ndarray], int]]:
    """The replies' float arrays as Flower's (NDArrays, num_examples) results."""
    return [([r.arrays[name].double().numpy() for name in SHAPES], r.num_examples) for r in rs]


def mean_algorithm() -> Algorithm:
    """An algorithm whose aggregate is the example-weighted mean of its replies' models (FedAvg's)."""

    def aggregate(state, rs, info):
        mean = weighted_mean([with_prefix(r.arrays, MODEL) for r in rs], [r.num_examples for r in rs])
        return {**state, **{MODEL + k: v for k, v in mean.items()}}

    init = {**{name: torch.zeros(shape) for name, shape in SHAPES.items()}, "model.bn.count": torch.tensor(0)}
    return Algorithm(
        name="toy",
        inputs=("x", "y"),
        init=lambda info: dict(init),
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=lambda *a: (_ for _ in ()).throw(AssertionError("no client runs here")),
        aggregate=aggregate,
        evaluate=lambda state, data: {"accuracy": 0.0},
    )


def aggregated(rule: RobustAggregation, rs: list[Reply]) -> list[np.ndarray]:
    algorithm = with_robust_aggregation(mean_algorithm(), rule)
    state = algorithm.aggregate(algorithm.init(INFO), rs, INFO)
    return [state[name].double().numpy() for name in SHAPES]


@pytest.mark.parametrize("n", [6, 7])
def test_median_is_flowers_fedmedian(n):
    rs = replies(n, seed=n)
    for ours, theirs in zip(aggregated(RobustAggregation("median"), rs), aggregate_median(flower(rs)), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)  # float32 arrays: the last bits of the mean of two


@pytest.mark.parametrize(("n", "beta"), [(7, 0.2), (10, 0.3), (6, 0.0)])
def test_trimmed_mean_is_flowers_fedtrimmedavg(n, beta):
    rs = replies(n, seed=n)
    for ours, theirs in zip(aggregated(RobustAggregation("trimmed_mean", trim_fraction=beta), rs), aggregate_trimmed_avg(flower(rs), beta), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("rule", "m"), [("krum", None), ("multi_krum", 3), ("multi_krum", None)])
def test_krum_and_multi_krum_are_flowers(rule, m):
    rs = replies(9, seed=3, outliers=3)
    keep = 1 if rule == "krum" else (m or 9 - 3)
    theirs = aggregate_krum(flower(rs), num_malicious=3, to_keep=0 if rule == "krum" else keep)
    for ours, flowers in zip(aggregated(RobustAggregation(rule, f=3, m=m), rs), theirs, strict=True):
        np.testing.assert_allclose(ours, flowers, rtol=1e-6, atol=1e-7)


def test_krum_scores_by_hand_and_outliers_left_out():
    """Five one-number clients 0, 1, 2, 3, 100 and f = 1: score(i) = sum of the n - f - 2 = 2 smallest squared distances."""
    rs = [Reply({"model.w": torch.tensor([float(v)])}, num_examples=1, client_id=i) for i, v in enumerate([0, 1, 2, 3, 100])]
    from fedprior.algorithms.pieces.robust_aggregation import krum_scores

    assert krum_scores([r.arrays for r in rs], 1).tolist() == [1 + 4, 1 + 1, 1 + 1, 1 + 4, 97**2 + 98**2]
    assert [r.client_id for r in RobustAggregation("krum", f=1).select(rs)] == [1]  # the tie 1/2: the earlier reply, as numpy's argmin
    assert sorted(r.client_id for r in RobustAggregation("multi_krum", f=1).select(rs)) == [0, 1, 2, 3]  # m = n - f


def test_the_median_keeps_integer_arrays_and_ignores_example_counts():
    rs = replies(5, outliers=2)
    out = RobustAggregation("median").select(rs)
    assert len(out) == 1 and out[0].num_examples == sum(r.num_examples for r in rs)
    assert out[0].arrays["model.bn.count"].item() == 7 and out[0].arrays["model.bn.count"].dtype == torch.int64
    stacked = torch.stack([r.arrays["model.fc.bias"] for r in rs])
    assert torch.equal(out[0].arrays["model.fc.bias"], stacked.median(dim=0).values)  # odd n: the middle value itself


def test_mean_is_the_algorithm_itself():
    algorithm = mean_algorithm()
    assert with_robust_aggregation(algorithm, RobustAggregation("mean")) is algorithm


def test_a_server_optimizer_steps_on_the_robust_aggregate(image_task):
    """fedadam with aggregation = 'median': x_1 = x_0 + Adam's step on Delta = median - x_0 (robust rule first, then the server)."""
    algorithm = fedadam(image_task, Runtime(1, 4), aggregation_rule="median", server_lr=0.01)
    state = algorithm.init(INFO)
    names = [k for k in state if k.startswith(MODEL) and state[k].is_floating_point()]
    g = torch.Generator().manual_seed(1)
    rs = [Reply({k: v + 0.1 * torch.randn(v.shape, generator=g) for k, v in state.items() if k.startswith(MODEL)}, 5 + i, client_id=i) for i in range(5)]
    median = RobustAggregation("median").select(rs)[0].arrays
    expected = with_server_optimizer(mean_algorithm().with_(init=lambda info: dict(state)), ServerOptimizer("adam", lr=0.01), names)
    want = expected.aggregate(expected.init(INFO), [Reply(median, 1)], INFO)
    got = algorithm.aggregate(state, rs, INFO)
    for name in names:
        torch.testing.assert_close(got[name], want[name])


def test_malicious_clients_are_fixed_by_the_seed():
    a, b = malicious_clients(0, 100, 0.3), malicious_clients(0, 100, 0.3)
    assert a == b and len(a) == 30 and malicious_clients(1, 100, 0.3) != a
    assert malicious_clients(0, 10, 0.0) == frozenset()


def attacked_reply(attack: str, scale: float, client: int) -> tuple[Broadcast, Reply, dict]:
    """The reply of ``client`` (3 and 5 are malicious) whose honest model is x + u, under ``attack``; what its update saw as data."""
    x, u = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.5, 0.25, -1.0])
    seen = {}

    def client_update(message, state, data, info):
        seen.update(data)
        return Reply({"model.w": message.arrays["model.w"] + u, "extra.v": torch.ones(2)}, num_examples=3), state

    algorithm = with_attack(mean_algorithm().with_(client_update=client_update), Misbehaviour(attack, scale, frozenset({3, 5}), num_classes=10))
    message = Broadcast({"model.w": x})
    reply, _ = algorithm.client_update(message, {}, {"x": torch.zeros(2, 1), "y": torch.tensor([0, 7])}, ClientInfo(0, "federated", 2, client))
    return message, reply, seen


def test_attacks_change_the_update_of_malicious_clients_only():
    x, u = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.5, 0.25, -1.0])
    assert torch.equal(attacked_reply("sign_flip", 4.0, 3)[1].arrays["model.w"], x - 4 * u)
    assert torch.equal(attacked_reply("scaled", 10.0, 5)[1].arrays["model.w"], x + 10 * u)
    assert torch.equal(attacked_reply("sign_flip", 4.0, 4)[1].arrays["model.w"], x + u)  # an honest client
    noisy = attacked_reply("gaussian", 2.0, 3)[1].arrays
    assert torch.equal(noisy["model.w"], x + 2.0 * torch.randn(3, generator=ClientInfo(0, "federated", 2, 3).generator("attack")))
    assert torch.equal(noisy["extra.v"], torch.ones(2))  # not in the broadcast: no update to attack
    _, reply, seen = attacked_reply("label_flip", 1.0, 5)
    assert seen["y"].tolist() == [9, 2] and torch.equal(reply.arrays["model.w"], x + u)  # y -> C - 1 - y, the reply as trained
    assert attacked_reply("label_flip", 1.0, 4)[2]["y"].tolist() == [0, 7]


BAD = [
    (["algorithm.aggregation_rule=trimmed_mean", "algorithm.trim_fraction=0.5"], "algorithm.trim_fraction: trimming beta = 0.5 of the clients at each end"),
    (["algorithm.aggregation_rule=krum", "algorithm.krum_f=4"], "algorithm.krum_f: Krum tolerating f = 4 Byzantine clients needs n >= 2f + 3 = 11"),
    (["algorithm.aggregation_rule=multi_krum", "algorithm.krum_f=2", "algorithm.krum_m=9"], "algorithm.krum_m: Multi-Krum averages m <= n - f = 8"),
    (
        ["algorithm.aggregation_rule=median", "algorithm.krum_f=2"],
        "algorithm.krum_f: applies with algorithm.aggregation_rule = 'krum' or 'multi_krum', not with 'median'",
    ),
    (["algorithm.aggregation_rule=mode"], "algorithm.aggregation_rule: input should be 'mean', 'median', 'trimmed_mean', 'krum' or 'multi_krum'"),
    (["federation.malicious_fraction=1.0", "federation.attack=sign_flip"], "federation.malicious_fraction: input should be less than 1"),
    (["federation.malicious_fraction=-0.1", "federation.attack=sign_flip"], "federation.malicious_fraction: input should be greater than or equal to 0"),
    (
        ["federation.malicious_fraction=0.2", "federation.attack=flip"],
        "federation.attack: input should be 'none', 'sign_flip', 'scaled', 'gaussian' or 'label_flip'",
    ),
    (["federation.malicious_fraction=0.2"], "federation.attack: needed with federation.malicious_fraction > 0"),
    (["federation.attack=gaussian"], "federation.malicious_fraction: needed with federation.attack = 'gaussian'"),
    (
        ["federation.malicious_fraction=0.2", "federation.attack=label_flip", "federation.attack_scale=2"],
        "federation.attack_scale: applies with federation.attack",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_values_are_one_line_naming_the_field(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config("fedavg-cnn", overrides)
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


@pytest.mark.parametrize(("preset", "field"), [("scaffold-cnn", "algorithm.aggregation_rule=median"), ("feddb", "algorithm.krum_f=1")])
def test_algorithms_whose_aggregate_is_no_mean_of_models_are_refused_by_name(preset, field):
    with pytest.raises(ConfigError) as error:
        load_config(preset, [field])
    text = str(error.value)
    assert f"algorithm.{field.split('.')[1].split('=')[0]}: robust aggregation replaces a mean of client models; algorithm '{preset.split('-')[0]}'" in text
    assert "accepted with: " in text and "fedavg" in text and "fedprox" in text and "\n" not in text


def test_an_attack_on_an_algorithm_without_model_replies_is_refused_by_name():
    with pytest.raises(ConfigError, match="federation.attack: simulated attacks act on clients whose reply is a model trained on labels; algorithm 'scaffold'"):
        load_config("scaffold-cnn", ["federation.attack=sign_flip", "federation.malicious_fraction=0.2"])


def test_the_preset_is_krum_under_attack():
    _, config = load_config("krum-fedavg-cnn")
    assert config.algorithm.hyperparameters()["aggregation_rule"] == "krum" and config.federation.attack != "none"
    assert config.federation.malicious_fraction > 0


def test_a_small_run_under_attack_is_repeatable(tmp_path):
    """The malicious clients and the Gaussian noise come from the run seed: two runs give the same model (digits, 1 round, 10 clients)."""
    import fedprior

    settings = {"data.dataset": "digits", "federation.num_clients": 10, "federation.fraction": 0.5, "federation.rounds": 1, "run.workers": 1, "run.threads": 1}
    attacked = {**settings, "federation.attack": "gaussian", "federation.malicious_fraction": 0.5}
    runs = [fedprior.run(fedprior.load_config("fedavg-cnn", attacked), run_dir=tmp_path / f"r{i}") for i in range(2)]
    assert runs[0].summary["state_sha256"] == runs[1].summary["state_sha256"]
    honest = fedprior.run(fedprior.load_config("fedavg-cnn", settings), run_dir=tmp_path / "h")
    assert honest.summary["state_sha256"] != runs[0].summary["state_sha256"]
