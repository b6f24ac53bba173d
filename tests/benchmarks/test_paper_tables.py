"""benchmarks/paper_tables.py: a table's result file keeps every pass, and its copied-cell counters add up over them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from paper_tables import with_earlier_passes  # noqa: E402


def one_pass(command: str, seconds: float, continued: bool, copied: int, restored: int, finished: int) -> dict:
    return {
        "command": command,
        "machine": {"cores": 2},
        "wall_seconds": seconds,
        "continued_a_stopped_run": continued,
        "cells_copied_from_earlier_tables": copied,
        "cells_restored_from_keep": restored,
        "cells_finished": finished,
        "table": {"cells": [command]},
    }


def test_the_counters_add_up_over_the_passes_of_a_table():
    first = with_earlier_passes(None, one_pass("first", 7000.0, False, 6, 0, 30))
    assert [p["command"] for p in first["passes"]] == ["first"] and first["cells_copied_from_earlier_tables"] == 6
    second = with_earlier_passes(first, one_pass("second", 300.25, True, 2, 36, 4))
    assert [p["command"] for p in second["passes"]] == ["first", "second"]
    assert (second["cells_copied_from_earlier_tables"], second["cells_restored_from_keep"], second["cells_finished"]) == (8, 36, 34)
    assert (second["wall_seconds"], second["wall_seconds_all_passes"], second["command"]) == (300.25, 7300.2, "second")  # the last pass's, and the sum
    assert second["table"] == {"cells": ["second"]} and "table" not in second["passes"][1]
    again = with_earlier_passes(second, one_pass("from nothing", 10.0, False, 0, 0, 40))  # a pass that starts the table anew
    assert [p["command"] for p in again["passes"]] == ["from nothing"] and again["cells_finished"] == 40


def test_a_file_written_before_the_passes_were_kept_becomes_the_first_pass():
    old = {k: v for k, v in one_pass("old", 30.0, True, 5, 7, 0).items() if k != "cells_finished"}
    merged = with_earlier_passes(old, one_pass("new", 20.0, True, 1, 2, 3))
    assert merged["passes"][0] == {k: v for k, v in old.items() if k != "table"}
    assert (merged["cells_copied_from_earlier_tables"], merged["cells_restored_from_keep"], merged["cells_finished"]) == (6, 9, 3)


def test_a_plan_is_made_once_kept_by_every_pass_and_refused_once_new_seeds_ran(tmp_path):
    """--plan stores the plan with its date and commit; a second --plan keeps it (no peeking); a later pass keeps it; a
    record whose cells already have more seeds than the table's gets none."""
    import json

    import pytest
    from paper_tables import store_plan

    record = json.loads((BENCHMARKS / "results" / "tables" / "fst-cbdg-table2.json").read_text())
    record.pop("plan", None)
    (tmp_path / "fst-cbdg-table2.json").write_text(json.dumps(record))
    plan, made = store_plan("fst-cbdg-table2", tmp_path)
    stored = json.loads((tmp_path / "fst-cbdg-table2.json").read_text())
    assert made and stored["plan"] == plan and plan["made"].endswith("UTC") and list(stored)[-2:] == ["plan", "table"]
    again, made_again = store_plan("fst-cbdg-table2", tmp_path, budget=1.0)
    assert not made_again and again == plan  # the stored plan, not one made with the new budget
    after = with_earlier_passes(stored, one_pass("a planned pass", 5.0, True, 0, 120, 2))
    assert after["plan"] == plan
    grown = json.loads(json.dumps(record))
    grown["table"]["cells"][0]["seeds"] = 4
    (tmp_path / "fst-cbdg-table2.json").write_text(json.dumps(grown))
    with pytest.raises(ValueError, match="have other than the table's 3 seeds; a plan is made before any new seed runs"):
        store_plan("fst-cbdg-table2", tmp_path)


def test_a_second_plan_after_a_verify_is_stored_beside_the_first_once_and_refused_without_a_changed_verdict(tmp_path):
    """--plan-after-verify REPORT: the claims whose verdict changed on another machine kind get their seeds in the record's
    plan (``after_verify``), made once; a report of another table, one where nothing changed, or a record without a first
    plan is refused."""
    import json

    import pytest
    from paper_tables import store_verify_plan

    record = json.loads((BENCHMARKS / "results" / "tables" / "fedbm-table1.json").read_text())
    record["plan"].pop("after_verify", None)
    for cell in record["table"]["cells"]:  # the record as it was when its second plan was made: three seeds at beta 0.05
        if cell["column"] == "beta=0.05":
            cell["seconds"], cell["seeds"] = cell["seconds"] * 3 / cell["seeds"], 3
    (tmp_path / "fedbm-table1.json").write_text(json.dumps(record))
    finding = {"claim": "FedBM > FedETF, F1 (beta=0.05)", "better": "FedBM", "worse": "FedETF", "column": "beta=0.05", "n": 3}
    committed = finding | {"verdict": "reversed", "mean": -3.53, "sd": 1.2}
    rerun = finding | {"verdict": "not resolved", "mean": -3.31, "sd": 2.75}
    report = {
        "table": "fedbm-table1",
        "command": "fedprior table fedbm-table1 --embedded --verify --verify-all --json",
        "machine": {"kind": "kind", "cpu": "cpu"},
        "claims": [{"claim": finding["claim"], "changed": True, "committed": committed, "rerun": rerun}],
    }
    path = tmp_path / "verify.json"
    path.write_text(json.dumps(report))
    after, made = store_verify_plan("fedbm-table1", path, tmp_path)
    stored = json.loads((tmp_path / "fedbm-table1.json").read_text())
    assert made and stored["plan"]["after_verify"] == after and stored["plan"]["claims"] == record["plan"]["claims"]
    (claim,) = after["claims"]
    assert claim["seeds_planned"] == claim["seeds_needed"] > 3 and after["report"] == str(path)
    assert {c["row"] for c in after["cells"]} == {"FedBM", "FedETF"} and {c["column"] for c in after["cells"]} == {"beta=0.05"}
    again, made_again = store_verify_plan("fedbm-table1", path, tmp_path)
    assert not made_again and again == after
    record["plan"].pop("after_verify", None)
    (tmp_path / "fedbm-table1.json").write_text(json.dumps(record))
    path.write_text(json.dumps(report | {"claims": [report["claims"][0] | {"changed": False}]}))
    with pytest.raises(ValueError, match="no verdict changed on the other machine kind"):
        store_verify_plan("fedbm-table1", path, tmp_path)
    path.write_text(json.dumps(report | {"table": "fedbm-table6"}))
    with pytest.raises(ValueError, match="is a verify of fedbm-table6, not fedbm-table1"):
        store_verify_plan("fedbm-table1", path, tmp_path)
    (tmp_path / "fedbm-table1.json").write_text(json.dumps({k: v for k, v in record.items() if k != "plan"}))
    with pytest.raises(ValueError, match="stores no seed plan; make the first one before a second"):
        store_verify_plan("fedbm-table1", path, tmp_path)
