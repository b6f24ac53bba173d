"""TensorBoard and MLflow tracking, read back from real local stores (no mocks)."""

import csv
import errno
import json
import sys
import time

import pytest
from mlflow.tracking import MlflowClient
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

from fedprior.errors import FedpriorError
from fedprior.experiments.config import load_config
from fedprior.experiments.run_config import write_config
from fedprior.experiments.runner import resume, start
from fedprior.results.compare import compare_runs
from fedprior.results.run_dir import RunDir
from fedprior.results.run_view import read_metrics
from fedprior.results.trackers import check_trackers, resolve_store, scalars
from tests.support.cli import TINY as TINY_RUN
from tests.support.cli import error_line, invoke
from tests.support.events import tensorboard_with_tensors

TINY = ["data.dataset=digits", "federation.num_clients=4", "federation.fraction=0.5", "federation.rounds=2", "federation.batch_size=64", "run.threads=1"]


def tensorboard(run_dir):
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    return events


def curve(events, tag):
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_scalars_of_a_round_record():
    record = {
        "stage": "train",
        "round": 2,
        "step": 2,
        "accuracy": 0.5,
        "class_accuracy": [0.1, 0.9],
        "upload_bytes": 15,
        "upload_bytes_by_client": {"0": 10, "3": 5},
        "download_bytes": 14,
        "aggregated": False,
        "clients": [0, 3],
    }
    assert scalars(record) == {"round": 2.0, "accuracy": 0.5, "upload_bytes": 15.0, "download_bytes": 14.0}


def test_every_run_writes_tensorboard_and_logs_to_mlflow(tmp_path, monkeypatch, mlflow_db):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root for a sqlite store is ./mlruns
    uri = f"sqlite:///{mlflow_db}"
    name, config = load_config("fedavg-cnn", [*TINY, f"run.mlflow='{uri}'", "run.mlflow_experiment='tiny'"])
    summary = start(name, config, tmp_path / "run")
    accuracies = [summary["initial_accuracy"], *summary["history"]]

    events = tensorboard(tmp_path / "run")
    assert curve(events, "accuracy") == [(s, pytest.approx(a)) for s, a in enumerate(accuracies)]
    assert [s for s, _ in curve(events, "upload_bytes")] == [1, 2]
    assert curve(events, "summary/final_accuracy") == [(2, pytest.approx(summary["final_accuracy"]))]
    images = events.Tags()["images"]
    assert {"figures/accuracy", "figures/partition"} <= set(images)
    assert events.Images("figures/accuracy")[0].width > 100

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tiny")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["federation.rounds"] == "2" and run.data.params["algorithm.name"] == "fedavg"
    assert run.data.params["description"] == summary["description"]  # the run's, not the preset's (issue 33 item 2)
    assert summary["description"].startswith("fedavg on digits: 4 clients,") and "Fashion-MNIST" not in summary["description"]
    history = client.get_metric_history(run.info.run_id, "accuracy")
    assert sorted((m.step, m.value) for m in history) == [(s, pytest.approx(a)) for s, a in enumerate(accuracies)]
    assert run.data.metrics["best_accuracy"] == pytest.approx(summary["best_accuracy"])
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.toml", "metrics.jsonl", "result.json", "report.md", "accuracy.png", "tensorboard"} <= artifacts
    assert (tmp_path / "run" / "checkpoint.previous.safetensors").is_file()  # run.lock is there while the run logs its artifacts
    assert not {"checkpoint.safetensors", "checkpoint.previous.safetensors", "run.lock"} & artifacts  # as docs/tracking.md says


class Interrupt(Exception):
    pass


