"""SecAgg+ on Flower: the aggregate equals the plain one within the quantization bound; refusals are one clear line.

The fast tests drive fedprior's round loop over a loopback Grid: every message goes, as a
deep copy (Flower serializes them), straight to fedprior's ClientApp of its node, with one
Context per node kept across messages, as a SuperNode keeps it. Flower's SecAggPlusWorkflow
and secaggplus_mod run unchanged on it. The same on Flower's simulation engine (below) and
on a federation of processes (tests/flower/test_local.py), both ``-m federation_processes``.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import Context, Error, Message, MessageType, RecordDict  # noqa: E402
from flwr.serverapp import Grid  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from fedprior.errors import ConfigError  # noqa: E402
from fedprior.experiments.build import build_experiment  # noqa: E402
from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.flower.client_app import client_app  # noqa: E402
from fedprior.flower.export import export_all  # noqa: E402
from fedprior.flower.secagg import SecAggOptions, is_secure, quantization_bound, sum_quantization_bound  # noqa: E402
from fedprior.flower.server_app import Settings, federate_experiment, secagg_from_run_config  # noqa: E402
from fedprior.runtime.checkpoint import load_checkpoint  # noqa: E402
from fedprior.runtime.simulation import RoundNotTrained  # noqa: E402

DIGITS = ["data.dataset=digits", "federation.num_clients=4", "federation.rounds=1", "federation.fraction=1.0"]


@pytest.fixture(autouse=True)
def server_identity(monkeypatch):
    """What a ServerApp process has (messages take their run and source node from it)."""
    for key, value in {"_run_id": 1, "_node_id": 0, "_task_id": 0}.items():
        monkeypatch.setattr(TaskIdentity, key, value)


class LoopbackGrid(Grid):
    """A Grid whose nodes are ClientApps in this process: ``push_messages`` runs them, ``pull_messages`` returns their replies."""

    def __init__(self, app, node_configs: dict[int, dict]) -> None:
        self.app = app
        self.contexts = {n: Context(run_id=1, node_id=n, node_config=c, state=RecordDict(), run_config={}) for n, c in node_configs.items()}
        self.replies: dict[str, Message] = {}

    def set_run(self, run_id) -> None:  # type: ignore[override]
        pass

    @property
    def run(self):  # type: ignore[override]
        return None

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:  # type: ignore[override]
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = str(uuid.uuid4())
            delivered = copy.deepcopy(message)
            try:
                reply = self.app(delivered, self.contexts[message.metadata.dst_node_id])
            except Exception as error:  # what a SuperNode sends back for a ClientApp that raised
                reply = Message(Error(code=0, reason=f"{type(error).__name__}: {error}"), reply_to=delivered)
            self.replies[message.metadata.message_id] = copy.deepcopy(reply)
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self.replies.pop(m) for m in list(message_ids) if m in self.replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))


def federate_on_loopback(experiment, tmp_path, name: str, secagg: SecAggOptions | None, app=None, grid_type=LoopbackGrid):
    data = export_all(experiment, tmp_path / "data")
    grid = grid_type(app or client_app(), {100 + c: {"partition-id": c} for c in range(experiment.task.num_clients)})
    settings = Settings(min_nodes=experiment.task.num_clients, data_hint=str(data), run_key=name, poll=0.0, secagg=secagg)
    run = SimpleNamespace(checkpoint=tmp_path / f"{name}.safetensors")
    return federate_experiment(grid, experiment, run, None, None, settings, None)


@pytest.fixture(scope="module")
def digits_fedavg():
    """FedAvg on 4 digits clients of unequal sizes (Dirichlet 0.5), one round, every client sampled."""
    return build_experiment(*load_config("fedavg-cnn", DIGITS))


def test_the_secagg_aggregate_is_the_example_weighted_mean_within_the_quantization_bound(digits_fedavg, tmp_path):
    experiment = digits_fedavg
    plain = federate_on_loopback(experiment, tmp_path, "plain", None)
    secure = federate_on_loopback(experiment, tmp_path, "secure", SecAggOptions())
    sizes = [experiment.client_size(c) for c in range(4)]
    assert len(set(sizes)) > 1  # unequal weights: an unweighted mean would be far off
    nodes, total = 4, sum(sizes)
    bound = quantization_bound(SecAggOptions(max_weight=float(total)), nodes, total)
    assert bound < 3e-5
    record, secure_record = plain.progress.history[0], secure.progress.history[0]
    assert secure_record["failed_clients"] == [] and secure_record["clients"] == [0, 1, 2, 3]
    # the clients' metrics travel in the clear: their mean is the plain run's
    assert secure_record["client_train_loss"] == record["client_train_loss"] and secure_record["client_steps"] == record["client_steps"]
    assert secure_record["upload_bytes_by_client"] == {"-1": record["upload_bytes"] // 4}  # one aggregate, the size of one model
    largest = 0.0
    for name, value in plain.state.items():
        difference = (secure.state[name].double() - value.double()).abs()
        slack = 2 * torch.finfo(value.dtype).eps * value.double().abs()  # both are rounded to float32 at the end
        assert bool((difference <= bound + slack).all()), name
        largest = max(largest, float(difference.max()))
    assert largest > 0  # quantized, not the plain path
    assert abs(secure_record["accuracy"] - record["accuracy"]) <= 1 / len(experiment.test["y"])  # at most one test image changes


def test_an_algorithm_whose_aggregate_is_not_the_mean_is_refused_by_name(tmp_path):
    experiment = build_experiment(*load_config("scaffold-cnn", DIGITS))
    assert not experiment.algorithm.mean_aggregate
    with pytest.raises(ConfigError, match="--secagg: algorithm 'scaffold' reads more than the example-weighted mean"):
        federate_on_loopback(experiment, tmp_path, "scaffold", SecAggOptions())


def test_a_server_app_under_secagg_refuses_server_side_dp_by_name(tmp_path):
    """The ServerApp's own check (``flwr run`` with ``secagg=true``): privacy.dp = 'server' is named as the cause, not the
    algorithm (reliability probe 5, defect #8), before any message goes out."""
    experiment = build_experiment(*load_config("fedavg-cnn", [*DIGITS, "privacy.dp=server"]))
    with pytest.raises(ConfigError, match=r"^--secagg: privacy.dp = 'server' clips each client's update on the server"):
        federate_on_loopback(experiment, tmp_path, "dp", SecAggOptions())


def test_mean_aggregate_is_kept_by_a_server_optimizer_and_dropped_by_another_aggregate():
    adam = build_experiment(*load_config("fedadam-cnn", DIGITS)).algorithm
    assert adam.mean_aggregate
    assert not adam.with_(aggregate=lambda state, replies, info: state).mean_aggregate
    assert adam.with_(aggregate=adam.aggregate, mean_aggregate=True).mean_aggregate


@pytest.mark.parametrize(
    ("run_config", "message"),
    [
        ({"secagg-shares": 2.0}, "secagg shares: 2 is not accepted; accepted: an integer >= 3"),
        ({"secagg-shares": 1.5}, "secagg shares: 1.5 is not accepted"),
        ({"secagg-threshold": 0.0}, "secagg threshold: 0 is not accepted; accepted: an integer >= 2"),
        ({"secagg-shares": 3.0, "secagg-threshold": 3.0}, r"secagg threshold: 3 must be below secagg shares \(3\)"),
        ({"secagg-clipping-range": -1.0}, "secagg clipping range: -1 is not accepted; accepted: a positive number"),
        ({"secagg-quantization-range": 2**32}, "secagg quantization range: 4294967296 is not accepted; accepted: an integer >= 2 below the modulus range"),
        ({"secagg-modulus-range": 3 * 2**22}, "secagg modulus range: 12582912 is not accepted; accepted: a power of 2 up to 2\\*\\*32"),
        ({"secagg-max-weight": -5.0}, "secagg max weight: -5 is not accepted"),
    ],
)
def test_each_bad_secagg_option_is_one_line_naming_it(run_config, message):
    with pytest.raises(ConfigError, match=message) as caught:
        secagg_from_run_config(run_config)
    assert "\n" not in str(caught.value)


def test_a_round_needs_two_nodes_and_a_sum_below_the_modulus():
    with pytest.raises(ConfigError, match="SecAgg\\+ needs at least 2 SuperNodes in a round"):
        SecAggOptions().nodes_fit(1)
    with pytest.raises(ConfigError, match="the sum would wrap around"):
        SecAggOptions().nodes_fit(1024)
    SecAggOptions().nodes_fit(3)


def test_rounds_that_cannot_reach_the_threshold_are_refused_naming_the_fraction_or_the_nodes():
    """A round of m clients has at most min(m, nodes) nodes (client c on node c mod N): below the threshold it cannot run."""
    with pytest.raises(ConfigError) as one_client:
        SecAggOptions().rounds_fit(1, 3, 6, 0.1)
    assert str(one_client.value) == (
        "--secagg: a round samples 1 client(s) (federation.fraction 0.1 x federation.num_clients 6), so at most 1 SuperNode(s) take part, "
        "below SecAgg+'s reconstruction threshold of 2 nodes; raise federation.fraction to 0.334 or more"
    )
    with pytest.raises(ConfigError, match="--secagg: 3 SuperNodes cannot reach SecAgg\\+'s reconstruction threshold of 4 nodes; give --nodes 4"):
        SecAggOptions(shares=5, threshold=4).rounds_fit(10, 3, 100, 0.1)
    with pytest.raises(ConfigError, match="a round samples 2 client\\(s\\) .* threshold of 3 nodes"):  # 0.9 of 3 shares
        SecAggOptions(shares=3, threshold=0.9).rounds_fit(2, 3, 20, 0.1)
    SecAggOptions().rounds_fit(2, 3, 20, 0.1)
    SecAggOptions(shares=0.5, threshold=0.5).rounds_fit(2, 2, 20, 0.1)


def test_flower_local_refuses_the_secagg_federation_of_one_client_a_round_before_any_data(tmp_path):
    """docs/privacy-robustness.md's example before issue 56: 6 clients at the preset's fraction 0.1 sample one a round."""
    from tests.support.cli import error_line, invoke

    result = invoke(
        "flower",
        "local",
        "--nodes",
        "3",
        "fedavg-cnn",
        "--secagg",
        "--set",
        "data.dataset=digits",
        "--set",
        "federation.num_clients=6",
        "--run-dir",
        tmp_path / "run",
    )
    assert result.exit_code == 2
    assert error_line(result).startswith("error: --secagg: a round samples 1 client(s) (federation.fraction 0.1 x federation.num_clients 6)")
    assert not (tmp_path / "run").exists()


@pytest.mark.federation_processes
def test_on_flowers_simulation_engine_the_secagg_aggregate_is_within_the_bound(tmp_path, monkeypatch):
    """The same check on Ray's virtual SuperNodes (one per client): plain and SecAgg+ flower-sim runs of one round."""
    from fedprior.experiments.runner import start

    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)
    name, config = load_config("fedavg-cnn", [*DIGITS, "run.runtime='flower-sim'"])
    start(name, config, tmp_path / "plain", report_extras=False)
    start(name, config, tmp_path / "secure", report_extras=False, runtime_options={"secagg": SecAggOptions()})
    experiment = build_experiment(name, config)
    total = sum(experiment.client_size(c) for c in range(4))
    bound = quantization_bound(SecAggOptions(max_weight=float(total)), 4, total)
    plain, secure = (load_checkpoint(tmp_path / d / "checkpoint.safetensors").server for d in ("plain", "secure"))
    for key, value in plain.items():
        gap = (secure[key].double() - value.double()).abs()
        assert bool((gap <= bound + 2 * torch.finfo(value.dtype).eps * value.double().abs()).all()), key


