"""benchmarks/verify_summary.py: the kept ``fedprior table --verify`` printouts summed up (issue 52, reruns on a second machine kind)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import verify_summary  # noqa: E402

PRINTOUT = """$ fedprior table t --embedded --verify --verify-all --jobs 1
# started 2026-12-07T10:10:18Z, load 5.55 5.20 3.94
Table I: verifying the committed cells in benchmarks/results/cells/t
A / b=1 seed 0: differs from round 3 (found by ...); final_accuracy 40.28 committed, 41.01 now (+0.73)
A / b=1 seed 1: other machine (recorded: ...): rerun, differs from round 0; final_accuracy 55.10 committed, 52.10 now (-3.00)
B / b=1 seed 0: other machine (recorded: ...): rerun, identical to the bit
largest difference per cell (|now - committed| over its rerun seeds):
  A / b=1: selected_accuracy 2.04 (seed 1), final_accuracy 3.00 (seed 1), final_macro_f1 1.01 (seed 0)
  B / b=1: final_accuracy 0.00 (seed 0)
claims (verdict on the committed 3 seed(s), and with the rerun seeds in their place):
  A > B, F1 (b=1): verdict changed: reversed -> not resolved (A - B: -3.53 [-6.52, -0.55] committed, -3.31 [-10.13, +3.51] now)
  A > B (b=1): verdict unchanged: holds (A - B: +3.33 [+0.34, +6.31] committed, +3.19 [+0.44, +5.94] now)
1 differs, 2 other machine, 1 verdict(s) changed
Command exited with non-zero status 1
# 1705.16 s wall, 1113.77 s user, 38.77 s sys
# rc=1 ended 2026-12-07T10:38:43Z
"""


def test_a_printout_gives_its_counts_largest_difference_and_changed_verdicts():
    found = verify_summary.summary_of(PRINTOUT)
    assert found["command"] == "fedprior table t --embedded --verify --verify-all --jobs 1"
    assert found["counts"] == {"differs": 1, "other machine": 2, "verdicts changed": 1} and found["reruns"] == 3
    assert found["largest_final_accuracy_difference"] == 3.0 and found["wall_seconds"] == 1705.16
    assert found["claims"] == {
        "A > B, F1 (b=1)": {"changed": True, "committed": "reversed", "rerun": "not resolved"},
        "A > B (b=1)": {"changed": False, "committed": "holds", "rerun": "holds"},
    }


def test_an_all_identical_printout_has_no_difference_and_no_claims(tmp_path, monkeypatch):
    (tmp_path / "t.txt").write_text(
        "$ fedprior table t --embedded --verify\nT: verifying\nR / c seed 0: identical\n1 identical\n# 9.5 s wall, 1 s user, 0 s sys\n"
    )
    monkeypatch.setattr(verify_summary, "FOLDER", tmp_path)
    verify_summary.main()
    table = json.loads((tmp_path / "summary.json").read_text())["tables"]["t"]
    assert table["counts"] == {"identical": 1} and table["largest_final_accuracy_difference"] is None and table["claims"] == {}


def test_a_verify_report_is_read_as_data_and_wins_over_a_printout_of_the_same_name(tmp_path, monkeypatch):
    (tmp_path / "t.txt").write_text("$ fedprior table t --embedded --verify\nT: verifying\nR / c seed 0: identical\n1 identical\n")
    value = {"final_accuracy": {"committed": 55.1, "now": 52.1}, "selected_accuracy": {"committed": 50.0, "now": 60.0}}
    report = {
        "table": "t",
        "command": "fedprior table t --embedded --verify --verify-all --json",
        "machine": {"kind": "k", "cpu": "c"},
        "cells": [{"row": "A", "column": "b=1", "seed": 0, "status": "other machine", "changed": True, "line": "...", "values": value}],
        "claims": [
            {"claim": "A > B (b=1)", "changed": True, "committed": {"verdict": "reversed"}, "rerun": {"verdict": "not resolved"}},
        ],
        "counts": {"other machine": 1, "identical": 2},
        "verdicts_changed": 1,
        "wall_seconds": 12.5,
        "reruns_reused": 1,
        "rerun_seconds": 830.0,
    }
    (tmp_path / "t.json").write_text(json.dumps(report))
    monkeypatch.setattr(verify_summary, "FOLDER", tmp_path)
    verify_summary.main()
    table = json.loads((tmp_path / "summary.json").read_text())["tables"]["t"]
    assert table["counts"] == {"other machine": 1, "identical": 2, "verdicts changed": 1} and table["reruns"] == 3
    assert (table["largest_final_accuracy_difference"], table["wall_seconds"], table["machine"]) == (3.0, 12.5, {"kind": "k", "cpu": "c"})
    assert (table["reruns_reused"], table["rerun_seconds"]) == (1, 830.0)  # the reruns' own time, where a verify reused them
    assert table["claims"] == {"A > B (b=1)": {"changed": True, "committed": "reversed", "rerun": "not resolved"}}
