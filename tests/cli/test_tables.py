"""fedprior tables (every table's grid and measured cost) and the controls that fedprior table prints on the terminal."""

import json
from pathlib import Path

from fedprior.cli.table import control_lines
from fedprior.papers import table_by_name
from fedprior.reproduce.findings import evaluate
from fedprior.reproduce.tables import MeasuredControl
from tests.support.cli import error_line, invoke

ROOT = Path(__file__).resolve().parents[2]


def block(output: str, name: str) -> list[str]:
    """The lines of one table in ``fedprior tables``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


RECORD = {
    "command": "fedprior table mfcl-table8 --embedded --jobs 3 --out /tmp/t8",
    "machine": {"cores": 7, "kind": "Linux x86_64, torch 2.13.0+cpu, CPU capability AVX2"},
    "wall_seconds": 12.4,
    "continued_a_stopped_run": True,
    "cells_copied_from_earlier_tables": 2,
    "table": {"setting": "embedded", "seeds": 3, "cells": [{"row": "FedSimCLR"}]},
}
"""A record as benchmarks/paper_tables.py writes it: one of the table's two cells, its first pass not timed."""


def test_tables_lists_each_grid_and_its_recorded_cost(tmp_path):
    (tmp_path / "mfcl-table8.json").write_text(json.dumps(RECORD))
    result = invoke("tables", "--results", tmp_path)
    assert result.exit_code == 0, result.output
    assert block(result.stdout, "mfcl-table8") == [
        "mfcl-table8: " + table_by_name("mfcl-table8").title,
        "  paper setting: 2 rows x 1 columns = 2 cells, 1 seed by default",
        "    columns: CIFAR-10 Sc2",
        "  embedded: 2 rows x 1 columns = 2 cells, 3 seeds by default: 6 runs",
        "    columns: Sc2",
        "  rows: FedSimCLR, MFCL",
        "  claims: 1, controls: 0",
        "  cost: 12 s wall for 1 of 2 embedded cells x 3 seeds, --jobs 3, on 7 cores (Linux x86_64, torch 2.13.0+cpu, CPU capability AVX2); "
        "it continued a stopped run: the earlier passes' time is not in it; 2 runs copied from earlier tables: their time is not in it",
    ]
    t12 = block(result.stdout, "fedbm-table12")
    assert "  embedded: 3 rows x 2 columns = 6 cells, 3 seeds by default: 18 runs" in t12
    assert "    rows left out there: Bert, RoBERTa, BiomedCLIP (text backbone)" in t12
    assert t12[-1] == f"  cost: not measured (no {tmp_path / 'fedbm-table12.json'})"
    assert "  embedded: no cell runs there (its datasets are not embedded)" in block(result.stdout, "fedbm-table2")
    listed = json.loads(invoke("tables", "--results", tmp_path, "--json").stdout)
    assert len(listed) == result.stdout.count("\n  rows: ")
    (entry,) = [e for e in listed if e["table"] == "mfcl-table8"]
    assert entry["cost"]["wall_seconds"] == 12.4 and entry["embedded"]["cells"] == 2


def test_the_committed_records_give_every_pass_time():
    """fedbm-table1's record: two passes, 2234 s in all (the last one 990 s)."""
    result = invoke("tables")
    record = json.loads(open("benchmarks/results/tables/fedbm-table1.json").read())
    cost = block(result.stdout, "fedbm-table1")[-1]
    assert cost.startswith(f"  cost: {record['wall_seconds_all_passes']:.0f} s wall over {len(record['passes'])} passes for 16 of 26 embedded cells x 3 seeds")


def fake_cells(values: dict) -> list:
    """Cells of fst-cbdg-table4 as aggregate_table gives them: (row, column) -> final accuracy per seed."""
    return [{"row": r, "column": c, "metrics": {"final_accuracy": {"values": v, "paper": None}}} for (r, c), v in values.items()]


def test_each_control_is_one_line_with_its_status_and_numbers():
    table = table_by_name("fst-cbdg-table4")
    results = fake_cells(
        {
            ("CLIP-ZS", "s=10"): [60.0, 62.0],
            ("CLIP-FC-Centralized", "s=10"): [80.0, 81.0],
            ("CLIP-ZS", "iid"): [60.0, 60.0],
            ("CLIP-FC-Centralized", "iid"): [65.0, 66.0],
            ("Equal sampling", "a=0.1"): [50.0, 50.0],
        }
    )
    lines = control_lines(evaluate(table, results, True)["controls"])
    assert lines == [
        "controls (on the mean over seeds; where one fails, the claims it gates there get no verdict):",
        "  passed   CLIP-FC-Centralized at least 8 points above CLIP-ZS at s=10: 80.5 vs 61.0, difference +19.5, needed 8",
        "  failed   CLIP-FC-Centralized at least 8 points above CLIP-ZS at iid: 65.5 vs 60.0, difference +5.5, needed 8",
        "  not run  CLIP-FC-Centralized at least 8 points above CLIP-ZS at a=0.1: row(s) CLIP-FC-Centralized, CLIP-ZS not run",
    ]
    feddb = table_by_name("feddb-table2")
    (strong_view,) = [c for c in feddb.controls if isinstance(c, MeasuredControl)]
    measured = evaluate(feddb, fake_cells({("FedAvg", "δ=0.3"): [50.0]}), True, {(strong_view.condition, "δ=0.3"): (37.8, "on 500 images")})
    assert control_lines([c for c in measured["controls"] if c.get("kind") == "measured"]) == [
        "controls (on the mean over seeds; where one fails, the claims it gates there get no verdict):",
        f"  failed   {strong_view.condition} at δ=0.3: 37.8, needed 60 (on 500 images)",
    ]
    assert control_lines([]) == ["controls: none (nothing in this table bounds what a method can reach)"]