CLIENT_DP = ["privacy.dp=client", "privacy.clipping=adaptive", "privacy.noise_multiplier=0.5", "privacy.count_stddev=1.0", "privacy.clip_norm=0.5"]


def test_client_side_dp_under_secagg_sums_the_clipped_updates_and_matches_the_plain_run_within_the_bound(tmp_path):
    """Distributed DP: the clients clip, SecAgg+ sums their updates and bits, the server adds the round's noise. The model is
    the plain client-side DP run's (same noise, same adaptive C) within SecAgg+'s quantization of the sum over m."""
    experiment = build_experiment(*load_config("fedavg-cnn", [*DIGITS, *CLIENT_DP]))
    assert experiment.algorithm.secure_sum and not experiment.algorithm.mean_aggregate
    plain = federate_on_loopback(experiment, tmp_path, "plain", None)
    secure = federate_on_loopback(experiment, tmp_path, "secure", SecAggOptions())
    record, secure_record = plain.progress.history[0], secure.progress.history[0]
    assert secure_record["failed_clients"] == [] and secure_record["upload_bytes_by_client"].keys() == {"-1"}
    assert record["dp_checked_replies"] == 4 and secure_record["dp_checked_replies"] == 0  # the server saw no single reply
    assert "client_dp_unclipped" in record and "client_dp_unclipped" not in secure_record  # the bits travel only in the sum
    assert secure_record["client_dp_secure_sum_clients"] == 4
    for key in ("dp_clip_norm", "dp_noise_std", "dp_unclipped_fraction"):  # the count is summed exactly: the same adaptive C
        assert secure_record[key] == record[key], key
    assert secure.state["privacy.clip_norm"] == plain.state["privacy.clip_norm"]
    m, nodes = 4, 4
    bound = sum_quantization_bound(SecAggOptions(), nodes) / m
    assert bound < 1e-5
    largest = 0.0
    for name, value in plain.state.items():
        if name.startswith("privacy.") or not value.is_floating_point():
            continue
        difference = (secure.state[name].double() - value.double()).abs()
        slack = 2 * torch.finfo(value.dtype).eps * value.double().abs()  # both are rounded to float32 at the end
        assert bool((difference <= bound + slack).all()), name
        largest = max(largest, float(difference.max()))
    assert largest > 0  # quantized, not the plain path


