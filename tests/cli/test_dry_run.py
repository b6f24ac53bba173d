"""fedprior presets show NAME and fedprior run ... --dry-run: a config's every field as TOML, and the partition a run would get."""

import json
import tomllib

import numpy as np
import pytest

from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import SECTIONS, ExperimentConfig, list_presets, load_config, validate_config
from fedprior.experiments.dry_run import dry_run
from fedprior.partition.statistics import class_counts
from tests.experiments.test_sweep import NONE_WITH_LR
from tests.support.cli import STANDIN, TINY, error_line, invoke


def unset_keys(text: str, section: str) -> set[str]:
    """The ``# key: unset`` comment lines of ``[section]`` in a shown config."""
    body = text.split(f"\n[{section}]\n", 1)[1].split("\n\n", 1)[0]
    return {line[2:].split(":")[0] for line in body.splitlines() if line.endswith(": unset")}


def test_every_shipped_preset_round_trips_through_its_toml():
    for name in list_presets():
        _, config = load_config(name)
        again = validate_config(tomllib.loads(config.to_toml()))
        assert again == config, name


@pytest.mark.parametrize(
    "preset, expected",
    [
        ("fst-cbdg", {("encoder", "name"): "locked-text", ("algorithm", "name"): "fst-cbdg", ("partition", "scheme"): "shard", ("partition", "shards"): 2}),
        (
            "fixmatch",
            {("algorithm", "name"): "fixmatch", ("partition", "num_labeled"): 250, ("partition", "num_unlabeled"): 20000, ("partition", "alpha"): 0.3},
        ),
        ("mfcl", {("partition", "scenario"): "Sc2", ("partition", "scheme"): "window", ("federation", "num_clients"): 10}),
    ],
)
def test_presets_show_prints_every_field_and_runs_back_as_the_same_config(tmp_path, preset, expected):
    result = invoke("presets", "show", preset)
    assert result.exit_code == 0, result.output
    shown = tomllib.loads(result.stdout)
    for (section, key), value in expected.items():
        assert shown[section][key] == value
    for section in SECTIONS:  # every field: a value, or a '# key: unset' line where it has none
        model = ExperimentConfig.model_fields[section].annotation
        assert isinstance(model, type)
        fields = set(model.model_fields) if section != "algorithm" else {"name", *load_config(preset)[1].algorithm.hyperparameters()}
        assert set(shown[section]) | unset_keys(result.stdout, section) == fields, section
    assert shown["algorithm"].keys() - {"name"} == load_config(preset)[1].algorithm.hyperparameters().keys()
    path = tmp_path / "saved.toml"
    path.write_text(result.stdout)
    assert load_config(str(path))[1] == load_config(preset)[1]


def test_presets_show_applies_overrides_and_names_them(tmp_path):
    result = invoke("presets", "show", "fixmatch", "--set", "federation.rounds=3", "--set", "algorithm.threshold=0.8")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# the config of `fedprior run fixmatch --set federation.rounds=3 --set algorithm.threshold=0.8`")
    shown = tomllib.loads(result.stdout)
    assert shown["federation"]["rounds"] == 3 and shown["algorithm"]["threshold"] == 0.8
    assert shown["federation"]["evaluate_every"] == 5  # the preset's own value, kept
    (tmp_path / "x.toml").write_text(result.stdout)
    assert load_config(str(tmp_path / "x.toml"))[1] == load_config("fixmatch", ["federation.rounds=3", "algorithm.threshold=0.8"])[1]


def test_presets_show_of_an_unknown_preset_is_one_error_line():
    line = error_line(invoke("presets", "show", "nope"))
    assert line.startswith("error: unknown preset 'nope'; accepted: dp-fedavg-cnn, fedadagrad-cnn, fedadam-cnn, fedavg-cnn, ") and "fixmatch" in line


def test_presets_still_lists_and_fields_still_work():
    listed = invoke("presets")
    assert listed.exit_code == 0 and "fixmatch" in listed.stdout and "fst-cbdg" in listed.stdout
    fields = invoke("presets", "--fields")
    assert fields.exit_code == 0 and "federation.rounds" in fields.stdout


def test_dry_run_prints_the_config_and_the_partition_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "fixmatch", "--dry-run", "--run-dir", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []  # no runs/ folder, no --run-dir
    assert load_config("fixmatch")[1] == validate_config(tomllib.loads(result.stdout))  # the statistics are TOML comments
    lines = result.stdout.splitlines()
    assert "# dry run: nothing trained, no run directory written" in lines
    assert "# fashion-mnist: 60,000 training images; the clients draw on 60,000" in lines
    labeled = next(line for line in lines if line.startswith("#   labeled "))
    unlabeled = next(line for line in lines if line.startswith("#   unlabeled "))
    assert "250 images; per client min 0, median 2, max 10;" in labeled
    assert "20,250 images; per client min 41, median 178.5, max 636; classes per client min 5, median 8, max 10 of 10" in unlabeled
    assert any(line.startswith("# partition: dirichlet (alpha=0.3,") and "100 clients, 10 sampled per round" in line for line in lines)


def test_dry_run_json_counts_the_reserved_images_of_the_stand_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "fst-cbdg", "--dry-run", "--json", "--set", "federation.num_clients=20")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert list(tmp_path.iterdir()) == []
    assert (out["name"], out["config"]["federation"]["num_clients"]) == ("fst-cbdg", 20)
    assert (out["train_images"], out["reserved"], out["pool"], out["num_clients"]) == (60000, 2000, 58000, 20)
    images = out["roles"]["train"]
    assert images["num_samples"] == 58000 and images["client_sizes"] == [2900] * 20  # shards: equal clients
    assert images["median_classes_per_client"] == 2 and max(images["classes_per_client"]) == 2


