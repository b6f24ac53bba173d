"""Server optimizers (Reddi et al., ICLR 2021, Algorithm 2; Hsu et al. 2019) against hand computations, and composed with FedProx and SCAFFOLD."""

import math

import pytest
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.fedprox import fedprox
from fedprior.algorithms.pieces.server_optimizers import FIELDS, ServerOptimizer, checked_server_optimizer, with_server_optimizer
from fedprior.algorithms.pieces.tensors import MODEL, weighted_mean, with_prefix
from fedprior.algorithms.registry import ALGORITHMS, algorithm_spec
from fedprior.algorithms.scaffold import scaffold
from fedprior.errors import ConfigError
from tests.support.cli import error_line, invoke
from tests.support.toy_data import toy_images

FEATURES = Task(num_classes=3, input_shape=(4,), class_names=("a", "b", "c"), num_clients=10)
INFO = RoundInfo(seed=0, stage="federated", round=1)

DELTAS = ([0.5, -1.0], [1.0, 0.5], [-0.2, 0.25])
"""Delta_t of rounds 1-3, two coordinates; x_0 = (1, -2)."""


def toy_algorithm() -> Algorithm:
    """An algorithm whose aggregate is the example-weighted mean of the replies' models and counts its rounds in ``control.c``."""

    def init(info):
        return {"model.w": torch.tensor([1.0, -2.0]), "model.bn.mean": torch.tensor([0.0]), "model.bn.count": torch.tensor(0), "control.c": torch.tensor(0.0)}

    def aggregate(state, replies, info):
        assert not [k for k in state if k.startswith("server_optimizer.")]  # the algorithm never sees the optimizer's slots
        mean = weighted_mean([with_prefix(r.arrays, MODEL) for r in replies], [r.num_examples for r in replies])
        return {**state, **{MODEL + k: v for k, v in mean.items()}, "control.c": state["control.c"] + 1}

    def client_update(*args):
        raise AssertionError("no client runs here")

    return Algorithm(
        name="toy",
        inputs=("x",),
        init=init,
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=client_update,
        aggregate=aggregate,
        evaluate=lambda state, data: {"accuracy": 0.0},
    )


def three_rounds(optimizer: ServerOptimizer) -> list[dict[str, torch.Tensor]]:
    """The server states after rounds 1-3 when the clients' example-weighted mean is x_t + Delta_t (two replies, weights 1 and 3)."""
    algorithm = with_server_optimizer(toy_algorithm(), optimizer, ["model.w"])
    state, states = algorithm.init(INFO), []
    for t, delta in enumerate(DELTAS):
        assert set(algorithm.broadcast(state, INFO).arrays) == {"model.w", "model.bn.mean", "model.bn.count", "control.c"}
        target = state["model.w"] + torch.tensor(delta)
        spread = torch.tensor([0.4, 0.8])
        replies = [
            Reply({"model.w": target + spread, "model.bn.mean": torch.tensor([4.0 * t]), "model.bn.count": torch.tensor(7 + t)}, num_examples=1),
            Reply({"model.w": target - spread / 3, "model.bn.mean": torch.tensor([0.0]), "model.bn.count": torch.tensor(9)}, num_examples=3),
        ]
        state = algorithm.aggregate(state, replies, INFO)
        assert torch.equal(state["model.bn.mean"], torch.tensor([1.0 * t]))  # a buffer: the plain (weighted) average, no optimizer step
        assert state["model.bn.count"].item() == 7 + t and state["control.c"].item() == t + 1  # the aggregate's own values
        states.append(state)
    return states


def close(tensor: torch.Tensor, values: list[float]) -> bool:
    return torch.allclose(tensor, torch.tensor(values), rtol=1e-5, atol=1e-6)


def test_fedavgm_by_hand():
    """v_t = beta v_{t-1} + Delta_t, x_{t+1} = x_t + eta v_t; eta = 0.5, beta = 0.9."""
    s1, s2, s3 = three_rounds(ServerOptimizer("avgm", lr=0.5, momentum=0.9))
    v1 = [0.5, -1.0]
    v2 = [0.9 * 0.5 + 1.0, 0.9 * -1.0 + 0.5]  # 1.45, -0.4
    v3 = [0.9 * 1.45 - 0.2, 0.9 * -0.4 + 0.25]  # 1.105, -0.11
    assert close(s1["server_optimizer.v.model.w"], v1) and close(s2["server_optimizer.v.model.w"], v2) and close(s3["server_optimizer.v.model.w"], v3)
    assert close(s1["model.w"], [1.0 + 0.5 * 0.5, -2.0 + 0.5 * -1.0])  # 1.25, -2.5
    assert close(s2["model.w"], [1.25 + 0.5 * 1.45, -2.5 + 0.5 * -0.4])  # 1.975, -2.7
    assert close(s3["model.w"], [1.975 + 0.5 * 1.105, -2.7 + 0.5 * -0.11])