def test_server_side_dp_under_secagg_is_refused_saying_the_server_cannot_clip_what_it_cannot_see(tmp_path):
    experiment = build_experiment(*load_config("fedavg-cnn", [*DIGITS, "privacy.dp=server"]))
    with pytest.raises(
        ConfigError, match=r"^--secagg: privacy.dp = 'server' clips each client's update on the server.*cannot clip what it cannot see"
    ) as caught:
        federate_on_loopback(experiment, tmp_path, "server-dp", SecAggOptions())
    assert "\n" not in str(caught.value)


# -- nodes that drop out in the middle of the protocol ---------------------------------------------------------


def dropping_out(partitions: set[int]) -> list:
    """A Flower mod (after fedprior's SecAgg+ mod): the nodes of ``partitions`` fail when the protocol asks for their masked
    vector, after they shared their keys: they drop out mid-protocol. Every other message goes through."""

    def mod(message, context, call_next):
        if is_secure(message.content) and int(context.node_config["partition-id"]) in partitions:
            raise RuntimeError("the node dropped out mid-protocol")
        return call_next(message, context)

    return [mod]


def test_a_secagg_round_that_loses_a_node_within_the_threshold_finishes_with_the_others(digits_fedavg, tmp_path):
    """4 nodes, 3 shares, threshold 2: node 2 drops out after sharing its keys; its neighbours' shares rebuild its masks, the
    round aggregates the 3 others (their mean, within the quantization bound) and fails client 2."""
    experiment = digits_fedavg
    secure = federate_on_loopback(experiment, tmp_path, "dropout", SecAggOptions(), app=client_app(mods=dropping_out({2})))
    (record,) = secure.progress.history
    assert record["clients"] == [0, 1, 2, 3] and record["failed_clients"] == [2] and "aggregated" not in record
    assert "its node sent no masked vector in SecAgg+" in record["failures"]["2"]
    sizes = [experiment.client_size(c) for c in (0, 1, 3)]
    total = sum(experiment.client_size(c) for c in range(4))
    bound = quantization_bound(SecAggOptions(max_weight=float(total)), 3, sum(sizes))
    kept = federate_on_loopback(experiment, tmp_path / "kept", "kept", None, app=client_app(mods=failing({2})))
    assert kept.progress.history[0]["failed_clients"] == [2]
    for name, value in kept.state.items():  # the plain round of the 3 other clients, within SecAgg+'s quantization
        gap = (secure.state[name].double() - value.double()).abs()
        assert bool((gap <= bound + 2 * torch.finfo(value.dtype).eps * value.double().abs()).all()), name


