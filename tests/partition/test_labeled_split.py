"""The labeled/unlabeled split as config and on the command line (the FedDB paper, Sec. 5.1); labels never reach the unlabeled pool."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from fedprior.cli import app
from fedprior.errors import ConfigError
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config

SPLIT = [
    "data.dataset=digits",
    "federation.num_clients=10",
    "partition.scheme=dirichlet",
    "partition.alpha=0.3",
    "partition.num_labeled=200",
    "partition.num_unlabeled=0",
    "algorithm.model=convnet",
]


def test_config_split_gives_two_roles_class_balanced_and_nested():
    name, config = load_config("feddb", SPLIT)
    experiment = build_experiment(name, config)
    roles = experiment.partition.roles
    assert set(roles) == {"labeled", "unlabeled"}
    labels = experiment.dataset.train_labels
    labeled = np.concatenate(roles["labeled"])
    assert labeled.size == 200 and set(np.bincount(labels[labeled], minlength=10).tolist()) == {20}
    for mine, pool in zip(roles["labeled"], roles["unlabeled"], strict=True):
        assert np.isin(mine, pool).all()
    assert np.concatenate(roles["unlabeled"]).size == labels.size  # every image is somebody's unlabeled image
    data = experiment.client_data(3)
    assert set(data) == {"x_labeled", "y_labeled", "x_unlabeled", "y_unlabeled"}
    assert set(experiment.algorithm.inputs) == {"x_labeled", "y_labeled", "x_unlabeled"}  # y_unlabeled: diagnostics only
    unlabeled_rows = roles["unlabeled"][3]
    np.testing.assert_array_equal(data["x_unlabeled"].numpy(), experiment.train["x"][unlabeled_rows].numpy())


def test_labeled_only_baseline_never_receives_unlabeled_images():
    name, config = load_config("fedavg-labeled", SPLIT)
    experiment = build_experiment(name, config)
    assert set(experiment.client_data(0)) == {"x_labeled", "y_labeled"}
    name, config = load_config("feddb", [*SPLIT, "algorithm.diagnostics=false"])
    assert set(build_experiment(name, config).client_data(0)) == {"x_labeled", "y_labeled", "x_unlabeled"}


def test_unlabeled_subset_and_separate_roles():
    name, config = load_config("feddb", [*SPLIT, "partition.num_unlabeled=500", "partition.labeled_in_unlabeled=false"])
    roles = build_experiment(name, config).partition.roles
    unlabeled, labeled = np.concatenate(roles["unlabeled"]), np.concatenate(roles["labeled"])
    assert unlabeled.size == 500 and np.intersect1d(unlabeled, labeled).size == 0


def test_algorithms_and_partitions_that_do_not_fit_fail_with_one_line():
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", "federation.num_clients=10", "partition.num_labeled=100"])
    with pytest.raises(ConfigError, match=r"partition\.num_labeled: algorithm 'fedavg' reads x, y"):
        build_experiment(name, config)
    name, config = load_config("feddb", ["data.dataset=digits", "federation.num_clients=10", "partition.num_labeled=0", "partition.num_unlabeled=0"])
    with pytest.raises(ConfigError, match=r"partition\.num_labeled: algorithm 'feddb' needs a labeled/unlabeled split"):
        build_experiment(name, config)
    with pytest.raises(ConfigError, match=r"partition\.num_unlabeled"):
        name, config = load_config("feddb", [*SPLIT, "partition.num_unlabeled=100000"])
        build_experiment(name, config)


def test_partition_command_shows_both_sets_with_a_heatmap_each(tmp_path):
    runner = CliRunner()
    args = ["partition", "--dataset", "digits", "--scheme", "dirichlet", "--alpha", "0.3", "--clients", "10", "--labeled", "100"]
    record = json.loads(runner.invoke(app, [*args, "--json", "--plot", str(tmp_path / "p.png")]).stdout)
    assert record["parameters"]["num_labeled"] == 100
    assert record["labeled"]["num_samples"] == 100 and record["unlabeled"]["num_samples"] == 1438
    assert np.array_equal(np.array(record["labeled"]["class_counts"]).sum(0), np.full(10, 10))
    for role in ("labeled", "unlabeled"):
        assert (tmp_path / f"p-{role}.png").read_bytes()[:4] == b"\x89PNG" and record["plots"][role].endswith(f"p-{role}.png")
    summary = runner.invoke(app, [*args, "--show", "1"]).stdout
    assert "labeled set of digits" in summary and "unlabeled set of digits" in summary
    failed = runner.invoke(app, [*args[:-1], "5000"])
    assert failed.exit_code == 2 and "--labeled (partition.num_labeled): 5000 labeled samples" in " ".join(failed.stderr.split())


def test_feddb_tables_resolve_in_both_settings_with_the_papers_numbers():
    from fedprior.papers import table_by_name
    from fedprior.reproduce.tables import cells

    real = cells(table_by_name("feddb-table2"), embedded=False)
    assert len(real) == 30 and {c.column for c in real} == {"CIFAR10 δ=0.3", "SVHN δ=0.3", "CIFAR100 δ=0.3"}
    svhn = next(c for c in real if c.row == "FedDB" and c.column.startswith("SVHN"))
    _, config = load_config(svhn.preset, svhn.overrides)
    assert (config.data.dataset, config.algorithm.model, config.federation.rounds) == ("svhn", "wrn28-2", 800)
    assert config.partition.num_labeled == 4000 and config.algorithm.flip is False and config.partition.alpha == 0.3
    assert svhn.paper == 85.99
    embedded = cells(table_by_name("feddb-table1"), embedded=True)
    # 10 rows, all labels, the two full-batch central controls (issue 31) and the four mini-batch ones (issue 44: capability and budget)
    assert {c.column for c in embedded} == {"iid"} and len(embedded) == 17
    everything = next(c for c in embedded if c.row == "FedAvg (all labels)")
    assert load_config(everything.preset, everything.overrides)[1].partition.num_labeled == 20250  # the control: every image labeled
    _, config = load_config(embedded[0].preset, embedded[0].overrides)
    assert (config.data.dataset, config.partition.num_labeled, config.partition.scheme) == ("fashion-mnist", 250, "iid")
    assert (config.partition.num_unlabeled, config.algorithm.model) == (20000, "convnet")
    dpl = next(c for c in embedded if c.row == "SemiFL-FedDPL")
    assert load_config(dpl.preset, dpl.overrides)[1].algorithm.hyperparameters()["dpl"] is True and dpl.paper == 68.46
    ablation = cells(table_by_name("feddb-table4"), embedded=True)
    assert {c.column for c in ablation} == {"iid", "δ=0.3", "δ=0.1"} and len(ablation) == 33  # 5 rows and 6 central controls x 3 columns
    _, config = load_config(svhn.preset, svhn.overrides)
    # issue 19: the real setting scores the test set every 10 rounds and at the last (the paper's best accuracy is over
    # every round: best_accuracy here is over rounds 10, 20, ..., 800)
    assert config.federation.evaluate_every == 10
    assert table_by_name("feddb-table3").metrics == ("best_accuracy", "final_accuracy", "late_change", "mean_client_pl_accuracy", "mean_client_pl_coverage")


def test_feddb_paper_setting_cells_train_with_the_papers_local_lr():
    """The FedDB paper, Sec. 5.1: eta = 0.03 (the code: cosine over 800 rounds), not the embedded presets' 0.1 over 200 rounds;
    FedMatch keeps its own code's optimizer (lr 1e-3, plateau decay, no cosine)."""
    from fedprior.papers import table_by_name
    from fedprior.reproduce.tables import cells

    for name in ("feddb-table1", "feddb-table4"):
        for cell in cells(table_by_name(name), embedded=False):
            algorithm = load_config(cell.preset, cell.overrides)[1].algorithm.hyperparameters()
            expected = (1e-3, 0) if cell.preset == "fedmatch" else (0.03, 800)
            assert (algorithm["lr"], algorithm["lr_decay_rounds"]) == expected, (name, cell.row, cell.column)
    embedded = cells(table_by_name("feddb-table2"), embedded=True)
    minibatch = {c.row for c in embedded if "labeled_batch_size" in " ".join(c.overrides)}  # FixMatch's own recipe (issue 44): its lr 0.03
    assert len(minibatch) == 4
    rates = {c.row: load_config(c.preset, c.overrides)[1].algorithm.hyperparameters()["lr"] for c in embedded if c.preset != "fedmatch"}
    assert {rate for row, rate in rates.items() if row not in minibatch} == {0.1} and {rates[row] for row in minibatch} == {0.03}