def test_dry_run_of_a_saved_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shown = invoke("presets", "show", "linear-probe")
    (tmp_path / "probe.toml").write_text(shown.stdout)
    result = invoke("run", "probe.toml", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "# centralized baseline (linear-probe): one client holds them all" in result.stdout.splitlines()
    assert "#   images  58,000 images; per client min 58,000, median 58,000, max 58,000;" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.toml"]


def test_dry_run_describes_the_partition_the_run_trains_on():
    """The run's own partition: the same hold-out, subset and labeled split, client by client."""
    overrides = [
        "data.dataset=digits",
        "data.train_subset=1000",
        "run.model_selection='validation'",
        "data.validation_fraction=0.2",
        "federation.num_clients=6",
        "partition.num_labeled=60",
        "partition.num_unlabeled=500",
        "run.seed=3",
    ]
    name, config = load_config("fixmatch", overrides)
    plan = dry_run(config)
    experiment = build_experiment(name, config)
    labels = experiment.dataset.train_labels
    assert (plan["train_images"], plan["subset_dropped"], plan["validation"], plan["pool"]) == (1438, 438, 200, 800)
    assert plan["pool"] == experiment.pool.size
    assert set(plan["roles"]) == set(experiment.partition.roles) == {"labeled", "unlabeled"}
    for role, parts in experiment.partition.roles.items():
        assert np.array_equal(plan["roles"][role]["class_counts"], class_counts(labels, list(parts), experiment.dataset.num_classes)), role
    assert plan["roles"]["labeled"]["num_samples"] == 60


def test_dry_run_leaves_out_the_images_the_stand_in_was_fitted_on(shared_cache):
    """reserved_train_indices gives the built encoder's pretraining split without building it."""
    name, config = load_config("fst-cbdg", [*STANDIN, "federation.num_clients=10"])
    plan = dry_run(config)
    experiment = build_experiment(name, config)
    assert plan["reserved"] == 300 and plan["pool"] == experiment.pool.size == 1438 - 300
    parts = experiment.partition.roles["train"]
    assert np.array_equal(plan["roles"]["train"]["class_counts"], class_counts(experiment.dataset.train_labels, list(parts), 10))


def test_the_dry_run_refuses_concurrent_clients_where_the_run_does():
    small = ["--set", "data.dataset=digits", "--set", "data.train_subset=0", "--set", "run.concurrent_clients=2", "--set", "run.workers=1"]
    refused = error_line(invoke("run", "fedbm-fedproto", *small, "--set", "federation.rounds=1"))
    assert refused.startswith("error: run.concurrent_clients: algorithm 'fedproto' trains its clients one at a time")
    assert error_line(invoke("run", "fedbm-fedproto", *small, "--dry-run")) == refused
    assert invoke("run", "fedbm-fedavg", *small, "--dry-run").exit_code == 0  # an algorithm whose updates may run at once


def test_the_dry_run_refuses_power_of_choice_where_the_run_does():
    """Power-of-Choice ranks clients by the global model's loss on their labels: an algorithm whose clients hold none is
    refused by the dry run with the run's own line, before anything trains (and a supervised one is planned)."""
    small = ["--set", "data.dataset=digits", "--set", "data.train_subset=0", "--set", "federation.sampler=power-of-choice", "--set", "federation.fraction=0.5"]
    small += ["--set", "federation.power_of_choice_candidates=8", "--set", "run.workers=1"]
    refused = error_line(invoke("run", "fedsimclr", *small, "--set", "federation.rounds=1"))
    assert refused == (
        "error: federation.sampler = 'power-of-choice' ranks clients by the global model's loss on their labelled examples; "
        "algorithm 'fedsimclr' gives its clients no labels (inputs: x); use 'uniform' or 'size-weighted'"
    )
    assert error_line(invoke("run", "fedsimclr", *small, "--dry-run")) == refused
    assert invoke("run", "fedbm-fedavg", *small, "--dry-run").exit_code == 0  # clients with labels: ranked by their loss


def test_the_dry_run_refuses_dp_for_an_algorithm_whose_aggregate_is_not_the_mean_with_the_runs_line():
    """`fedprior run scaffold-cnn --set privacy.dp=server --dry-run` exits 2 with the line the run gives once its data is in
    (reliability probe 5, defect #9), and a DP run of an algorithm DP-FedAvg wraps is planned."""
    dp = [*TINY, "--set", "privacy.dp=server"]
    refused = error_line(invoke("run", "scaffold-cnn", *dp))
    assert refused.startswith("error: privacy.dp: algorithm 'scaffold' reads its clients' replies other than through their mean")
    dry = invoke("run", "scaffold-cnn", *dp, "--dry-run")
    assert dry.exit_code == 2 and error_line(dry) == refused and dry.stdout == ""
    assert invoke("run", "fedavg-cnn", *dp, "--dry-run").exit_code == 0


def test_the_dry_run_of_one_run_refuses_what_its_algorithm_refuses():
    refused = error_line(invoke("run", "fedprox-cnn", *TINY, "--set", "algorithm.server_lr=0.1", "--dry-run"))
    assert refused == f"error: {NONE_WITH_LR}"
    scaffold = error_line(invoke("run", "scaffold-cnn", *TINY, "--set", "algorithm.server_optimizer=adam", "--set", "algorithm.global_lr=0.5", "--dry-run"))
    assert scaffold.startswith("error: algorithm.global_lr: is plain SCAFFOLD's server step")
