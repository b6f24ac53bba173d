"""A round's traffic: bytes per round are the round's totals (broadcast once per sampled client, every reply), also
after resuming a checkpoint that counted them per client."""

import json

import pytest
import torch

from fedprior.algorithms.base import Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.tensors import MODEL, payload_bytes
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import resume, start
from fedprior.results.run_view import read_metrics
from fedprior.runtime.checkpoint import load_checkpoint, save_checkpoint
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from fedprior.runtime.traffic import communication, round_traffic, upgrade_record
from tests.support.cli import UNITS_RUN
from tests.support.events import tensorboard_with_tensors
from tests.support.toy_data import toy_images


class Interrupt(Exception):
    pass


def model_bytes(run_dir):
    """The bytes of the model FedAvg broadcasts and every client sends back."""
    state = load_checkpoint(run_dir / "checkpoint.safetensors").server
    return payload_bytes({k: v for k, v in state.items() if k.startswith(MODEL)})


def strip(record):
    return {k: v for k, v in record.items() if k != "seconds"}


def test_round_traffic_counts_the_broadcast_once_per_sampled_client_and_every_reply():
    assert round_traffic(100, [3, 1, 2], {2: 40, 1: 60}) == {"download_bytes": 300, "upload_bytes": 100, "upload_bytes_by_client": {"1": 60, "2": 40}}
    assert round_traffic(0, [], {}) == {"download_bytes": 0, "upload_bytes": 0, "upload_bytes_by_client": {}}  # a server-only round


def test_an_old_record_per_client_becomes_the_rounds_totals_and_a_new_one_stays():
    old = {"step": 1, "clients": [0, 2, 5], "failed_clients": [5], "download_bytes": 10, "upload_bytes": {"0": 10, "2": 7}, "seconds": 1.0}
    new = upgrade_record(old)
    assert new == {**old, "download_bytes": 30, "upload_bytes": 17, "upload_bytes_by_client": {"0": 10, "2": 7}}
    assert upgrade_record(new) == new and old["upload_bytes"] == {"0": 10, "2": 7}  # idempotent; the input is left alone
    unreached = {"step": 2, "trained": False, "clients": [1]}
    assert upgrade_record(unreached) == unreached
    assert communication([old]) == communication([new])


def test_each_rounds_bytes_are_totals_and_the_summary_is_their_sum(whole):
    folder, summary = whole
    records = read_metrics(folder / "metrics.jsonl")
    size = model_bytes(folder)
    assert size > 10_000 and len(records) == 2
    for record in records:
        assert len(record["clients"]) == 2 and record["failed_clients"] == []
        assert record["download_bytes"] == 2 * size and record["upload_bytes"] == 2 * size  # 2 clients x the model
        assert record["upload_bytes_by_client"] == {str(c): size for c in record["clients"]}
    assert summary["download_bytes"] == sum(r["download_bytes"] for r in records) == 4 * size
    assert summary["upload_bytes"] == sum(r["upload_bytes"] for r in records) == 4 * size
    events = tensorboard_with_tensors(folder)
    assert [(e.step, e.value) for e in events.Scalars("upload_bytes")] == [(1, 2 * size), (2, 2 * size)]
    assert events.Scalars("summary/download_bytes")[0].value == 4 * size


def test_a_checkpoint_with_per_client_bytes_resumes_to_the_right_totals(tmp_path, whole):
    """A checkpoint written before rounds counted totals (download per client, upload by client) resumes to the totals."""
    reference, summary = whole
    name, config = load_config("fedavg-cnn", UNITS_RUN)

    def stop_after_round_1(record):
        if record.get("step") == 1:
            raise Interrupt

    cut = tmp_path / "cut"
    with pytest.raises(Interrupt):
        start(name, config, cut, on_round=stop_after_round_1)
    state = load_checkpoint(cut / "checkpoint.safetensors")
    (first,) = state.progress.history
    by_client = first.pop("upload_bytes_by_client")
    first.update(download_bytes=first["download_bytes"] // len(first["clients"]), upload_bytes=by_client)  # the old format
    save_checkpoint(cut / "checkpoint.safetensors", state)
    (cut / "metrics.jsonl").write_text(json.dumps(first) + "\n")
    raw = json.loads(_metadata(cut / "checkpoint.safetensors"))["history"][0]
    assert isinstance(raw["upload_bytes"], dict) and raw["download_bytes"] == model_bytes(reference)  # old, on disk

    resumed = resume(cut)
    for key in ("download_bytes", "upload_bytes", "stage_communication", "history"):
        assert resumed[key] == summary[key], key
    records, expected = read_metrics(cut / "metrics.jsonl"), read_metrics(reference / "metrics.jsonl")
    assert [strip(r) for r in records] == [strip(r) for r in expected]  # rewritten from the checkpoint, in totals
    assert json.loads((cut / "metrics.jsonl").read_text().splitlines()[0])["upload_bytes"] == 2 * model_bytes(reference)


def _metadata(path):
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return handle.metadata()["progress"]


def test_every_round_records_the_bytes_its_clients_sent_and_received_in_total():
    task = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
    algo = fedavg(task, Runtime(1, 8), model="cnn", lr=0.1)
    data = [toy_images(16, seed=c) for c in range(4)]
    result = simulate(algo, lambda c: data[c], 4, toy_images(20, 9), RoundLoop(seed=0, rounds=2, fraction=0.5))
    model_bytes = sum(v.numel() * v.element_size() for k, v in result.state.items() if k.startswith(MODEL))
    assert model_bytes > 1000
    for record in result.progress.history:
        assert len(record["clients"]) == 2  # fraction 0.5 of 4 clients: the totals are 2 x the model
        assert record["download_bytes"] == 2 * model_bytes and record["upload_bytes"] == 2 * model_bytes
        assert record["upload_bytes_by_client"] == {str(c): model_bytes for c in record["clients"]}
    assert payload_bytes({"a": torch.zeros(3, dtype=torch.float64), "b": torch.zeros(2, 2, dtype=torch.int8)}) == 28