def test_a_resumed_run_has_the_records_of_an_uninterrupted_one(tmp_path, monkeypatch, mlflow_db):
    """Started with a relative store in one folder, resumed from another: the same MLflow run goes on, in that store."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{mlflow_db}"
    name, config = load_config("fedavg-cnn", [*TINY, "run.mlflow='sqlite:///mlflow.db'"])  # relative to tmp_path

    def stop_after_round_1(record):
        if record.get("step") == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        start(name, config, tmp_path / "cut", on_round=stop_after_round_1)
    recorded = json.loads((tmp_path / "cut" / "tracking.json").read_text())["mlflow"]
    assert recorded["uri"] == uri and recorded["given"] == "sqlite:///mlflow.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resumed = resume(tmp_path / "cut")
    assert list(elsewhere.iterdir()) == []  # no stray mlflow.db (nor mlruns) where the resume ran
    monkeypatch.chdir(tmp_path)
    whole = start(name, config, tmp_path / "whole")
    assert resumed["history"] == whole["history"]

    assert curve(tensorboard(tmp_path / "cut"), "accuracy") == curve(tensorboard(tmp_path / "whole"), "accuracy")
    client = MlflowClient(uri)
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("fedprior").experiment_id])}
    assert set(runs) == {"cut", "whole"}  # resuming continued the MLflow run "cut" started
    steps = {k: sorted((m.step, m.value) for m in client.get_metric_history(r.info.run_id, "accuracy")) for k, r in runs.items()}
    assert steps["cut"] == steps["whole"] and [s for s, _ in steps["cut"]] == [0, 1, 2]
    assert runs["cut"].info.status == "FINISHED" and runs["cut"].info.run_id == recorded["run_id"]
    assert runs["cut"].data.params["run.mlflow"] == uri  # the store as used, absolute


def test_mlflow_missing_is_one_clear_line(monkeypatch):
    _, config = load_config("fedavg-cnn", ["run.mlflow='sqlite:///x.db'"])
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if MLflow were not installed
    monkeypatch.delitem(sys.modules, "mlflow.tracking", raising=False)
    with pytest.raises(
        FedpriorError, match=r'run.mlflow: logging to MLflow needs MLflow: in the fedprior clone, pip install -c requirements.lock -e "\.\[mlflow\]"'
    ):
        check_trackers(config)


def test_an_unusable_store_stops_the_run_before_training(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, config = load_config("fedavg-cnn", [*TINY, "run.mlflow='sqlit:///m.db'"])
    with pytest.raises(FedpriorError, match=r"^run.mlflow: cannot open the MLflow store 'sqlit:///m.db': [^\n]+$"):
        start(name, config, tmp_path / "run")
    assert not (tmp_path / "run").exists() and not (tmp_path / "m.db").exists()


def test_relative_stores_are_made_absolute(tmp_path):
    assert resolve_store("sqlite:///mlflow.db", tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    assert resolve_store("sqlite:///sub/m.db?timeout=5", tmp_path) == f"sqlite:///{tmp_path}/sub/m.db?timeout=5"
    assert resolve_store("./mlruns", tmp_path) == str(tmp_path / "mlruns")
    assert resolve_store("file:mlruns", tmp_path) == (tmp_path / "mlruns").as_uri()
    for kept in ("sqlite:////abs/m.db", "sqlite://", "sqlite:///:memory:", "file:///abs/mlruns", "/abs/mlruns", "http://host:5000", "databricks"):
        assert resolve_store(kept, tmp_path) == kept


@pytest.mark.parametrize("uri", ["http://127.0.0.1:1", "sqlite:////proc/x.db"])
def test_a_bad_store_fails_within_seconds_in_one_line(tmp_path, monkeypatch, capfd, uri):
    """A refused server and an unwritable SQLite file: no minutes of MLflow's HTTP or SQLAlchemy retries."""
    monkeypatch.chdir(tmp_path)
    name, config = load_config("fedavg-cnn", [*TINY, f"run.mlflow='{uri}'"])
    import mlflow.tracking  # noqa: F401  (its import, 5-20 s on a loaded machine, is no retry: not timed)

    began = time.perf_counter()
    with pytest.raises(FedpriorError, match=rf"^run.mlflow: cannot open the MLflow store '{uri}': [^\n]+$"):
        start(name, config, tmp_path / "run")
    assert time.perf_counter() - began < 60  # MLflow's own HTTP retries (7, backing off) take minutes; a loaded machine stays far below
    assert "retried" not in capfd.readouterr().err
    assert not (tmp_path / "run").exists()


def recorded_run(tmp_path, uri, run_id):
    """A run directory whose tracking.json names MLflow run ``run_id`` in ``uri`` (no rounds yet)."""
    name, config = load_config("fedavg-cnn", [*TINY, "run.mlflow='sqlite:///mlflow.db'"])
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    write_config(run, name, config)
    run.tracking.write_text(json.dumps({"mlflow": {"uri": uri, "given": "sqlite:///mlflow.db", "run_id": run_id}}))
    return run


