"""``fedprior partition``: summary, --json, --plot and one-line errors, on the embedded digits data."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fedprior.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["partition", "--dataset", "digits", *args])


@pytest.fixture(scope="module")
def digits_labels() -> np.ndarray:
    from fedprior.data import load_dataset

    return load_dataset("digits").train_labels


def test_summary_shows_sizes_classes_and_betas():
    result = invoke("--scheme", "shard", "--clients", "10", "--shards", "1", "--show", "3")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("digits", "shard", "shards=1", "10 clients", "client size", "classes/client", "beta_cib", "beta_hetero"):
        assert text in out
    # Histogram rows of the first 3 clients, and no more.
    assert "first 3 clients" in out
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [row[0] for row in rows] == ["0", "1", "2"]


def test_json_is_one_object_with_statistics_and_parameters(digits_labels):
    result = invoke("--scheme", "dirichlet", "--clients", "12", "--alpha", "0.3", "--min-size", "5", "--seed", "7", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)  # exactly one JSON document on stdout
    assert {"beta_cib", "beta_hetero", "client_sizes", "class_counts", "scheme", "parameters"} <= set(record)
    assert record["scheme"] == "dirichlet"
    assert record["parameters"] == {"num_clients": 12, "seed": 7, "alpha": 0.3, "min_size": 5, "balance": False}
    counts = np.array(record["class_counts"])
    assert counts.shape == (12, 10)
    assert counts.sum() == digits_labels.size, "Dirichlet uses every training sample"
    np.testing.assert_array_equal(counts.sum(axis=0), np.bincount(digits_labels, minlength=10))
    assert record["client_sizes"] == counts.sum(axis=1).tolist() and min(record["client_sizes"]) >= 5
    again = json.loads(invoke("--scheme", "dirichlet", "--clients", "12", "--alpha", "0.3", "--min-size", "5", "--seed", "7", "--json").stdout)
    assert again["class_counts"] == record["class_counts"]
    other = json.loads(invoke("--scheme", "dirichlet", "--clients", "12", "--alpha", "0.3", "--seed", "8", "--json").stdout)
    assert other["class_counts"] != record["class_counts"]


def test_quantity_scheme_through_the_cli_gives_skewed_sizes_and_every_sample():
    """Issue 46 item 7: 1,438 digits over 4 clients, sizes exponential up to 8x: weights 1, 2, 4, 8 (sum 15)."""
    record = json.loads(invoke("--scheme", "quantity", "--clients", "4", "--sizes", "exponential", "--size-ratio", "8", "--json").stdout)
    assert record["parameters"] == {"num_clients": 4, "seed": 0, "sizes": "exponential", "size_ratio": 8.0}
    assert record["client_sizes"] == [96, 192, 383, 767]  # 95.87, 191.73, 383.47, 766.93: floors (1,435) and the 3 left to .93, .87, .73
    assert sum(record["client_sizes"]) == 1438
    import fedprior

    split = fedprior.build_partition("digits", "quantity", num_clients=4, sizes="exponential", size_ratio=8.0)  # the Python API: the same split
    assert [len(part) for part in split.parts] == record["client_sizes"] and split.counts.tolist() == record["class_counts"]


def test_window_scheme_through_the_cli_gives_the_closed_form_betas():
    # 10 clients, window 3 on 10 classes: every class held by 3 clients, uniform windows:
    # beta_cib = log2(10/3), beta_hetero = (1 - 3/10) log2(1e6 / 3) (the MFCL paper's Appendix B, average over M^2 pairs).
    record = json.loads(invoke("--scheme", "window", "--clients", "10", "--window", "3", "--json").stdout)
    assert record["beta_cib"] == pytest.approx(math.log2(10 / 3), abs=1e-9)
    assert record["beta_hetero"] == pytest.approx(0.7 * math.log2(1e6 / 3), abs=1e-9)
    assert record["classes_per_client"] == [3] * 10
    assert len(set(record["client_sizes"])) == 1


def test_plot_writes_a_png_and_json_stays_clean(tmp_path):
    path = tmp_path / "heat.png"
    result = invoke("--scheme", "iid", "--clients", "10", "--json", "--plot", str(path))
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["plot"] == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = invoke("--scheme", "iid", "--clients", "10", "--plot", str(tmp_path / "again.png"))
    assert "heatmap written to" in summary.stdout and (tmp_path / "again.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--scheme", "lda"], r"--scheme \(partition.scheme\): unknown scheme 'lda'; accepted: iid, shard, dirichlet, window"),
        (["--clients", "-3"], r"--clients \(federation.num_clients\): must be a positive integer, got -3"),
        (["--clients", "100000"], r"--clients \(federation.num_clients\): 100000 clients but only \d+ training samples"),
        (["--scheme", "dirichlet", "--alpha", "0"], r"--alpha \(partition.alpha\): must be a positive finite number, got 0.0"),
        (["--scheme", "shard", "--shards", "0"], r"--shards \(partition.shards\): must be a positive integer, got 0"),
        (["--scheme", "window", "--window", "11"], r"--window \(partition.window\): 11 classes per client"),
        (["--scheme", "quantity", "--sizes", "zipf"], r"--sizes \(partition.sizes\): unknown value 'zipf'; accepted: linear, exponential, power-law"),
        (["--scheme", "quantity", "--size-ratio", "0.5"], r"--size-ratio \(partition.size_ratio\): .* finite number >= 1, got 0.5"),
        (["--scheme", "quantity", "--size-ratio", "1e9"], r"--size-ratio \(partition.size_ratio\): 1e\+09 leaves client 0 without a sample"),
        (
            ["--scheme", "flwr:Dirichlet"],
            r"--scheme \(partition.scheme\): unknown flwr-datasets partitioner 'Dirichlet'; accepted: flwr:ContinuousPartitioner, ",
        ),
        (
            ["--scheme", "flwr:DirichletPartitioner", "--flwr-kwargs", "{min_size = 1}"],
            r"--flwr-kwargs \(partition.flwr_kwargs\): DirichletPartitioner takes no argument 'min_size'; accepted: partition_by, alpha, ",
        ),
        (["--scheme", "flwr:DirichletPartitioner", "--flwr-kwargs", "min_size"], r"--flwr-kwargs \(partition.flwr_kwargs\): not a TOML inline table"),
    ],
)
def test_errors_are_one_line_without_traceback(args, expected):
    result = invoke(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    message = " ".join(result.stderr.split())
    assert message.startswith("error:")
    import re

    assert re.search(expected, message), message
    assert result.stdout == ""


def test_a_flwr_datasets_scheme_gives_its_partition_with_fedpriors_statistics(digits_labels):
    pytest.importorskip("flwr_datasets")
    from fedprior.partition.flower_datasets import FlowerDatasetsPartitioner

    args = ("--scheme", "flwr:DirichletPartitioner", "--clients", "8", "--alpha", "0.5", "--seed", "3", "--flwr-kwargs", "{min_partition_size = 0}", "--json")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["scheme"] == "flwr:DirichletPartitioner"
    assert record["parameters"] == {"num_clients": 8, "seed": 3, "alpha": 0.5, "partition_by": "label", "min_partition_size": 0, "flwr_shuffle": True}
    parts = FlowerDatasetsPartitioner("flwr:DirichletPartitioner", 8, 3, alpha=0.5, kwargs={"min_partition_size": 0}).split(digits_labels)
    assert record["class_counts"] == [np.bincount(digits_labels[p], minlength=10).tolist() for p in parts]
    assert {"beta_cib", "beta_hetero", "classes_per_client"} <= set(record)


def test_unknown_dataset_is_a_clear_error():
    result = runner.invoke(app, ["partition", "--dataset", "mnist-ish"])
    assert result.exit_code == 2 and "--dataset (data.dataset): unknown dataset 'mnist-ish'" in " ".join(result.stderr.split())


def test_defaults_match_the_config_fields():
    from fedprior.cli import partition as command
    from fedprior.experiments.config import DataConfig, FederationConfig, PartitionConfig

    partition = PartitionConfig()
    assert (command.DEFAULT_SHARDS, command.DEFAULT_ALPHA, command.DEFAULT_MIN_SIZE, command.DEFAULT_WINDOW) == (
        partition.shards,
        partition.alpha,
        partition.min_size,
        partition.window,
    )
    assert (command.DEFAULT_SIZES, command.DEFAULT_SIZE_RATIO) == (partition.sizes, partition.size_ratio)
    assert command.DEFAULT_CLIENTS == FederationConfig().num_clients
    assert command.DEFAULT_DATASET == DataConfig().dataset


def test_installed_command_runs(tmp_path):
    fedprior = Path(sys.executable).with_name("fedprior")
    if not fedprior.exists():
        pytest.skip("no fedprior entry point next to this interpreter")
    done = subprocess.run(
        [str(fedprior), "partition", "--dataset", "digits", "--scheme", "shard", "--clients", "10", "--shards", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert len(record["client_sizes"]) == 10 and max(record["classes_per_client"]) <= 4
    failed = subprocess.run([str(fedprior), "partition", "--dataset", "digits", "--clients", "0"], capture_output=True, text=True, timeout=600)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr and failed.stderr.count("\n") == 1


# ---------------------------------------------------------------- --preset: the split a run trains on


def invoke_preset(name: str, overrides: list[str], *args: str):
    return runner.invoke(app, ["partition", "--preset", name, *(arg for o in overrides for arg in ("--set", o)), *args])


def built_counts(name: str, overrides: list[str]) -> dict[str, np.ndarray]:
    """Per-role (clients, classes) counts of the partition the run's own build gives."""
    from fedprior.experiments.build import build_experiment
    from fedprior.experiments.config import load_config
    from fedprior.partition.statistics import class_counts

    experiment = build_experiment(*load_config(name, overrides))
    labels, k = experiment.dataset.train_labels, experiment.dataset.num_classes
    return {role: class_counts(labels, list(parts), k) for role, parts in experiment.partition.roles.items()}


