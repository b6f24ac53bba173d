"""The [system] section: off by default with the numbers unchanged, checked field by field, and a run under it end to end."""

import json

import pytest

import fedprior
from fedprior.errors import ConfigError
from fedprior.runtime.system_model import SystemModel
from tests.support.cli import TINY, error_line, invoke
from tests.support.events import tensorboard_with_tensors

SMALL = {
    "data.dataset": "digits",
    "partition.scheme": "iid",
    "federation.num_clients": 4,
    "federation.fraction": 0.5,
    "federation.rounds": 3,
    "federation.batch_size": 32,
    "run.workers": 1,
    "run.threads": 1,
}


def numbers(result) -> list[dict]:
    return [{k: v for k, v in r.items() if "seconds" not in k} for r in result.records]


def test_an_explicitly_off_section_leaves_every_number_as_without_it(tmp_path):
    plain = fedprior.run("fedavg-cnn", SMALL, run_dir=tmp_path / "plain")
    off = fedprior.run("fedavg-cnn", {**SMALL, "system.speed": "none"}, run_dir=tmp_path / "off")
    assert numbers(plain) == numbers(off)
    assert plain.summary["round_fingerprints"] == off.summary["round_fingerprints"] and plain.summary["state_sha256"] == off.summary["state_sha256"]
    assert "simulated_time" not in plain.summary and all("simulated_time" not in r for r in plain.records)


def test_a_lognormal_run_with_a_deadline_records_simulated_time_and_drops_the_clients_the_model_predicts(tmp_path):
    system = {"system.speed": "lognormal", "system.deadline": 4.0, "system.bandwidth": 1e8}
    result = fedprior.run("fedavg-cnn", {**SMALL, **system, "run.seed": 1}, run_dir=tmp_path / "run")
    model = SystemModel.of_config(fedprior.load_config("fedavg-cnn", {**SMALL, **system, "run.seed": 1}).settings.system, 1, 4)
    sizes = json.loads((tmp_path / "run" / "partition.json").read_text())["client_sizes"]
    assert model is not None
    total = 0.0
    for record in result.records:
        model_bytes = record["upload_bytes_by_client"]  # the CNN, sent both ways
        expected = {str(c): model.client_duration(c, record["step"], sizes[c] * 1, model_bytes[str(c)], model_bytes[str(c)]) for c in record["clients"]}
        assert record["client_simulated_seconds"] == pytest.approx(expected, rel=1e-12)
        assert record.get("deadline_dropped", []) == sorted(int(c) for c, d in expected.items() if d > 4.0)
        total += record["round_simulated_seconds"]
        assert record["simulated_time"] == pytest.approx(total)
    dropped = [c for r in result.records for c in r.get("deadline_dropped", [])]
    assert dropped and len(dropped) < sum(len(r["clients"]) for r in result.records)  # the deadline drops some, not all
    assert result.summary["simulated_time"] == pytest.approx(total)
    assert result.summary["deadline_dropped_updates"] == len(dropped)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| simulated time (system model) |" in report and "simulated time (s) |" in report
    events = tensorboard_with_tensors(tmp_path / "run")  # the trackers log it as every round's number, and in the summary
    assert [e.value for e in events.Scalars("simulated_time")] == pytest.approx([r["simulated_time"] for r in result.records])
    assert events.Scalars("summary/simulated_time")[-1].value == pytest.approx(total)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"system.speed": "fast"}, "system.speed: input should be 'none', 'constant' or 'lognormal'"),
        ({"system.speed": "constant", "system.deadline": -1}, "system.deadline: input should be greater than 0"),
        ({"system.deadline": 10.0}, "system.deadline: applies with a system model; set system.speed"),
        ({"system.speed": "constant", "system.availability_p": 0.5}, "system.availability_p: applies with system.availability = 'bernoulli' or 'diurnal'"),
        ({"system.speed": "constant", "system.partial_work": True}, "system.partial_work: a client does the work that fits before system.deadline"),
        ({"system.speed": "constant", "system.straggler_rule": "fl-bench"}, "system.straggler_rule: applies with system.partial_work = true"),
        (
            {
                "system.speed": "constant",
                "system.deadline": 5,
                "system.partial_work": True,
                "system.straggler_rule": "fl-bench",
                "system.straggler_min_epochs": 1,
            },
            "system.straggler_min_epochs: a straggler runs fewer epochs than federation.local_epochs (1)",
        ),
        ({"system.speed": "constant", "system.over_selection": 0.3, "federation.sampler": "poisson"}, "system.over_selection: samples ceil(m (1 + x))"),
        ({"system.speed": "constant", "run.runtime": "flower-sim"}, "system.speed: the simulated device model runs with run.runtime = 'local' only"),
        ({"system.speed": "constant", "system.speed_sigma": 1.0}, "system.speed_sigma: applies with system.speed = 'lognormal'"),
        ({"system.speed": "lognormal", "system.bandwidth": 0}, "system.bandwidth: input should be greater than 0"),
    ],
)
def test_bad_values_are_one_line_naming_the_field(overrides, message):
    with pytest.raises(ConfigError) as error:
        fedprior.load_config("fedavg-cnn", overrides)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_on_flower_the_deadline_alone_is_accepted():
    config = fedprior.load_config("fedavg-cnn", {"system.deadline": 30.0, "run.runtime": "flower-sim"}).settings
    assert config.system.deadline == 30.0


def test_the_dry_run_refuses_what_the_run_refuses():
    partial = ["--set", "system.speed=constant", "--set", "system.deadline=1.0", "--set", "system.partial_work=true"]
    refused = error_line(invoke("run", "scaffold-cnn", *TINY, *partial))
    assert refused.startswith("error: system.partial_work: algorithm 'scaffold' cannot stop its local work early")
    dry = invoke("run", "scaffold-cnn", *TINY, *partial, "--dry-run")
    assert dry.exit_code == 2 and error_line(dry) == refused
    assert invoke("run", "fedavg-cnn", *TINY, *partial, "--dry-run").exit_code == 0
    bad = invoke("run", "fedavg-cnn", *TINY, "--set", "system.speed=fast", "--dry-run")
    assert bad.exit_code == 2 and error_line(bad).startswith("error: system.speed: input should be")
    shown = invoke("run", "fedavg-cnn", *TINY, "--set", "system.speed=constant", "--dry-run", "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout.splitlines()[-1])["config"]["system"]["speed"] == "constant"


def test_a_run_under_the_system_model_says_so_in_its_description():
    from fedprior.experiments.config import described

    system = {"system.speed": "lognormal", "system.deadline": 5, "system.partial_work": True, "system.over_selection": 0.3}
    text = described("fedavg-cnn", fedprior.load_config("fedavg-cnn", system).settings).description
    assert text.endswith(", batch 32, log-normal devices, deadline 5 s, partial work (fedprox), over-selection 0.3 (made from the preset 'fedavg-cnn')")
    plain = described("fedavg-cnn", fedprior.load_config("fedavg-cnn", {"federation.rounds": 3}).settings).description
    assert plain.endswith(", batch 32 (made from the preset 'fedavg-cnn')")
