"""Client-level DP (``[privacy]``): clipping and noise as Flower's DP strategies compute them, adaptive clipping as
Andrew et al. 2021's Algorithm 1, epsilon as dp-accounting gives it, and one line for each bad value."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, Reply, RoundInfo
from fedprior.algorithms.pieces.differential_privacy import (
    CLIP_NORM,
    CONFIG_CLIP_NORM,
    METRIC_UNCLIPPED,
    NOISE_STD,
    RELEASES,
    ClientLevelDp,
    clip_update,
    noise_std,
    with_client_level_dp,
)
from fedprior.algorithms.pieces.tensors import weighted_mean
from fedprior.errors import ConfigError
from fedprior.experiments.config import load_config
from fedprior.privacy.accountant import ORDERS, Accounting

INFO = RoundInfo(seed=3, stage="federated", round=1)


def mean_algorithm(mean_aggregate: bool = True) -> Algorithm:
    """A stand-in whose replies are models and whose aggregate is their example-weighted mean (FedAvg's server)."""

    def client_update(message, state, data, info):  # "trains" to the model plus the step its data holds
        return Reply({k: v + data[k] for k, v in message.arrays.items()}, num_examples=int(data["n"])), state

    return Algorithm(
        name="mean",
        inputs=("x",),
        init=lambda info: {"w": torch.zeros(3, 4), "b": torch.zeros(5)},
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=client_update,
        aggregate=lambda state, replies, info: {**state, **weighted_mean([r.arrays for r in replies], [r.num_examples for r in replies])},
        evaluate=lambda state, data: {"accuracy": 0.0},
        mean_aggregate=mean_aggregate,
    )


def updates(seed: int = 0) -> tuple[dict[str, torch.Tensor], list[Reply]]:
    """The global model and four replies: two with updates above C = 1, two below (norms about 6, 3, 0.3, 0.06)."""
    g = torch.Generator().manual_seed(seed)
    x = {"w": torch.randn(3, 4, generator=g), "b": torch.randn(5, generator=g)}
    scales = (1.5, 0.7, 0.07, 0.015)
    replies = [
        Reply({k: v + s * torch.randn(v.shape, generator=g) for k, v in x.items()}, num_examples=10 * (i + 1), client_id=i) for i, s in enumerate(scales)
    ]
    return x, replies


def test_clipping_and_noise_std_equal_flowers_dp_strategy_on_the_same_updates():
    dp_flower = pytest.importorskip("flwr.supercore.differential_privacy")
    x, replies = updates()
    dp = ClientLevelDp("server", noise_multiplier=1.3, clip_norm=1.0, denominator=4)
    algorithm = with_client_level_dp(mean_algorithm(), dp)
    state = {**algorithm.init(INFO), **x}
    out = algorithm.aggregate(state, replies, INFO)
    # Flower's server-side fixed clipping: each reply becomes x + clip(reply - x), then FedAvg's mean of them
    theirs = []
    for reply in replies:
        arrays = [reply.arrays[k].numpy().astype(np.float64) for k in ("w", "b")]
        dp_flower.compute_clip_model_update(arrays, [x[k].numpy().astype(np.float64) for k in ("w", "b")], 1.0)
        theirs.append(arrays)
    clipped_mean = [np.mean([t[i] for t in theirs], axis=0) for i in range(2)]
    sigma = dp_flower.compute_stdv(1.3, 1.0, 4)
    assert float(out[NOISE_STD]) == sigma == noise_std(1.3, 1.0, 4)
    # the noise is N(0, sigma^2) from the round's seeded server stream, drawn in key order; the rest is Flower's clipped mean
    generator = INFO.generator("privacy", "noise")
    noise = {k: torch.randn(x[k].shape, generator=generator, dtype=torch.float64) * sigma for k in ("b", "w")}
    for i, k in enumerate(("w", "b")):
        np.testing.assert_allclose(out[k].double().numpy(), clipped_mean[i] + noise[k].numpy(), rtol=1e-5, atol=1e-6)
    # the same updates clipped by fedprior's own function
    for reply, flower_arrays in zip(replies, theirs, strict=True):
        ours, _ = clip_update({k: reply.arrays[k].double() - x[k].double() for k in ("w", "b")}, 1.0)
        for i, k in enumerate(("w", "b")):
            np.testing.assert_allclose((x[k].double() + ours[k]).numpy(), flower_arrays[i], rtol=1e-12)


def test_the_noise_has_the_std_it_reports():
    x = {"w": torch.zeros(200_000)}
    algorithm = with_client_level_dp(mean_algorithm().with_(init=lambda info: dict(x)), ClientLevelDp("server", 2.0, 0.5, denominator=10))
    out = algorithm.aggregate(algorithm.init(INFO), [Reply({"w": torch.zeros(200_000)}, 1, client_id=0)], INFO)
    assert float(out[NOISE_STD]) == 0.1
    assert out["w"].std().item() == pytest.approx(0.1, rel=0.01)


def test_client_side_clipping_clips_on_the_client_and_the_server_only_adds_noise():
    x, replies = updates()
    dp = ClientLevelDp("client", noise_multiplier=1.0, clip_norm=1.0, denominator=4)
    server_side = with_client_level_dp(mean_algorithm(), ClientLevelDp("server", 1.0, 1.0, 4))
    client_side = with_client_level_dp(mean_algorithm(), dp)
    state = {**client_side.init(INFO), **x}
    message = client_side.broadcast(state, INFO)
    assert message.config[CONFIG_CLIP_NORM] == 1.0 and CONFIG_CLIP_NORM not in server_side.broadcast(state, INFO).config
    sent = []
    for reply in replies:
        data = {**{k: reply.arrays[k] - x[k] for k in x}, "n": torch.tensor(reply.num_examples)}
        out, _ = client_side.client_update(message, {}, data, INFO.for_client(reply.client_id))
        assert float(torch.cat([(out.arrays[k] - x[k]).flatten() for k in x]).norm()) <= 1.0 + 1e-5
        sent.append(Reply(out.arrays, out.num_examples, out.metrics, reply.client_id))
    assert [r.metrics[METRIC_UNCLIPPED] for r in sent] == [0.0, 0.0, 1.0, 1.0]
    ours, theirs = client_side.aggregate(state, sent, INFO), server_side.aggregate(state, replies, INFO)
    for k in x:
        torch.testing.assert_close(ours[k], theirs[k])


def test_adaptive_clipping_steps_c_geometrically_on_the_noised_unclipped_fraction():
    flower = pytest.importorskip("flwr.supercore.differential_privacy")
    x, replies = updates()
    dp = ClientLevelDp("server", 0.5, 1.0, denominator=4, adaptive=True, target_quantile=0.5, clip_lr=0.2, count_stddev=1.0)
    # z_Delta = (z^-2 - (2 sigma_b)^-2)^(-1/2) (Andrew et al. 2021, Theorem 1), as Flower computes it
    assert dp.update_noise_multiplier == flower.compute_adaptive_noise_params(0.5, 4, 1.0)[1]
    algorithm = with_client_level_dp(mean_algorithm(), dp)
    out = algorithm.aggregate({**algorithm.init(INFO), **x}, replies, INFO)
    count_noise = torch.randn((), generator=INFO.generator("privacy", "count"), dtype=torch.float64).item()
    b = (2 + 1.0 * count_noise) / 4  # two of the four updates are within C = 1
    assert float(out[CLIP_NORM]) == pytest.approx(math.exp(-0.2 * (b - 0.5)), rel=1e-12)
    assert float(out[NOISE_STD]) == pytest.approx(dp.update_noise_multiplier * 1.0 / 4)  # the noise of the C the round clipped to
    assert algorithm.round_metrics is not None
    metrics = algorithm.round_metrics(out)
    assert metrics["dp_clip_norm"] == 1.0 and metrics["dp_unclipped_fraction"] == pytest.approx(b)


def test_fewer_replies_than_sampled_keep_the_fixed_denominator():
    x = {"w": torch.zeros(4)}
    dp = ClientLevelDp("server", 1e-9, 10.0, denominator=4)  # almost no noise
    algorithm = with_client_level_dp(mean_algorithm().with_(init=lambda info: dict(x)), dp)
    out = algorithm.aggregate(algorithm.init(INFO), [Reply({"w": torch.ones(4)}, 5, client_id=0)], INFO)
    torch.testing.assert_close(out["w"], torch.full((4,), 0.25))  # sum / m (McMahan et al. 2018, Sec. 2), not the mean of one


def rdp(z: float, n: int, m: int, rounds: int, sampling: str = "poisson") -> float:
    """fedprior's RDP epsilon at 1e-5: Poisson with q = m / n, or m of n without replacement."""
    return Accounting(z, n, sampling, m / n, m, "rdp", 1e-5).epsilon(rounds)  # type: ignore[arg-type]


def test_rdp_epsilon_equals_dp_accounting_computed_directly():
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_accountant

    # every client every round: T Gaussian mechanisms, RDP T alpha / (2 z^2) in closed form (Mironov, "Renyi Differential Privacy", 2017)
    closed_form = [20 * a / (2 * 1.5**2) for a in ORDERS]
    assert rdp(1.5, 10, 10, 20) == pytest.approx(rdp_accountant.compute_epsilon(ORDERS, closed_form, 1e-5)[0], rel=1e-9)
    # q = 0.1: the rounds composed one at a time in dp-accounting's own accountant
    accountant = dp_accounting.rdp.RdpAccountant(ORDERS)
    for _ in range(20):
        accountant.compose(dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.0)))
    assert rdp(1.0, 100, 10, 20) == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-9)
    assert 3 < rdp(1.0, 100, 10, 20) < 5  # DP-SGD's familiar range for q = 0.1, z = 1, 20 steps at 1e-5
    assert rdp(1.0, 100, 10, 0) == 0.0
    assert rdp(1.0, 100, 10, 5) < rdp(1.0, 100, 10, 10)
    # fixed-size sampling, replace-one: noise multiplier z / 2 on the sum's sensitivity 2C
    replace_one = dp_accounting.rdp.RdpAccountant(ORDERS, dp_accounting.NeighboringRelation.REPLACE_ONE)
    replace_one.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(0.5)), 20))
    assert rdp(1.0, 100, 10, 20, "fixed-size") == pytest.approx(replace_one.get_epsilon(1e-5), rel=1e-9)


