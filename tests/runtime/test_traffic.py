"""One unit and one meaning per name: bytes per round are the round's totals, accuracy a fraction wherever a program
reads it, ``history`` the evaluated accuracies in the API and result.json alike, the config as TensorBoard HParams."""

import csv
import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

import fedprior
from fedprior.algorithms.pieces.tensors import MODEL, payload_bytes
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import resume, start
from fedprior.papers import table_by_name
from fedprior.reproduce.tables import run_table
from fedprior.results.compare import compare_runs
from fedprior.results.run_view import read_metrics
from fedprior.runtime.checkpoint import load_checkpoint, save_checkpoint
from fedprior.runtime.traffic import communication, round_traffic, upgrade_record

TINY = ["data.dataset=digits", "federation.num_clients=4", "federation.fraction=0.5", "federation.rounds=2", "federation.batch_size=64", "run.threads=1"]


class Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A finished 2-round FedAvg run: 4 clients, 2 sampled per round."""
    folder = tmp_path_factory.mktemp("units") / "whole"
    name, config = load_config("fedavg-cnn", TINY)
    summary = start(name, config, folder)
    return folder, summary


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
    events = tensorboard(folder)
    assert [(e.step, e.value) for e in events.Scalars("upload_bytes")] == [(1, 2 * size), (2, 2 * size)]
    assert events.Scalars("summary/download_bytes")[0].value == 4 * size


def test_a_checkpoint_with_per_client_bytes_resumes_to_the_right_totals(tmp_path, whole):
    """A checkpoint written before rounds counted totals (download per client, upload by client) resumes to the totals."""
    reference, summary = whole
    name, config = load_config("fedavg-cnn", TINY)

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


def test_history_means_the_evaluated_accuracies_in_the_api_and_in_result_json(whole):
    folder, summary = whole
    result = fedprior.open_run(folder)
    on_disk = json.loads((folder / "result.json").read_text())
    assert result.history == on_disk["history"] == summary["history"] and len(result.history) == 2
    assert result.evaluated_rounds == on_disk["evaluated_rounds"] == [1, 2]
    assert result.history == [r["accuracy"] for r in result.records] and all(isinstance(a, float) for a in result.history)
    assert [r["step"] for r in result.records] == [1, 2]


def test_accuracy_is_a_fraction_in_every_file_a_program_reads(whole, tmp_path):
    folder, summary = whole
    on_disk = json.loads((folder / "result.json").read_text())
    records = read_metrics(folder / "metrics.jsonl")
    assert 0 < on_disk["final_accuracy"] < 1 and on_disk["final_accuracy"] == records[-1]["accuracy"]
    events = tensorboard(folder)
    assert events.Scalars("summary/final_accuracy")[0].value == pytest.approx(summary["final_accuracy"])
    assert [e.value for e in events.Scalars("accuracy")][1:] == pytest.approx(summary["history"])
    path = compare_runs([folder]).write_csv(tmp_path / "runs.csv", per="run")
    (row,) = csv.DictReader(path.open())
    assert float(row["final_accuracy"]) == pytest.approx(summary["final_accuracy"]) and float(row["best_accuracy"]) < 1


def test_tensorboard_holds_the_config_as_hparams_with_final_and_best_accuracy(whole):
    folder, summary = whole
    content = tensorboard(folder).PluginTagToContent("hparams")
    assert set(content) == {"_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}
    values = metadata.parse_session_start_info_plugin_data(content["_hparams_/session_start_info"]).hparams
    assert values["algorithm.name"].string_value == "fedavg" and values["data.dataset"].string_value == "digits"
    assert values["federation.rounds"].number_value == 2 and values["algorithm.lr"].number_value == pytest.approx(0.05)
    assert values["run.vectorize"].string_value == "true" and values["name"].string_value == "fedavg-cnn"
    assert "run.mlflow" not in values  # unset
    experiment = metadata.parse_experiment_plugin_data(content["_hparams_/experiment"])
    assert [m.name.tag for m in experiment.metric_infos] == ["summary/final_accuracy", "summary/best_accuracy"]
    scalars = tensorboard(folder)
    assert scalars.Scalars("summary/best_accuracy")[0].value == pytest.approx(summary["best_accuracy"])


def tensorboard(run_dir):
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def test_a_paper_tables_numbers_say_their_unit():
    """table.json is read beside the paper's numbers (accuracy in %); each metric's scale says how it relates to result.json."""
    table = table_by_name("fst-cbdg-table2")
    summary = {"final_accuracy": 0.625, "best_accuracy": 0.75, "initial_accuracy": 0.1, "wall_seconds": 1.0}
    (first, *_) = run_table(table, True, None, lambda cell, seed: summary)
    metric = first["metrics"][table.metrics[0]]
    assert metric["scale"] == 100.0 and metric["mean"] == 100 * summary[table.metrics[0]] == first["ours"]
