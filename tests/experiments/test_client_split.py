"""Model selection on a validation split (run.model_selection), and data.train_subset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprior.algorithms.pieces.metrics import selected_round, selection_score
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.runtime.simulation import reportable

DIGITS = ["data.dataset=digits", "federation.num_clients=4", "federation.fraction=1.0"]


def record(round_, acc, f1, prec=0.5, auc=0.5, test=0.0):
    return {"round": round_, "accuracy": test, "validation_accuracy": acc, "validation_macro_f1": f1, "validation_macro_precision": prec, "validation_auc": auc}


def test_the_round_with_the_highest_code_score_is_selected_first_one_on_ties():
    history = [record(1, 0.5, 0.4, test=0.1), record(2, 0.6, 0.1, test=0.2), record(3, 0.5, 0.4, test=0.3), {"round": 4}]
    # scores: acc + acc + precision + f1 + auc = 2.4, 2.3, 2.4 -> round 1 (the first best, as the code's strict '>')
    assert selection_score(history[0]) == pytest.approx(2.4)
    assert selected_round(history)["round"] == 1
    assert selected_round([{"round": 1, "accuracy": 0.5}]) is None


def test_validation_is_held_out_of_the_pool_and_the_summary_reports_the_selected_round(tmp_path):
    name, config = load_config("fedavg-cnn", [*DIGITS, "federation.rounds=2", "run.model_selection=validation", "data.validation_fraction=0.2"])
    experiment = build_experiment(name, config)
    held = np.setdiff1d(np.arange(experiment.dataset.train_labels.size), experiment.pool)
    assert held.size == pytest.approx(0.2 * experiment.dataset.train_labels.size, abs=10)
    assert np.bincount(experiment.dataset.train_labels[held]).min() >= 25  # stratified: every class gives its share
    clients = np.concatenate([experiment.partition.holdings(c) for c in range(4)])
    assert np.intersect1d(clients, held).size == 0
    summary = start(name, config, tmp_path / "run")
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    best = max(lines, key=selection_score)
    assert summary["selected_round"] == best["round"] and summary["selected_accuracy"] == best["accuracy"]
    assert summary["selected_macro_f1"] == best["macro_f1"] and "final_macro_f1" in summary
    assert "chosen on the validation split" in (tmp_path / "run" / "report.md").read_text()


def test_selectable_test_metrics_are_computed_only_where_a_round_can_be_reported():
    history = [record(1, 0.5, 0.4), record(2, 0.6, 0.1)]  # scores 2.4, 2.3
    assert reportable({}, [], last=True)  # a stage's last round: the final metrics
    assert not reportable({}, history, last=False)  # no validation split: only the last round
    assert reportable(record(3, 0.6, 0.4), history, last=False)  # 2.6 beats 2.4
    assert not reportable(record(3, 0.5, 0.4), history, last=False)  # a tie: the first best is kept
    assert not reportable(record(3, 0.1, 0.1), history, last=False)
    assert reportable(record(1, 0.1, 0.1), [], last=False)  # the first validated round


def test_selectable_test_metrics_report_what_every_evaluation_reports(tmp_path):
    runs = {}
    for when in ("every-evaluation", "selectable"):
        # half participation on a Dirichlet(0.1) split: validation does not improve every round
        skewed = ["federation.fraction=0.5", "partition.scheme=dirichlet", "partition.alpha=0.1", "federation.rounds=5"]
        overrides = [*DIGITS, *skewed, "run.model_selection=validation", f"run.test_metrics={when}"]
        runs[when] = start(*load_config("fedavg-cnn", overrides), tmp_path / when)
    every, selectable = runs["every-evaluation"], runs["selectable"]
    for key in ("selected_round", "selected_accuracy", "selected_macro_f1", "final_accuracy", "final_macro_f1"):
        assert selectable[key] == every[key], key
    lines = [json.loads(line) for line in (tmp_path / "selectable" / "metrics.jsonl").read_text().splitlines()]
    rounds = [r for r in lines if "validation_accuracy" in r and r.get("step")]
    assert len(rounds) == 5
    scored = [r["step"] for r in rounds if "accuracy" in r]
    best_so_far = [r["step"] for i, r in enumerate(rounds) if all(selection_score(r) > selection_score(e) for e in rounds[:i])]
    assert scored == sorted({*best_so_far, 5}) and len(scored) < 5  # some test evaluations were skipped


def test_without_model_selection_nothing_is_held_out_and_subsets_are_fixed():
    name, config = load_config("fedavg-cnn", DIGITS)
    experiment = build_experiment(name, config)
    assert experiment.pool.size == experiment.dataset.train_labels.size
    assert "validation_accuracy" not in experiment.algorithm.evaluate(experiment.algorithm.init(_info()), experiment.test)
    pools = [build_experiment(*load_config("fedavg-cnn", [*DIGITS, "data.train_subset=300", f"run.seed={s}"])).pool for s in (0, 1)]
    assert pools[0].size == 300 and np.array_equal(pools[0], pools[1])
    with pytest.raises(Exception, match="data.train_subset"):
        build_experiment(*load_config("fedavg-cnn", [*DIGITS, "data.train_subset=100000"]))


def _info():
    from fedprior.algorithms.base import RoundInfo

    return RoundInfo(0, "federated", 0)


def test_a_validation_fraction_that_leaves_a_class_out_is_refused_with_one_that_works():
    from fedprior.errors import ConfigError
    from fedprior.experiments.client_split import check_hold_out, hold_out

    labels = np.array([0] * 100 + [1] * 3)
    with pytest.raises(ConfigError) as error:
        check_hold_out(labels, 0.1)  # 10 images of class 0, round(0.3) = 0 of class 1
    assert str(error.value) == (
        "data.validation_fraction: 0.1 of the 103 training images holds out 10 images, none of class 1; the validation split "
        "(run.model_selection = 'validation') needs at least one per class (2): use at least 0.34"
    )
    _, held = hold_out(np.arange(labels.size), labels, 0.34, seed=0)  # the fraction the message suggests works
    assert np.bincount(labels[held]).tolist() == [34, 1]
    with pytest.raises(ConfigError, match=r"1e-05 of the 60000 training images holds out 0 images;.* at least one per class \(10\): use at least 0.00017"):
        check_hold_out(np.repeat(np.arange(10), 6000), 0.00001)  # Fashion-MNIST's 60,000 images
