"""benchmarks/system_heterogeneity.py (issue 54 item 5) at its --tiny size: the runs, the claims' record, the controls'
premise (constant devices meet the deadline), reading finished runs back, and time-to-target's censoring."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import fedprior
from fedprior.runtime.system_config import SystemConfig
from fedprior.runtime.system_model import SystemModel

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import system_heterogeneity  # noqa: E402


def test_time_to_target_is_the_first_evaluation_reaching_it_and_a_miss_is_flagged_at_the_end():
    run = {"curve": {"round": [0, 2, 4], "simulated_time": [0.0, 10.0, 25.0], "accuracy": [0.1, 0.6, 0.55]}}
    assert system_heterogeneity.time_to(run, 0.6) == {"time": 10.0, "reached": True}
    assert system_heterogeneity.time_to(run, 0.58) == {"time": 10.0, "reached": True}  # first, not last
    assert system_heterogeneity.time_to(run, 0.7) == {"time": 25.0, "reached": False}


def test_the_deadline_is_met_by_every_full_update_on_the_median_device():
    """D is the longest full update on constant devices, rounded up: no constant-speed client can miss it by a float's bit."""
    scale = system_heterogeneity.TINY
    config = fedprior.load_config(system_heterogeneity.PRESET, system_heterogeneity.base_overrides(scale, 0))
    sizes = system_heterogeneity.dry_run(config.settings)["roles"]["train"]["client_sizes"]
    limit = system_heterogeneity.deadline(scale, 0)
    longest = 2 * system_heterogeneity.model_bytes(scale) / 1.25e6 + max(sizes) * 0.005 * 2.718281828459045
    assert longest <= limit < longest + 0.01 and limit == round(limit, 2)
    # what the round compares with D: the system model's own duration of each client's full update, on median devices
    model = SystemModel.of_config(SystemConfig(speed="constant"), 0, scale["clients"])
    assert model is not None
    bytes_ = system_heterogeneity.model_bytes(scale)
    assert max(model.client_duration(k, 1, sizes[k] * scale["local_epochs"], bytes_, bytes_) for k in range(scale["clients"])) <= limit


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("system_heterogeneity")
    argv = ["--tiny", "--seeds", "0", "1", "--runs", str(folder / "runs"), "--out", str(folder / "out.json"), "--plot", str(folder / "out.png")]
    return folder, argv, system_heterogeneity.main(argv)


def test_the_tiny_table_records_its_claims_runs_and_controls(tiny):
    folder, _, record = tiny
    assert json.loads((folder / "out.json").read_text())["verdicts"] == json.loads(json.dumps(record["verdicts"]))
    assert (folder / "out.png").stat().st_size > 0
    assert set(record["claims"]) == {k for k in record["verdicts"] if k != "deadline-cost (measured)"}
    assert record["scale"] == system_heterogeneity.TINY and record["command"] and record["machine"]["cpu"]
    for speed in ("lognormal", "constant"):
        for seed in ("0", "1"):
            runs = record["runs"][speed]
            # FedBuff steps K = m / 2 updates at a time: twice the steps for FedAvg's client updates
            assert runs["fedbuff"][seed]["rounds"] == 2 * runs["fedavg"][seed]["rounds"] == 2 * system_heterogeneity.TINY["rounds"]
            assert runs["fedbuff"][seed]["curve"]["round"] == [0, 2, 4] and runs["fedavg"][seed]["curve"]["round"] == [0, 1, 2]
    # the control's premise: on constant devices nobody misses D, so dropping and partial work change nothing
    control = record["verdicts"]["straggler-effect-vanishes (control)"]
    assert control["updates_dropped_or_shortened"]["constant"] == 0
    for seed in ("0", "1"):
        constant = record["runs"]["constant"]
        assert constant["fedavg-drop"][seed]["curve"] == constant["fedavg"][seed]["curve"]
    assert record["table"]["constant"]["fedavg-drop"]["deadline_dropped_updates"] == 0


def test_a_second_call_reads_the_finished_runs_back_without_training(tiny, monkeypatch):
    _, argv, record = tiny

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(system_heterogeneity.fedprior, "run", no_training)
    monkeypatch.setattr(system_heterogeneity.fedprior, "resume", no_training)
    again = system_heterogeneity.main(argv)
    assert again["verdicts"] == record["verdicts"] and again["table"] == record["table"]