def test_fedadagrad_by_hand():
    """m_t = beta1 m + (1 - beta1) Delta, v_t = v + Delta^2, x + eta m / (sqrt(v) + tau); eta = 0.1, beta1 = 0.5, tau = 0.01."""
    s1, s2, s3 = three_rounds(ServerOptimizer("adagrad", lr=0.1, beta1=0.5, tau=0.01))
    m1, v1 = [0.25, -0.5], [0.25, 1.0]
    x1 = [1.0 + 0.1 * 0.25 / (0.5 + 0.01), -2.0 + 0.1 * -0.5 / (1.0 + 0.01)]
    m2, v2 = [0.5 * 0.25 + 0.5 * 1.0, 0.5 * -0.5 + 0.5 * 0.5], [0.25 + 1.0, 1.0 + 0.25]  # (0.625, 0), (1.25, 1.25)
    x2 = [x1[0] + 0.1 * 0.625 / (math.sqrt(1.25) + 0.01), x1[1] + 0.0]
    m3, v3 = [0.5 * 0.625 + 0.5 * -0.2, 0.5 * 0.0 + 0.5 * 0.25], [1.25 + 0.04, 1.25 + 0.0625]  # (0.2125, 0.125), (1.29, 1.3125)
    x3 = [x2[0] + 0.1 * 0.2125 / (math.sqrt(1.29) + 0.01), x2[1] + 0.1 * 0.125 / (math.sqrt(1.3125) + 0.01)]
    assert close(s1["server_optimizer.m.model.w"], m1) and close(s1["server_optimizer.v.model.w"], v1) and close(s1["model.w"], x1)
    assert close(s2["server_optimizer.m.model.w"], m2) and close(s2["server_optimizer.v.model.w"], v2) and close(s2["model.w"], x2)
    assert close(s3["server_optimizer.m.model.w"], m3) and close(s3["server_optimizer.v.model.w"], v3) and close(s3["model.w"], x3)


def test_fedadam_by_hand():
    """v_t = beta2 v + (1 - beta2) Delta^2, no bias correction (Algorithm 2); eta = 0.1, beta1 = 0.5, beta2 = 0.5, tau = 0.01."""
    s1, s2, s3 = three_rounds(ServerOptimizer("adam", lr=0.1, beta1=0.5, beta2=0.5, tau=0.01))
    v1 = [0.5 * 0.25, 0.5 * 1.0]  # 0.125, 0.5
    x1 = [1.0 + 0.1 * 0.25 / (math.sqrt(0.125) + 0.01), -2.0 + 0.1 * -0.5 / (math.sqrt(0.5) + 0.01)]
    v2 = [0.5 * 0.125 + 0.5 * 1.0, 0.5 * 0.5 + 0.5 * 0.25]  # 0.5625, 0.375
    x2 = [x1[0] + 0.1 * 0.625 / (0.75 + 0.01), x1[1] + 0.0]  # m2 = (0.625, 0) as in FedAdagrad
    v3 = [0.5 * 0.5625 + 0.5 * 0.04, 0.5 * 0.375 + 0.5 * 0.0625]  # 0.30125, 0.21875
    x3 = [x2[0] + 0.1 * 0.2125 / (math.sqrt(0.30125) + 0.01), x2[1] + 0.1 * 0.125 / (math.sqrt(0.21875) + 0.01)]
    assert close(s1["server_optimizer.v.model.w"], v1) and close(s1["model.w"], x1)
    assert close(s2["server_optimizer.v.model.w"], v2) and close(s2["model.w"], x2)
    assert close(s3["server_optimizer.m.model.w"], [0.2125, 0.125]) and close(s3["server_optimizer.v.model.w"], v3) and close(s3["model.w"], x3)