def test_table_prints_its_controls_on_the_terminal(tmp_path):
    """Raw pixels alone (nothing trained): both controls of the column are printed, not run, with the rows they lack."""
    overrides = ["data.dataset=digits", "data.train_subset=200", "run.workers=1"]
    result = invoke(
        "table", "mfcl-table2", "--embedded", "--rows", "raw pixels", "--columns", "Sc2", "--seeds", "1", "--jobs", "1",
        *(arg for o in overrides for arg in ("--set", o)), "--out", tmp_path / "t",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("controls (on the mean over seeds; where one fails, the claims it gates there get no verdict):")
    assert lines[start + 1 : start + 5] == [  # one trained-above-untrained control per compared row (issue 52), in row order
        "  not run  MFCL(BN) at least 5 points above MFCL(BN) untrained at Sc2: row(s) MFCL(BN), MFCL(BN) untrained not run",
        "  not run  MFCL(GN) at least 5 points above MFCL(GN) untrained at Sc2: row(s) MFCL(GN), MFCL(GN) untrained not run",
        "  not run  MFCL(PN) at least 5 points above MFCL(PN) untrained at Sc2: row(s) MFCL(PN), MFCL(PN) untrained not run",
        "  not run  FedSimCLR at least 5 points above FedSimCLR untrained at Sc2: row(s) FedSimCLR, FedSimCLR untrained not run",
    ]
    assert "  not run  FedAvg at least 0 points above raw pixels at Sc2: row(s) FedAvg not run" in lines


def test_tables_names_a_damaged_record_and_a_missing_results_folder(tmp_path):
    (tmp_path / "fst-cbdg-table2.json").write_text("{damaged")
    line = error_line(invoke("tables", "--results", tmp_path))
    assert line.startswith(f"error: --results: {tmp_path / 'fst-cbdg-table2.json'} is not valid JSON (")
    missing = tmp_path / "no" / "such"
    line = error_line(invoke("tables", "--results", missing))
    assert line == f"error: --results: {missing} is not a folder; give the folder of the tables' records NAME.json (benchmarks/results/tables)"


def test_plan_prints_the_stored_plan_or_one_made_now_and_runs_nothing(tmp_path):
    """``fedprior table NAME --plan``: per claim its seeds needed, planned and their CPU seconds, from the record."""
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from fedprior.cli.app import app

    record = json.loads((Path(__file__).resolve().parents[2] / "benchmarks/results/tables/fst-cbdg-table2.json").read_text())
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({k: v for k, v in record.items() if k != "plan"}))
    made = CliRunner().invoke(app, ["table", "fst-cbdg-table2", "--plan", "--record", str(bare)], env={"COLUMNS": "400"})
    assert made.exit_code == 0, made.output
    assert made.output.startswith("seed plan, not stored: made now from the record's seeds; budget 21600 CPU s")
    assert "FST-CBDG > FedAvg (s=2) [not resolved]: n=3, detects" in made.output and "CPU s" in made.output
    from fedprior.reproduce.seed_plan import make_plan
    from fedprior.reproduce.table_result import TableResult

    stored = tmp_path / "stored.json"
    plan = make_plan(TableResult.from_json(record["table"]), budget=10.0, made="then", commit="abc1234")
    stored.write_text(json.dumps({**record, "plan": plan}))
    shown = CliRunner().invoke(app, ["table", "fst-cbdg-table2", "--plan", "--record", str(stored)], env={"COLUMNS": "400"})
    assert shown.output.startswith("seed plan, stored in the table's record (then, commit abc1234); budget 10 CPU s")
    wrong = CliRunner().invoke(app, ["table", "fst-cbdg-table1", "--plan", "--record", str(bare)])
    assert wrong.exit_code != 0 and "is table fst-cbdg-table2, not fst-cbdg-table1" in wrong.output


def test_planned_seeds_runs_the_cells_of_the_stored_plan_with_their_seeds(tmp_path, monkeypatch):
    """``fedprior table NAME --planned-seeds --record R``: the cells R's stored plan gives more seeds get them
    (``reproduce_table(cell_seeds=...)``); a record without a plan, or of another table, is refused before anything runs."""
    import fedprior.reproduce.pipeline as pipeline
    from fedprior.reproduce.table_result import TableResult

    record = json.loads((ROOT / "benchmarks/results/tables/mfcl-table2.json").read_text())
    seen = {}

    def fake(name, **kwargs):
        seen.update(kwargs, name=name)
        return TableResult.from_json(record["table"])

    monkeypatch.setattr(pipeline, "reproduce_table", fake)
    stored = tmp_path / "stored.json"
    stored.write_text(json.dumps({**record, "plan": {**record["plan"], "cells": [{"row": "MFCL(PN)", "column": "Sc2", "seeds": 6}]}}))
    result = invoke("table", "mfcl-table2", "--embedded", "--planned-seeds", "--record", stored, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert seen["name"] == "mfcl-table2" and seen["cell_seeds"] == {("MFCL(PN)", "Sc2"): 6}
    seen.clear()
    assert invoke("table", "mfcl-table2", "--embedded", "--out", tmp_path / "out").exit_code == 0 and seen["cell_seeds"] is None
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({k: v for k, v in record.items() if k != "plan"}))
    seen.clear()
    line = error_line(invoke("table", "mfcl-table2", "--embedded", "--planned-seeds", "--record", bare))
    assert line == f"error: --planned-seeds: {bare} stores no seed plan (make one with benchmarks/paper_tables.py mfcl-table2 --plan)" and not seen
    line = error_line(invoke("table", "mfcl-table7", "--embedded", "--planned-seeds", "--record", stored))
    assert line == f"error: --record: {stored} is table mfcl-table2, not mfcl-table7" and not seen
