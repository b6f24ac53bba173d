"""FedDB's tables: the all-labels control keeps its count, each claim's capability and budget margin is its paper gap,
and the pseudo-label claims are gated on matched coverage (issue 52)."""

from __future__ import annotations

from fedprior.experiments.config import load_config
from fedprior.papers.feddb.tables import ALL_LABELS, PL_ACCURACY, PL_COVERAGE, TABLE2, TABLE4
from fedprior.reproduce.tables import cells


def test_the_all_labels_row_keeps_its_count_under_a_set_of_num_labeled():
    chosen = cells(TABLE2, True, ["partition.num_labeled=500"], rows=["FedAvg", ALL_LABELS.label])
    by_row = {c.row: load_config(c.preset, c.overrides)[1].partition.num_labeled for c in chosen}
    assert by_row == {"FedAvg": 500, ALL_LABELS.label: 20250}


def test_capability_and_budget_margins_are_each_claims_paper_gap():
    gaps = {c.name: c.gap for c in TABLE4.claims}
    assert gaps == {
        "DPL > no DPL (CIFAR10 δ=0.3)": 2.93,
        "DPL > no DPL (CIFAR10 δ=0.1)": 1.99,
        "DPL + DMA > DPL (CIFAR10 δ=0.3)": 1.08,
        "DPL + DMA > DPL (CIFAR10 δ=0.1)": 0.82,
    }
    for above in ("Central FixMatch (mini-batch)", "Central FixMatch (sequential steps)"):
        margins = {g: c.margin for c in TABLE4.controls if getattr(c, "above", None) == above for g in c.gates}
        assert margins == gaps
    table2 = {c.name: c.gap for c in TABLE2.claims if c.metric != PL_ACCURACY}
    assert table2["FedDB > FedAvg (CIFAR10 δ=0.3)"] == 7.28 and table2["FedDB > FixMatch (CIFAR10 δ=0.3)"] == 4.01


def test_the_pseudo_label_claims_are_gated_on_matched_coverage():
    for claim in (c for c in TABLE2.claims if c.metric == PL_ACCURACY):
        (coverage,) = [c for c in TABLE2.gating(claim) if getattr(c, "metric", None) == PL_COVERAGE]
        assert (coverage.above, coverage.below, coverage.margin) == (claim.better, claim.worse, -5.0)
        assert coverage.gates == (claim.name,)