def test_fedyogi_by_hand():
    """v_t = v - (1 - beta2) Delta^2 sign(v - Delta^2): v grows where Delta^2 > v (round 2, first coordinate), shrinks elsewhere."""
    s1, s2, s3 = three_rounds(ServerOptimizer("yogi", lr=0.1, beta1=0.5, beta2=0.5, tau=0.01))
    v1 = [0.0 + 0.5 * 0.25, 0.0 + 0.5 * 1.0]  # sign(0 - Delta^2) = -1: 0.125, 0.5
    x1 = [1.0 + 0.1 * 0.25 / (math.sqrt(0.125) + 0.01), -2.0 + 0.1 * -0.5 / (math.sqrt(0.5) + 0.01)]
    v2 = [0.125 + 0.5 * 1.0, 0.5 - 0.5 * 0.25]  # 1.0 > 0.125: grows to 0.625; 0.25 < 0.5: shrinks to 0.375
    x2 = [x1[0] + 0.1 * 0.625 / (math.sqrt(0.625) + 0.01), x1[1] + 0.0]
    v3 = [0.625 - 0.5 * 0.04, 0.375 - 0.5 * 0.0625]  # both shrink: 0.605, 0.34375
    x3 = [x2[0] + 0.1 * 0.2125 / (math.sqrt(0.605) + 0.01), x2[1] + 0.1 * 0.125 / (math.sqrt(0.34375) + 0.01)]
    assert close(s1["server_optimizer.v.model.w"], v1) and close(s1["model.w"], x1)
    assert close(s2["server_optimizer.v.model.w"], v2) and close(s2["model.w"], x2)
    assert close(s3["server_optimizer.v.model.w"], v3) and close(s3["model.w"], x3)


def test_server_optimizer_none_is_the_algorithm_itself():
    algorithm = toy_algorithm()
    assert with_server_optimizer(algorithm, ServerOptimizer("none"), ["model.w"]) is algorithm


def linear_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(n, 4, generator=g), "y": torch.randint(0, 3, (n,), generator=g)}


def test_fedprox_clients_under_a_fedadam_server_by_hand():
    """Composition: FedProx's clients are untouched (the same replies as plain FedProx); the server's step is
    FedAdam's on Delta = the example-weighted mean of the replies - x, computed here from the replies."""
    runtime, hyper = Runtime(2, 4), dict(model="linear", lr=0.5, mu=0.1)
    adam = fedprox(FEATURES, runtime, **hyper, server_optimizer="adam", server_lr=0.05, beta1=0.9, beta2=0.99, tau=1e-3)
    plain = fedprox(FEATURES, runtime, **hyper)
    state, plain_state = adam.init(INFO), plain.init(INFO)
    params = [MODEL + "weight", MODEL + "bias"]
    assert set(state) == {*plain_state, *(f"server_optimizer.{s}.{p}" for s in "mv" for p in params)}
    assert all(torch.equal(state[k], plain_state[k]) for k in plain_state)
    message = adam.broadcast(state, INFO)
    assert set(message.arrays) == set(plain.broadcast(plain_state, INFO).arrays)
    datas = [linear_data(8, 0), linear_data(12, 1)]
    replies = [adam.client_update(message, {}, d, INFO.for_client(c))[0] for c, d in enumerate(datas)]
    plain_replies = [plain.client_update(message, {}, d, INFO.for_client(c))[0] for c, d in enumerate(datas)]
    assert all(torch.equal(a.arrays[k], b.arrays[k]) for a, b in zip(replies, plain_replies, strict=True) for k in a.arrays)
    new = adam.aggregate(state, replies, INFO)
    for p in params:
        delta = (8 * replies[0].arrays[p] + 12 * replies[1].arrays[p]) / 20 - state[p]
        m, v = 0.1 * delta, 0.01 * delta**2
        assert torch.allclose(new[p], state[p] + 0.05 * m / (v.sqrt() + 1e-3), atol=1e-6)
        assert torch.allclose(new["server_optimizer.m." + p], m, atol=1e-7) and torch.allclose(new["server_optimizer.v." + p], v, atol=1e-8)
        assert not torch.allclose(new[p], plain.aggregate(plain_state, replies, INFO)[p])  # not FedAvg's step


def test_scaffold_under_fedavgm_steps_the_parameters_and_averages_the_buffers(image_task):
    """SCAFFOLD's control variates are its own aggregate's; the parameters take FedAvgM's step on SCAFFOLD's
    unweighted mean; BatchNorm's running statistics are that mean and its integer counter the first reply's."""
    runtime, hyper = Runtime(1, 8), dict(model="convnet-small", lr=0.05)
    avgm = scaffold(image_task, runtime, **hyper, server_optimizer="avgm", server_lr=0.5, server_momentum=0.9)
    plain = scaffold(image_task, runtime, **hyper)
    state = avgm.init(INFO)
    replies = [avgm.client_update(avgm.broadcast(state, INFO), {}, toy_images(16, seed), INFO.for_client(seed))[0] for seed in (0, 1)]
    new, reference = avgm.aggregate(state, replies, INFO), plain.aggregate(plain.init(INFO), replies, INFO)
    parameters = {k for k in new if k.startswith("server_optimizer.v.")}
    assert parameters and all(torch.equal(new[k], reference[k]) for k in reference if k.startswith("control."))
    for k, value in new.items():
        if not k.startswith(MODEL):
            continue
        mean = (replies[0].arrays[k] + replies[1].arrays[k]) / 2 if value.is_floating_point() else replies[0].arrays[k]
        if "server_optimizer.v." + k in parameters:  # round 1: v = Delta, x + 0.5 Delta
            assert torch.allclose(new["server_optimizer.v." + k], mean - state[k], atol=1e-6)
            assert torch.allclose(value, state[k] + 0.5 * (mean - state[k]), atol=1e-6)
        else:
            assert "running" in k or "num_batches" in k
            assert torch.allclose(value, mean, atol=1e-6) if value.is_floating_point() else torch.equal(value, mean)