def test_a_secagg_round_that_loses_more_nodes_than_its_threshold_allows_stops_with_one_line(digits_fedavg, tmp_path):
    """4 nodes, 4 shares, threshold 3: two nodes drop out mid-protocol, two are left, below the threshold: the round cannot be
    unmasked, is not counted, and the run stops with one line saying why (resumable from the last trained round)."""
    with pytest.raises(RoundNotTrained) as stopped:
        federate_on_loopback(digits_fedavg, tmp_path, "lost", SecAggOptions(shares=4, threshold=3), app=client_app(mods=dropping_out({1, 3})))
    line = str(stopped.value)
    assert "\n" not in line and line.startswith("federated round 1: none of the 4 sampled clients could be reached (SecAgg+ halted in its ")
    assert "fewer nodes answered than its reconstruction threshold needs" in line


def failing(partitions: set[int]) -> list:
    """A Flower mod: the nodes of ``partitions`` fail every TRAIN message (a plain round without their clients)."""

    def mod(message, context, call_next):
        if message.metadata.message_type == MessageType.TRAIN and int(context.node_config["partition-id"]) in partitions:
            raise RuntimeError("the node is gone")
        return call_next(message, context)

    return [mod]


@pytest.mark.federation_processes
def test_on_flowers_simulation_engine_a_node_lost_mid_protocol_is_absorbed_within_the_threshold_and_stops_the_run_beyond_it(tmp_path, monkeypatch):
    """The two cases above on Ray's virtual SuperNodes (one per client): one node of 4 lost after sharing its keys (3 shares,
    threshold 2) finishes the round without its client; two lost with threshold 3 stop the run with one line."""
    from fedprior.experiments.runner import start

    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)
    name, config = load_config("fedavg-cnn", [*DIGITS, "run.runtime='flower-sim'"])
    within = {"secagg": SecAggOptions(), "client_app": client_app(mods=dropping_out({2}))}
    summary = start(name, config, tmp_path / "within", report_extras=False, runtime_options=within)
    assert summary["rounds"] == 1 and summary["failed_updates"] == 1 and summary["failed_clients_per_round"] == {"1": 1}
    beyond = {"secagg": SecAggOptions(shares=4, threshold=3), "client_app": client_app(mods=dropping_out({1, 3}))}
    with pytest.raises(RoundNotTrained) as stopped:
        start(name, config, tmp_path / "beyond", report_extras=False, runtime_options=beyond)
    assert "\n" not in str(stopped.value) and "SecAgg+ halted in its " in str(stopped.value)
    assert "fewer nodes answered than its reconstruction threshold needs" in str(stopped.value)
