"""system.deadline on Flower: the round timeout. A node whose reply has not come by the deadline fails its clients; the round
aggregates the others. Fast on a loopback Grid (tests/flower/test_secagg.py's), and on Flower's simulation engine
(``-m federation_processes``) with a node that takes longer than the deadline."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterable

import pytest

pytest.importorskip("flwr")

from flwr.app import Message, MessageType  # noqa: E402

from fedprior.experiments.build import build_experiment  # noqa: E402
from fedprior.experiments.config import load_config  # noqa: E402
from tests.flower.test_secagg import DIGITS, LoopbackGrid, federate_on_loopback, server_identity  # noqa: E402, F401

DEADLINE = ["run.runtime='flower-sim'", "system.deadline=0.5"]


class Silent(LoopbackGrid):
    """A LoopbackGrid that runs the ClientApps when their replies are pulled (so that the round's clock starts before they train),
    and whose node 102 (client 2) never answers a TRAIN message."""

    def __init__(self, app, node_configs: dict[int, dict]) -> None:
        super().__init__(app, node_configs)
        self.pending: dict[str, Message] = {}

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            if message.metadata.message_type != MessageType.TRAIN:
                ids += list(super().push_messages([message]))
                continue
            message.metadata.__dict__["_message_id"] = mid = str(uuid.uuid4())
            if message.metadata.dst_node_id != 102:
                self.pending[mid] = message
            ids.append(mid)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        message_ids = list(message_ids)
        for mid in message_ids:
            if mid in self.pending:
                message = self.pending.pop(mid)
                delivered = copy.deepcopy(message)
                self.replies[mid] = copy.deepcopy(self.app(delivered, self.contexts[message.metadata.dst_node_id]))
        return super().pull_messages(message_ids)


def test_the_deadline_is_the_round_timeout_on_flower(tmp_path):
    experiment = build_experiment(*load_config("fedavg-cnn", [*DIGITS, *DEADLINE]))
    started = time.monotonic()
    result = federate_on_loopback(experiment, tmp_path, "deadline", None, grid_type=Silent)
    assert time.monotonic() - started < 60  # not the default 600 s round timeout
    (record,) = result.progress.history
    assert record["failed_clients"] == [2] and record["failures"]["2"] == "no reply within 0.5 s"
    assert "aggregated" not in record  # the three others were aggregated


def sleeping(partition: int, seconds: float) -> list:
    """A Flower mod: the node of ``partition`` takes ``seconds`` longer over each TRAIN message."""

    def mod(message, context, call_next):
        if message.metadata.message_type == MessageType.TRAIN and int(context.node_config["partition-id"]) == partition:
            time.sleep(seconds)
        return call_next(message, context)

    return [mod]


@pytest.mark.federation_processes
def test_on_flowers_simulation_engine_a_node_past_the_deadline_fails_its_clients(tmp_path, monkeypatch):
    """flower-sim, 4 virtual nodes, system.deadline = 120 s; node 2 sleeps 150 s before training: its client fails the round
    ("no reply within 120 s"), the other three are aggregated. (The deadline leaves Ray's actors, two on two cores, the time
    to start and train the three others; 20 s did not, on a loaded machine.)"""
    from fedprior.experiments.runner import start
    from fedprior.flower.client_app import client_app

    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)
    name, config = load_config("fedavg-cnn", [*DIGITS, "run.runtime='flower-sim'", "system.deadline=120"])
    summary = start(name, config, tmp_path / "run", report_extras=False, runtime_options={"client_app": client_app(mods=sleeping(2, 150.0))})
    assert summary["rounds"] == 1 and summary["failed_updates"] == 1
    (record,) = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if json.loads(line).get("step")]
    assert record["failed_clients"] == [2] and record["failures"]["2"] == "no reply within 120 s"