FEDAVG = ["data.dataset=digits", "federation.num_clients=6", "federation.fraction=0.5", "federation.rounds=3"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["privacy.dp=server", "privacy.noise_multiplier=-1"], "privacy.noise_multiplier: input should be greater than 0 (got -1)"),
        (["privacy.dp=server", "privacy.noise_multiplier=0"], "privacy.noise_multiplier: input should be greater than 0 (got 0)"),
        (["privacy.dp=server", "privacy.delta=1"], "privacy.delta: input should be less than 1 (got 1)"),
        (["privacy.dp=server", "privacy.delta=0"], "privacy.delta: input should be greater than 0 (got 0)"),
        (["privacy.dp=server", "privacy.clip_norm=0"], "privacy.clip_norm: input should be greater than 0 (got 0)"),
        (["privacy.dp=laplace"], "privacy.dp: input should be 'none', 'server', 'client' or 'sample' (got 'laplace')"),
        (["privacy.noise_multiplier=2"], "privacy.noise_multiplier: applies with privacy.dp = 'server' or 'client', not 'none'"),
        (["privacy.dp=client", "privacy.target_quantile=0.7"], "privacy.target_quantile: applies with privacy.clipping = 'adaptive', not 'fixed'"),
        (
            ["privacy.dp=server", "privacy.clipping=adaptive"],
            "privacy.noise_multiplier: 1 must be below 2 * privacy.count_stddev = 0.3 (unset: the expected clients a round / 20)",
        ),
    ],
)
def test_bad_privacy_settings_are_one_line_naming_the_field(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config("fedavg-cnn", [*FEDAVG, *overrides])
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_an_algorithm_whose_aggregate_is_not_the_mean_of_models_is_refused():
    with pytest.raises(ConfigError, match=r"^privacy.dp: algorithm 'mean' reads its clients' replies other than through their mean"):
        with_client_level_dp(mean_algorithm(mean_aggregate=False), ClientLevelDp("server", 1.0, 1.0, 4))
    x, _ = updates()
    algorithm = with_client_level_dp(mean_algorithm(), ClientLevelDp("server", 1.0, 1.0, 4))
    with pytest.raises(ConfigError, match=r"^privacy.dp: algorithm 'mean' replies with 'extra', which is no array of the model"):
        algorithm.aggregate({**algorithm.init(INFO), **x}, [Reply({**x, "extra": torch.zeros(2)}, 1)], INFO)


def test_a_server_optimizer_steps_on_the_noised_mean():
    from fedprior.algorithms.pieces.server_optimizers import ServerOptimizer, with_server_optimizer

    x, replies = updates()
    dp = ClientLevelDp("server", 1.3, 1.0, 4)
    plain = with_client_level_dp(mean_algorithm(), dp)
    # FedAvgM with server lr 1 and momentum 0 is FedAvg: the same private model, so the step came after the noise
    stepped = with_client_level_dp(with_server_optimizer(mean_algorithm(), ServerOptimizer("avgm", lr=1.0, momentum=0.0), ["w", "b"]), dp)
    a, b = plain.aggregate({**plain.init(INFO), **x}, replies, INFO), stepped.aggregate({**stepped.init(INFO), **x}, replies, INFO)
    for k in x:
        torch.testing.assert_close(a[k], b[k])
    adam = with_client_level_dp(with_server_optimizer(mean_algorithm(), ServerOptimizer("adam", lr=0.01), ["w", "b"]), dp)
    moved = adam.aggregate({**adam.init(INFO), **x}, replies, INFO)
    assert all(float((moved[k] - x[k]).abs().max()) <= 0.01 + 1e-6 for k in x)  # Adam's first step: at most lr a coordinate
    with pytest.raises(ConfigError, match=r"^privacy.dp: algorithm 'mean' reads its clients' replies other than through their mean"):
        with_client_level_dp(mean_algorithm().with_(aggregate=lambda state, replies, info: state), dp)


@pytest.mark.slow
def test_a_dp_run_resumed_after_round_1_ends_with_the_numbers_of_an_uninterrupted_run(tmp_path, shared_cache):
    from fedprior.experiments.runner import resume, start
    from fedprior.runtime.checkpoint import load_checkpoint

    tiny = [*FEDAVG, "privacy.dp=server", "privacy.clipping=adaptive", "privacy.noise_multiplier=0.5", "privacy.count_stddev=1", "run.threads=1"]
    name, two = load_config("fedavg-cnn", [*tiny, "federation.rounds=2"])
    whole = start(name, two, tmp_path / "whole", report_extras=False)
    first = start(*load_config("fedavg-cnn", [*tiny, "federation.rounds=1"]), tmp_path / "stopped", report_extras=False)
    assert len(first["dp_epsilon_per_round"]) == 1
    resumed = resume(tmp_path / "stopped", config=two, report_extras=False)
    assert resumed["dp_epsilon_per_round"] == whole["dp_epsilon_per_round"] and resumed["history"] == whole["history"]
    a, b = (load_checkpoint(tmp_path / d / "checkpoint.safetensors").server for d in ("whole", "stopped"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # the model, C's estimate, the releases counted


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
