"""A FedDB run logs the paper's diagnostics every round and draws them in its report."""

from __future__ import annotations

import json

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


def test_fixmatch_is_feddb_without_dpl_and_dma_to_the_bit(tmp_path):
    """Table 4's "no DPL, no DMA" row runs the `fixmatch` preset, and so shares Table 2's FixMatch cells: both
    algorithms must then train the same model, round for round, from the same seed."""
    tiny = [*TINY, "partition.num_unlabeled=300"]  # unlabeled images, so that pseudo-labeling takes part
    results = {}
    for preset, extra in (("fixmatch", []), ("feddb", ["algorithm.dpl=false", "algorithm.dma=false"])):
        name, config = load_config(preset, [*tiny, *extra])
        start(name, config, tmp_path / preset, report_extras=False)
        results[preset] = json.loads((tmp_path / preset / "result.json").read_text())
    fixmatch, feddb = results["fixmatch"], results["feddb"]
    assert fixmatch["round_fingerprints"] == feddb["round_fingerprints"] and len(fixmatch["round_fingerprints"]) == 3  # round 0 and two trained
    assert fixmatch["state_sha256"] == feddb["state_sha256"]
    assert fixmatch["mean_client_pl_coverage"] > 0  # pseudo-labels were taken
