"""A FedDB run logs the paper's diagnostics every round and draws them in its report."""

from __future__ import annotations

import json

import pytest

from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start

TINY = [
    "data.dataset=digits",
    "federation.num_clients=6",
    "federation.fraction=0.5",
    "federation.rounds=2",
    "federation.evaluate_every=1",  # the preset scores every 5 rounds; the diagnostics come with each evaluation
    "federation.local_epochs=1",
    "partition.num_labeled=120",
    "partition.num_unlabeled=0",
    "algorithm.width=4",
    "algorithm.threshold=0.3",
]


def test_feddb_run_logs_diagnostics_and_draws_them(tmp_path):
    name, config = load_config("feddb", TINY)
    summary = start(name, config, tmp_path / "run")
    rounds = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rounds) == 2
    for record in rounds:
        assert len(record["aggregation_weights"]) == 3 and abs(sum(record["aggregation_weights"]) - 1) < 1e-5
        assert record["appu_distance"] >= 0 and record["appu_distance_uniform"] >= 0
        assert 0 <= record["js_appu_mean"] <= 1 and 0 <= record["js_labeled_mean"] <= 1
        assert len(record["class_accuracy"]) == 10
        for key in ("client_pl_coverage_plain", "client_pl_coverage_dpl", "client_pl_accuracy_all_plain"):
            assert 0 <= record[key] <= 1
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Diagnostics" in report
    for figure in ("pseudo_labels.png", "class_accuracy.png", "bias.png", "augment.png", "partition-labeled.png", "partition-unlabeled.png"):
        assert (tmp_path / "run" / figure).read_bytes()[:4] == b"\x89PNG" and f"]({figure})" in report
    assert 0 <= summary["mean_client_pl_coverage_dpl"] <= 1 and "mean_appu_distance" in summary


def test_a_table_cell_without_the_report_still_records_the_diagnostics_means(tmp_path):
    """Table cells skip the figures (report_extras=False), but their claims test the pseudo-label accuracy."""
    name, config = load_config("fixmatch", TINY)
    summary = start(name, config, tmp_path / "run", report_extras=False)
    rounds = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    coverage = [r["client_pl_coverage"] for r in rounds if "client_pl_coverage" in r]
    assert len(coverage) == 2 and summary["mean_client_pl_coverage"] == sum(coverage) / 2
    assert json.loads((tmp_path / "run" / "result.json").read_text())["mean_client_pl_coverage"] == summary["mean_client_pl_coverage"]
    assert not (tmp_path / "run" / "pseudo_labels.png").exists()


@pytest.mark.parametrize(
    ("fixmatch", "feddb", "dpl"),
    [
        ([], ["algorithm.dpl=false", "algorithm.dma=false"], False),  # Table 4's "no DPL, no DMA" row: Table 2's FixMatch cells
        # Tables 1-3's "FixMatch-FedDPL" row: Table 4's "DPL" cells (a lower tau: the tiny net's debiased predictions are flat)
        (["algorithm.dpl=true", "algorithm.threshold=0.15"], ["algorithm.dma=false", "algorithm.threshold=0.15"], True),
    ],
)
def test_fixmatch_is_feddb_without_dma_to_the_bit(tmp_path, fixmatch, feddb, dpl):
    """FixMatch (with or without DPL) and FedDB without DMA (and with or without DPL) train the same model, round
    for round, from the same seed: the tables run one preset for both rows, so that they share their cells."""
    tiny = [*TINY, "partition.num_unlabeled=300"]  # unlabeled images, so that pseudo-labeling takes part
    results = {}
    for preset, extra in (("fixmatch", fixmatch), ("feddb", feddb)):
        name, config = load_config(preset, [*tiny, *extra])
        assert config.algorithm.dpl is dpl
        start(name, config, tmp_path / preset, report_extras=False)
        results[preset] = json.loads((tmp_path / preset / "result.json").read_text())
    one, other = results["fixmatch"], results["feddb"]
    assert one["round_fingerprints"] == other["round_fingerprints"] and len(one["round_fingerprints"]) == 3  # round 0 and two trained
    assert one["state_sha256"] == other["state_sha256"]
    assert one["mean_client_pl_coverage"] > 0  # pseudo-labels were taken (by DPL's rule where it is on)
