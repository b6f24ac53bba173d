"""The server's check of client-side clipping (``privacy.dp = 'client'``): a client that skips the clip is caught and bounded,
honest clients pass untouched, bad bits are corrected; simulated attackers skip the clip; malicious ids are recorded."""

from __future__ import annotations

import json

import pytest
import torch

from fedprior.algorithms.base import Reply
from fedprior.algorithms.pieces.clip_check import checked_bit, norm_tolerance
from fedprior.algorithms.pieces.differential_privacy import METRIC_UNCLIPPED, ClientLevelDp, clipped_reply, flat_norm, with_client_level_dp
from fedprior.errors import ConfigError
from fedprior.experiments.config import load_config
from tests.algorithms.pieces.test_differential_privacy import INFO, mean_algorithm, updates


def client_sent(algorithm, state, x, replies):
    """Each reply as its client sends it under client-side clipping (clipped on the client, its bit in the metrics)."""
    message = algorithm.broadcast(state, INFO)
    out = []
    for reply in replies:
        data = {**{k: reply.arrays[k] - x[k] for k in x}, "n": torch.tensor(reply.num_examples)}
        sent, _ = algorithm.client_update(message, {}, data, INFO.for_client(reply.client_id))
        out.append(Reply(sent.arrays, sent.num_examples, sent.metrics, reply.client_id))
    return out


def test_a_client_that_skips_clipping_is_caught_and_its_update_clipped_by_the_server():
    x, replies = updates()
    algorithm = with_client_level_dp(mean_algorithm(), ClientLevelDp("client", 1.0, clip_norm=1.0, denominator=4))
    state = {**algorithm.init(INFO), **x}
    honest = client_sent(algorithm, state, x, replies)
    cheat = Reply(replies[0].arrays, 1, {METRIC_UNCLIPPED: 1.0}, 0)  # client 0 skips the clip (norm about 6 > C = 1) and claims b = 1
    assert float(flat_norm({k: cheat.arrays[k] - x[k] for k in x})) > 5
    out = algorithm.aggregate(state, [cheat, *honest[1:]], INFO)
    metrics = algorithm.round_metrics(out)
    assert metrics["dp_overnorm_replies"] == 1 and metrics["dp_checked_replies"] == 4
    assert metrics["dp_corrected_bits"] == 1  # it said b = 1 of an update above C
    # the aggregate is the one where its update arrived clipped to C (the server's FlatClip), the same noise
    clipped = clipped_reply(cheat, x, 1.0, "mean")[0]
    expected = algorithm.aggregate(state, [clipped, *honest[1:]], INFO)
    assert algorithm.round_metrics(expected)["dp_overnorm_replies"] == 0
    for k in x:
        assert torch.equal(out[k], expected[k]), k
    # honest clients alone pass untouched: nothing counted, nothing corrected
    clean = algorithm.round_metrics(algorithm.aggregate(state, honest, INFO))
    assert clean["dp_overnorm_replies"] == 0 and clean["dp_corrected_bits"] == 0


def test_with_drop_the_reply_above_c_counts_as_a_zero_update():
    x, replies = updates()
    dp = ClientLevelDp("client", 1.0, clip_norm=1.0, denominator=4, overnorm="drop")
    algorithm = with_client_level_dp(mean_algorithm(), dp)
    state = {**algorithm.init(INFO), **x}
    honest = client_sent(algorithm, state, x, replies)
    cheat = Reply(replies[0].arrays, 1, {METRIC_UNCLIPPED: 0.0}, 0)
    out = algorithm.aggregate(state, [cheat, *honest[1:]], INFO)
    assert algorithm.round_metrics(out)["dp_overnorm_replies"] == 1
    expected = algorithm.aggregate(state, [Reply(dict(x), 1, {METRIC_UNCLIPPED: 0.0}, 0), *honest[1:]], INFO)
    for k in x:
        assert torch.equal(out[k], expected[k]), k


def test_honest_float32_clips_are_never_flagged_however_large_the_model():
    algorithm = with_client_level_dp(mean_algorithm(), ClientLevelDp("client", 1.0, clip_norm=0.5, denominator=40))
    g = torch.Generator().manual_seed(1)
    for scale in (1.0, 1e3):  # weights of size 1000: their float32 rounding moves the recomputed norm more than C's own
        x = {"w": scale * torch.randn(3, 4, generator=g), "b": scale * torch.randn(5, generator=g)}
        state = {**algorithm.init(INFO), **x}
        replies = [Reply({k: v + s * torch.randn(v.shape, generator=g) for k, v in x.items()}, 1, client_id=i) for i, s in enumerate([0.5] * 40)]
        metrics = algorithm.round_metrics(algorithm.aggregate(state, client_sent(algorithm, state, x, replies), INFO))
        assert metrics["dp_overnorm_replies"] == 0 and metrics["dp_corrected_bits"] == 0, scale
    # and just beyond the tolerance is caught: an update of norm C (1 + 1e-4) on a model of norm about 1
    x = {"w": torch.ones(4) / 2}
    beyond = Reply({"w": x["w"] + 0.5 * (1 + 1e-4) * torch.tensor([1.0, 0, 0, 0])}, 1, {METRIC_UNCLIPPED: 0.0}, 0)
    state = {**algorithm.init(INFO), **x}
    assert 0.5e-4 > norm_tolerance(0.5, 1.0) and algorithm.round_metrics(algorithm.aggregate(state, [beyond], INFO))["dp_overnorm_replies"] == 1