@pytest.mark.parametrize(
    "name, values, message",
    [
        (
            "fedprox",
            {"server_lr": 0.1},
            "algorithm.server_lr: applies with algorithm.server_optimizer = 'avgm' or 'adagrad' or 'adam' or 'yogi', not with 'none'",
        ),
        (
            "fedprox",
            {"server_optimizer": "adam", "server_momentum": 0.9},
            "algorithm.server_momentum: applies with algorithm.server_optimizer = 'avgm', not with 'adam'",
        ),
        ("fedprox", {"server_optimizer": "adagrad", "beta2": 0.9}, "algorithm.beta2: applies with .*'adam' or 'yogi', not with 'adagrad'"),
        ("scaffold", {"server_optimizer": "avgm", "global_lr": 0.5}, "algorithm.global_lr: is plain SCAFFOLD's server step; .*algorithm.server_lr"),
        ("fedadam", {"server_optimizer": "adam"}, "algorithm.server_optimizer: unknown key"),
    ],
)
def test_server_hyperparameters_that_do_not_apply_are_refused(name, values, message):
    with pytest.raises(ConfigError, match=message):
        ALGORITHMS[name].build(FEATURES, {"model": "linear", **values}, Runtime(1, 4))


RULES = {"fedavgm": "avgm", "fedadagrad": "adagrad", "fedadam": "adam", "fedyogi": "yogi"}


def test_each_rule_has_one_set_of_defaults_as_an_algorithm_and_as_an_option():
    """The algorithm fedX and fedprox/scaffold's server_optimizer = X with every field unset step alike: FedAvgM lr 1 and momentum 0.9,
    the adaptive rules lr 0.01, FedAdagrad beta1 0 (no momentum), FedAdam and FedYogi beta1 0.9 and beta2 0.99, tau 1e-3."""
    expected = {
        "avgm": ServerOptimizer("avgm", lr=1.0, momentum=0.9),
        "adagrad": ServerOptimizer("adagrad", lr=0.01, beta1=0.0, tau=1e-3),
        "adam": ServerOptimizer("adam", lr=0.01, beta1=0.9, beta2=0.99, tau=1e-3),
        "yogi": ServerOptimizer("yogi", lr=0.01, beta1=0.9, beta2=0.99, tau=1e-3),
    }
    for name, rule in RULES.items():
        defaults = {k: p.default for k, p in ALGORITHMS[name].hyperparameters().items() if k in FIELDS.values()}
        assert ServerOptimizer(rule, **{attr: defaults[field] for attr, field in FIELDS.items() if field in defaults}) == expected[rule]
        for option in ("fedprox", "scaffold"):
            unset = {k: v for k, v in ALGORITHMS[option].validate({"server_optimizer": rule}).items() if k in FIELDS.values()}
            assert set(unset.values()) == {None}, unset
            assert checked_server_optimizer(server_optimizer=rule, **unset) == expected[rule]
    assert ServerOptimizer("adagrad") == expected["adagrad"] and ServerOptimizer("adagrad").beta2 is None


def test_an_option_field_at_its_old_fixed_default_is_taken_as_unset():
    """A config.toml written before each rule had its own defaults names server_momentum = 0.0, beta1 = 0.9, beta2 = 0.99 and
    tau = 0.001 whatever the rule: it still loads and steps as it did; another value of a field the rule does not read is refused."""
    old = {"server_lr": None, "server_momentum": 0.0, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3}
    assert checked_server_optimizer(server_optimizer="none", **old) == ServerOptimizer("none")
    assert checked_server_optimizer(server_optimizer="adagrad", **old) == ServerOptimizer("adagrad", lr=0.01, beta1=0.9, tau=1e-3)
    with pytest.raises(ConfigError, match="algorithm.beta2: applies with algorithm.server_optimizer = 'adam' or 'yogi', not with 'adagrad'"):
        checked_server_optimizer(server_optimizer="adagrad", **{**old, "beta2": 0.9})