def test_preset_gives_the_per_client_class_counts_of_the_runs_build():
    overrides = ["data.dataset=digits", "data.train_subset=1000", "federation.num_clients=8", "partition.alpha=0.2", "run.seed=3"]
    result = invoke_preset("fedavg-cnn", overrides, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    built = built_counts("fedavg-cnn", overrides)["train"]
    assert np.array_equal(record["class_counts"], built) and built.shape == (8, 10)
    assert (record["preset"], record["scheme"], record["parameters"]["alpha"], record["pool"]) == ("fedavg-cnn", "dirichlet", 0.2, 1000)
    assert record["left_out"] == {"reserved": 0, "subset_dropped": 438, "validation": 0} and record["num_samples"] == 1000
    # the stand-alone command with the same scheme, alpha, clients and seed splits all 1,438 images: another split
    plain = json.loads(invoke("--scheme", "dirichlet", "--alpha", "0.2", "--clients", "8", "--seed", "3", "--json").stdout)
    assert plain["num_samples"] == 1438 and not np.array_equal(plain["class_counts"], built)


def test_preset_with_a_labeled_split_gives_both_sets_of_the_runs_build(tmp_path):
    overrides = ["data.dataset=digits", "federation.num_clients=6", "partition.num_labeled=60", "partition.num_unlabeled=500", "run.seed=2"]
    result = invoke_preset("fixmatch", overrides, "--json", "--plot", str(tmp_path / "fixmatch.png"), "--view", "percent")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    built = built_counts("fixmatch", overrides)
    assert set(built) == {"labeled", "unlabeled"}
    for role, counts in built.items():
        assert np.array_equal(record[role]["class_counts"], counts), role
    assert record["labeled"]["num_samples"] == 60
    assert record["plots"] == {role: str(tmp_path / f"fixmatch-{role}.png") for role in ("labeled", "unlabeled")}
    assert all((tmp_path / f"fixmatch-{role}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for role in ("labeled", "unlabeled"))


def test_preset_leaves_out_the_images_the_stand_in_was_fitted_on(shared_cache):
    """The locked-text stand-in reserves its pretraining images: the preview drops them exactly as the run does."""
    from tests.support.cli import STANDIN

    overrides = [*STANDIN, "federation.num_clients=10"]
    result = invoke_preset("fst-cbdg", overrides, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["left_out"]["reserved"] == 300 and record["num_samples"] == record["pool"] == 1438 - 300
    assert np.array_equal(record["class_counts"], built_counts("fst-cbdg", overrides)["train"])
    text = invoke_preset("fst-cbdg", overrides, "--show", "0")
    assert "the split its run trains on; 1,438 training images (300 reserved for the encoder's pretraining), the clients draw on 1,138" in " ".join(
        text.stdout.split()
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--preset", "fedavg-cnn", "--alpha", "0.1"],
            "--alpha: with --preset the preset's config shapes the split; change it with --set partition.alpha=VALUE",
        ),
        (
            ["--preset", "fedavg-cnn", "--dataset", "digits"],
            "--dataset: with --preset the preset's config shapes the split; change it with --set data.dataset=VALUE",
        ),
        (["--set", "federation.num_clients=5"], "--set: changes a preset's config; give the preset with --preset NAME"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--view", "pct"], "--view: unknown value 'pct'; accepted: counts, percent"),
        (["--scale", "sqrt"], "--scale: unknown value 'sqrt'; accepted: auto, linear, log"),
    ],
)
def test_preset_and_picture_options_refuse_what_they_cannot_do(args, expected):
    result = runner.invoke(app, ["partition", *args])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert expected in " ".join(result.stderr.split()), result.stderr


def test_fedprior_partition_of_a_preset_colours_its_plot_by_domain(tmp_path, monkeypatch):
    import fedprior.partition.plot as plot
    from fedprior.partition.domains import client_domains
    from tests.support.cli import invoke

    drawn = {}
    real = plot.plot_heatmap

    def spy(*args, **kwargs):
        drawn.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(plot, "plot_heatmap", spy)
    result = invoke(
        "partition",
        "--preset",
        "fedbn-rotated",
        "--set",
        "data.dataset=digits",
        "--set",
        "federation.num_clients=8",
        "--plot",
        tmp_path / "p.png",
        cache=tmp_path,
    )
    assert result.exit_code == 0, result.output
    assert drawn["domain_names"] == ("rotated 0°", "rotated 90°", "rotated 180°", "rotated 270°")
    assert drawn["client_domains"].tolist() == client_domains(8, 4).tolist() and (tmp_path / "p.png").stat().st_size > 0