def test_resume_without_the_recorded_store_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gone = tmp_path / "moved" / "mlflow.db"
    run = recorded_run(tmp_path, f"sqlite:///{gone}", "abc123")
    with pytest.raises(
        FedpriorError, match=rf"^run.mlflow: cannot open the MLflow store 'sqlite:///{gone}' \(the store of MLflow run abc123, [^\n]+: no file {gone}; [^\n]+$"
    ):
        resume(run.path)
    assert not gone.parent.exists() and not (tmp_path / "mlflow.db").exists()  # no store made anew, here or there


def test_resume_without_the_recorded_mlflow_run_is_one_line(tmp_path, monkeypatch, mlflow_db):
    monkeypatch.chdir(tmp_path)
    run = recorded_run(tmp_path, f"sqlite:///{mlflow_db}", "abc123")
    with pytest.raises(FedpriorError, match=rf"^run.mlflow: the MLflow run abc123 named in [^\n]+ is not in the store 'sqlite:///{mlflow_db}' [^\n]+$"):
        resume(run.path)


def full_disk_when(monkeypatch, full) -> None:
    """TensorBoard's writes fail with ENOSPC (no file named, as its writer thread raises it) once ``full()`` holds."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    write, flush = RecordWriter.write, RecordWriter.flush

    def failing(method):
        def call(self, *args):
            if full():
                raise OSError(errno.ENOSPC, "No space left on device")
            return method(self, *args)

        return call

    monkeypatch.setattr(RecordWriter, "write", failing(write))
    monkeypatch.setattr(RecordWriter, "flush", failing(flush))


def test_a_full_disk_under_tensorboard_after_the_result_names_the_file_and_no_resume(tmp_path, monkeypatch):
    run = tmp_path / "run"
    full_disk_when(monkeypatch, lambda: (run / "result.json").exists())
    line = error_line(invoke("run", "fedavg-cnn", *TINY_RUN, "--run-dir", run))
    assert line.startswith(f"error: cannot write {run / 'tensorboard'}/events.out.tfevents.") and "No space left on device" in line
    assert "had finished" in line and "resume" not in line


def test_a_full_disk_under_tensorboard_mid_run_names_the_file_and_the_resume(tmp_path, monkeypatch):
    run = tmp_path / "run"
    full_disk_when(monkeypatch, lambda: (run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().count("\n") >= 1)
    line = error_line(invoke("run", "fedavg-cnn", *TINY_RUN, "--run-dir", run))
    assert f"cannot write {run / 'tensorboard'}/events.out.tfevents." in line and line.endswith(f"then `fedprior resume {run}` continues the run")


def test_accuracy_is_a_fraction_in_every_file_a_program_reads(whole, tmp_path):
    folder, summary = whole
    on_disk = json.loads((folder / "result.json").read_text())
    records = read_metrics(folder / "metrics.jsonl")
    assert 0 < on_disk["final_accuracy"] < 1 and on_disk["final_accuracy"] == records[-1]["accuracy"]
    events = tensorboard_with_tensors(folder)
    assert events.Scalars("summary/final_accuracy")[0].value == pytest.approx(summary["final_accuracy"])
    assert [e.value for e in events.Scalars("accuracy")][1:] == pytest.approx(summary["history"])
    path = compare_runs([folder]).write_csv(tmp_path / "runs.csv", per="run")
    (row,) = csv.DictReader(path.open())
    assert float(row["final_accuracy"]) == pytest.approx(summary["final_accuracy"]) and float(row["best_accuracy"]) < 1


def test_tensorboard_holds_the_config_as_hparams_with_final_and_best_accuracy(whole):
    folder, summary = whole
    content = tensorboard_with_tensors(folder).PluginTagToContent("hparams")
    assert set(content) == {"_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}
    values = metadata.parse_session_start_info_plugin_data(content["_hparams_/session_start_info"]).hparams
    assert values["algorithm.name"].string_value == "fedavg" and values["data.dataset"].string_value == "digits"
    assert values["federation.rounds"].number_value == 2 and values["algorithm.lr"].number_value == pytest.approx(0.05)
    assert values["run.vectorize"].string_value == "true" and values["name"].string_value == "fedavg-cnn"
    assert "run.mlflow" not in values  # unset
    experiment = metadata.parse_experiment_plugin_data(content["_hparams_/experiment"])
    assert [m.name.tag for m in experiment.metric_infos] == ["summary/final_accuracy", "summary/best_accuracy"]
    scalars = tensorboard_with_tensors(folder)
    assert scalars.Scalars("summary/best_accuracy")[0].value == pytest.approx(summary["best_accuracy"])
