"""The Weights & Biases tracker in offline mode, read back from the offline run's own file (no mocks, no network)."""

import json
import sys
from pathlib import Path

import pytest
from wandb.proto import wandb_internal_pb2

from fedprior.errors import FedpriorError
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import resume, start
from fedprior.results.trackers import check_trackers

TINY = ["data.dataset=digits", "federation.num_clients=4", "federation.fraction=0.5", "federation.rounds=2", "federation.batch_size=64", "run.threads=1"]

BLOCK = 32768
"""The ``.wandb`` file is a LevelDB-style log: a 7-byte header (``:W&B``, magic, version), then 32 KiB blocks of
chunks, each a 7-byte head (CRC, little-endian length, type: 1 whole, 2 first, 3 middle, 4 last) and its bytes."""


def records(path: Path):
    """The protobuf records of an offline W&B run's ``run-ID.wandb`` file."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    position, pieces = 7, b""
    while position + 7 <= len(data):
        if BLOCK - position % BLOCK < 7:  # a block's tail too short for a head is padding
            position += BLOCK - position % BLOCK
            continue
        length, kind = int.from_bytes(data[position + 4 : position + 6], "little"), data[position + 6]
        pieces += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            pieces = b""
            yield record


def offline_run(folder: Path):
    """(run record, history rows by step, summary) of the one offline W&B run under ``folder/wandb``."""
    (run_file,) = (folder / "wandb").glob("offline-run-*/run-*.wandb")
    run, history, summary = None, {}, {}
    for record in records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
        elif kind == "history":
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            history[row["_step"]] = {k: v for k, v in row.items() if not k.startswith("_")}
        elif kind == "summary":
            summary.update({item.key or "/".join(item.nested_key): item.value_json for item in record.summary.update})
    return run, history, summary


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)


def test_a_run_logs_its_config_rounds_and_summary_to_an_offline_wandb_run(tmp_path, offline):
    name, config = load_config("fedavg-cnn", [*TINY, "run.wandb=offline", "run.wandb_project=tiny"])
    summary = start(name, config, tmp_path / "run")

    run, history, logged = offline_run(tmp_path / "run")  # in the run directory by default
    assert run.project == "tiny" and run.display_name == "run"
    logged_config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert logged_config["name"] == "fedavg-cnn" and logged_config["federation"]["rounds"] == 2 and logged_config["run"]["wandb"] == "offline"
    accuracies = [summary["initial_accuracy"], *summary["history"]]
    assert sorted(history) == [0, 1, 2]
    assert [history[step]["accuracy"] for step in (0, 1, 2)] == [pytest.approx(a) for a in accuracies]
    assert "upload_bytes" in history[1] and history[2]["figures/accuracy/_type"] == "image-file"  # the report's figure, last step
    assert json.loads(logged["final_accuracy"]) == pytest.approx(summary["final_accuracy"])
    recorded = json.loads((tmp_path / "run" / "tracking.json").read_text())["wandb"]
    assert recorded == {"id": run.run_id, "project": "tiny"}


class Interrupt(Exception):
    pass


def test_a_resumed_run_rewrites_the_offline_wandb_run_with_the_whole_history(tmp_path, offline, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    name, config = load_config("fedavg-cnn", [*TINY, "run.wandb=offline"])

    def stop_after_round_1(record):
        if record.get("step") == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        start(name, config, tmp_path / "cut", on_round=stop_after_round_1)
    resumed = resume(tmp_path / "cut")
    run, history, _ = offline_run(tmp_path / "wandb-dir")  # the interrupted offline run's files replaced
    assert run.run_id == json.loads((tmp_path / "cut" / "tracking.json").read_text())["wandb"]["id"]
    assert [history[step]["accuracy"] for step in (0, 1, 2)] == [pytest.approx(a) for a in [resumed["initial_accuracy"], *resumed["history"]]]
    assert not (tmp_path / "cut" / "wandb").exists()


def test_wandb_missing_is_one_clear_line(monkeypatch):
    _, config = load_config("fedavg-cnn", ["run.wandb=offline"])
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if wandb were not installed
    with pytest.raises(
        FedpriorError, match=r'^run.wandb: logging to Weights & Biases needs wandb: in the fedprior clone, pip install -c requirements.lock -e "\.\[wandb\]"$'
    ):
        check_trackers(config)


def test_a_wandb_mode_other_than_offline_or_online_is_refused():
    with pytest.raises(FedpriorError, match="run.wandb"):
        load_config("fedavg-cnn", ["run.wandb=yes"])


def test_online_without_a_login_is_one_line_before_any_data(tmp_path, monkeypatch):
    """``run.wandb = 'online'`` with no W&B credentials (no WANDB_API_KEY, no netrc entry): one line naming the fixes and
    WANDB_MODE's place, before the run folder or any data (issue 56 item 2; wandb.init failed after the run started)."""
    from fedprior.results.trackers import WANDB_NO_LOGIN

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.setenv("WANDB_MODE", "offline")  # does not change run.wandb, as the line says
    _, config = load_config("fedavg-cnn", [*TINY, "run.wandb='online'"])
    with pytest.raises(FedpriorError) as caught:
        start("fedavg-cnn", config, tmp_path / "run")
    assert str(caught.value) == WANDB_NO_LOGIN
    assert "wandb login" in WANDB_NO_LOGIN and "WANDB_MODE" in WANDB_NO_LOGIN
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)  # a key: left to wandb.init
    check_trackers(config)