def test_fedavg_cnn_with_algorithm_fedadam_is_the_fedadam_cnn_preset():
    """Issue 46: `fedprior run fedavg-cnn --algorithm fedadam` trained with server_lr 0.1 (10.92% after 2 rounds, the preset's
    0.01 52.59%); with one set of defaults per rule its config is the preset's, the description aside."""
    from fedprior.experiments.config import load_config

    for name in RULES:
        switched = load_config("fedavg-cnn", algorithm=name)[1].to_dict()
        preset = load_config(f"{name}-cnn")[1].to_dict()
        assert {**switched, "description": ""} == {**preset, "description": ""}, name


@pytest.mark.parametrize("rule, lr", [("avgm", 1.0), ("adagrad", 0.01), ("adam", 0.01), ("yogi", 0.01)])
def test_an_unset_server_lr_of_fedprox_is_the_rules_own(rule, lr):
    """server_lr left unset on fedprox: 1 for FedAvgM, 0.01 for the adaptive rules, the same step as setting it."""
    assert ALGORITHMS["fedprox"].validate({"server_optimizer": rule})["server_lr"] is None
    hyper = dict(model="linear", lr=0.5, server_optimizer=rule)
    unset, given, one = (fedprox(FEATURES, Runtime(1, 4), **hyper, **extra) for extra in ({}, {"server_lr": lr}, {"server_lr": 1.0 if lr != 1.0 else 0.5}))
    state = unset.init(INFO)
    replies = [unset.client_update(unset.broadcast(state, INFO), {}, linear_data(8, c), INFO.for_client(c))[0] for c in (0, 1)]
    stepped = unset.aggregate(state, replies, INFO)
    assert all(torch.equal(stepped[k], v) for k, v in given.aggregate(state, replies, INFO).items())
    assert not torch.equal(stepped[MODEL + "weight"], one.aggregate(state, replies, INFO)[MODEL + "weight"])


def test_a_diverged_run_under_a_server_optimizer_names_server_lr_too():
    from fedprior.runtime.divergence import DivergedError, check_global, screen_replies

    nan = {MODEL + "w": torch.tensor([float("nan")])}
    plain, stepped = {MODEL + "w": torch.zeros(1)}, {MODEL + "w": torch.zeros(1), "server_optimizer.v.model.w": torch.zeros(1)}
    for state, named in ((plain, False), (stepped, True)):
        messages = []
        with pytest.raises(DivergedError, match="lower algorithm.lr") as error:
            screen_replies([Reply(nan, num_examples=1)], "federated", 2, "stop", state)
        messages.append(str(error.value))
        with pytest.raises(DivergedError, match="lower algorithm.lr") as error:
            check_global({**state, **nan}, {}, "federated", 2)
        messages.append(str(error.value))
        for message in messages:
            assert ("lower algorithm.lr or algorithm.server_lr" in message) is named and ("server_lr" in message) is named


def test_a_config_written_before_the_rules_defaults_is_the_same_run_today():
    """A kept cell or grid folder names the option's old fixed defaults; the config planned today leaves them unset. They are the
    same run (no change reported to a grid or table --verify) unless the rule reads the field with another default (Adagrad's beta1)."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.resume_check import changes_that_matter

    written = ["algorithm.server_momentum=0.0", "algorithm.beta1=0.9", "algorithm.beta2=0.99", "algorithm.tau=0.001"]
    for rule, changed in (("none", {}), ("adam", {}), ("adagrad", {"algorithm.beta1": (0.9, None)})):
        rule_set = [f"algorithm.server_optimizer='{rule}'"]
        before, today = (load_config("fedprox-cnn", [*rule_set, *extra])[1].to_dict() for extra in (written, []))
        assert changes_that_matter(before, today) == changed, rule


def test_a_tau_that_float32_rounds_to_zero_is_refused_naming_tau():
    line = error_line(invoke("run", "fedyogi-cnn", "--set", "algorithm.tau=1e-50", "--dry-run"))
    assert line.startswith("error: algorithm.tau: input should be greater than or equal to 1e-38") and line.endswith("(got 1e-50)")
    assert algorithm_spec("fedyogi").validate({"tau": 1e-38})["tau"] == 1e-38
    assert float(torch.tensor(1e-50, dtype=torch.float32)) == 0 and float(torch.tensor(1e-38, dtype=torch.float32)) > 0