@pytest.mark.parametrize(
    ("sent", "norm", "counted", "corrected"),
    [
        (1.0, 0.3, 1.0, False),  # honest: within C
        (0.0, 1.0, 0.0, False),  # honest: clipped to C
        (1.0, 1.0, 1.0, False),  # at C, both bits are honest: kept
        (0.0, 0.3, 1.0, True),  # a norm below C says the update was within C
        (1.0, 2.0, 0.0, True),  # above C: it was not
        (None, 0.3, 1.0, True),  # no bit: the norm's
        (5.0, 1.0, 0.0, True),  # not a bit (it would move the count by 5): at C, counted as clipped
        (True, 0.3, 1.0, True),  # a boolean is no number the protocol sends
    ],
)
def test_a_missing_or_wrong_bit_is_replaced_by_the_one_the_norm_implies(sent, norm, counted, corrected):
    assert checked_bit(sent, norm, 1.0, 1e-6) == (counted, corrected)


def test_an_overnorm_option_with_server_side_clipping_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^privacy.overnorm: applies with privacy.dp = 'client'") as caught:
        load_config("fedavg-cnn", ["privacy.dp=server", "privacy.overnorm=drop"])
    assert "\n" not in str(caught.value)


def test_a_malicious_fraction_that_rounds_to_no_client_is_refused_before_data_loads():
    with pytest.raises(ConfigError) as caught:
        load_config("fedavg-cnn", ["federation.num_clients=10", "federation.attack=sign_flip", "federation.malicious_fraction=0.01"])
    message = str(caught.value)
    assert message.startswith("federation.malicious_fraction: round(0.01 x 10 clients) = 0 malicious clients") and "\n" not in message
    assert "above 0.05" in message and "0.1: exactly one" in message
    load_config("fedavg-cnn", ["federation.num_clients=10", "federation.attack=sign_flip", "federation.malicious_fraction=0.1"])


@pytest.mark.slow
def test_a_scaling_attacker_under_client_side_dp_sends_its_update_unclipped_and_the_server_counts_it(tmp_path, shared_cache):
    """The simulated attack runs after the honest clip (the threat model): each malicious client sampled sends 10 times its
    clipped update, and the server's check counts exactly those; the ids are in metrics.jsonl, result and report."""
    from fedprior.experiments.runner import start

    overrides = [
        "data.dataset=digits",
        "federation.num_clients=6",
        "federation.fraction=0.5",
        "federation.rounds=2",
        "privacy.dp=client",
        "privacy.clip_norm=0.05",
        "federation.attack=scaled",
        "federation.malicious_fraction=0.34",
        "run.threads=1",
    ]
    summary = start(*load_config("fedavg-cnn", overrides), tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    ids = records[0]["malicious_client_ids"]
    assert len(ids) == 2 and all("malicious_client_ids" not in r for r in records[1:])
    for record in records:
        assert record["malicious_clients"] == sorted(set(record["clients"]) & set(ids))
        assert record["dp_overnorm_replies"] == len(record["malicious_clients"]) and record["dp_checked_replies"] == len(record["clients"])
    assert summary["malicious_client_ids"] == ids and summary["dp_overnorm_replies"] == sum(len(r["malicious_clients"]) for r in records) > 0
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"| malicious clients (simulated attack) | 2: {ids[0]}, {ids[1]}" in report
    replies = sum(len(r["clients"]) for r in records)  # DP samples by Poisson: each round's count varies
    assert f"| server's check of client-side clipping | {summary['dp_overnorm_replies']} of {replies} replies above C" in report


def test_a_client_cannot_pass_its_reply_off_as_secagg_s_sum():
    """Only the runtime's aggregate (a negative client id) is taken for SecAgg+'s sum; a client's reply naming the sum's
    metrics is checked like any other."""
    from fedprior.algorithms.pieces.differential_privacy import SECURE_SUM_CLIENTS, SECURE_SUM_UNCLIPPED

    x, replies = updates()
    algorithm = with_client_level_dp(mean_algorithm(), ClientLevelDp("client", 1.0, clip_norm=1.0, denominator=4))
    state = {**algorithm.init(INFO), **x}
    forged = Reply({k: replies[0].arrays[k] - x[k] for k in x}, 1, {SECURE_SUM_CLIENTS: 4.0, SECURE_SUM_UNCLIPPED: 4.0}, client_id=0)
    metrics = algorithm.round_metrics(algorithm.aggregate(state, [forged], INFO))
    assert metrics["dp_checked_replies"] == 1 and metrics["dp_overnorm_replies"] == 1
