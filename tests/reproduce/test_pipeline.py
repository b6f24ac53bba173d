"""reproduce_table (fedprior.reproduce.pipeline) and its typed results (fedprior.reproduce.table_result) against committed tables."""

import json
import shutil
from pathlib import Path

import pytest

import fedprior
from fedprior.reproduce.pipeline import evaluate_again
from fedprior.reproduce.seed_plan import with_plan
from fedprior.reproduce.table_result import TableResult

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def committed(name: str) -> dict:
    return json.loads((BENCHMARKS / "tables" / f"{name}.json").read_text())["table"]


def test_a_committed_table_comes_back_from_its_kept_cells_without_training(tmp_path, monkeypatch):
    """fst-cbdg-table2's kept cells (40 cells x 3 seeds) in the folder: every run is reused, and table.json and table.md are
    the committed ones (table.md but for its command line, which names the folder)."""
    from fedprior.experiments import runner

    def trains(*args, **kwargs):
        raise AssertionError("a kept cell was trained again")

    monkeypatch.setattr(runner, "start", trains)
    monkeypatch.setattr(runner, "resume", trains)
    out = tmp_path / "t2"
    shutil.copytree(BENCHMARKS / "cells" / "fst-cbdg-table2", out)
    lines: list[str] = []
    document = committed("fst-cbdg-table2")
    seeds = {(c["row"], c["column"]): c["seeds"] for c in document["cells"]}  # as many as the record's cells had (a seed plan's)
    table = fedprior.reproduce_table("fst-cbdg-table2", out=out, jobs=1, on_progress=lines.append, cell_seeds=seeds)
    assert (out / "table.json").read_text() == json.dumps(table.to_json(), indent=2)
    plan = json.loads((BENCHMARKS / "tables" / "fst-cbdg-table2.json").read_text()).get("plan")
    shown = with_plan(table, plan)  # the record is the table with its plan's seeds beside its findings
    assert json.dumps(shown.to_json(), indent=2) == json.dumps(document, indent=2)
    runs = sum(seeds.values())
    assert lines[1] == f"continuing the table in {out}: {runs} finished run(s) reused, 0 resumed" and len(lines) == 2 + runs

    def without_command(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("command: ")]

    page = (BENCHMARKS / "tables" / "fst-cbdg-table2.md").read_text()
    assert without_command(shown.markdown(command="-")) == without_command(page)
    assert f"command: `fedprior table fst-cbdg-table2 --embedded --jobs 1 --out {out}`" in (out / "table.md").read_text()
    kept = next(c for c in committed("fst-cbdg-table2")["cells"] if (c["row"], c["column"]) == ("FST-CBDG", "s=2"))
    assert table.folder == out and table.cell("FST-CBDG", "s=2").finals == tuple(kept["finals"])


@pytest.mark.parametrize("path", sorted((BENCHMARKS / "tables").glob("*.json")), ids=lambda p: p.stem)
def test_every_committed_table_json_reads_back_to_the_same_document(path):
    document = json.loads(path.read_text())["table"]
    table = TableResult.from_json(document)
    assert json.dumps(table.to_json(), indent=2) == json.dumps(document, indent=2)  # keys, order and values
    assert {f.verdict for f in table.findings} <= {"holds", "reversed", "not resolved", "setting not informative", "not run"}


def test_evaluating_a_committed_table_again_gives_its_findings():
    """What ``benchmarks/paper_tables.py --findings-only`` does: the controls and findings from the cells, nothing trained."""
    document = committed("fst-cbdg-table2")
    again = evaluate_again(TableResult.from_json({**document, "controls": [], "findings": [], "notices": []}))
    plan = json.loads((BENCHMARKS / "tables" / "fst-cbdg-table2.json").read_text()).get("plan")
    assert with_plan(again, plan).to_json() == document


def test_bad_input_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(fedprior.ConfigError, match="unknown table 'nope'; accepted: fst-cbdg-table1"):
        fedprior.reproduce_table("nope", out=tmp_path)
    with pytest.raises(fedprior.ConfigError, match="expected a list of strings"):
        fedprior.reproduce_table("fst-cbdg-table2", overrides="federation.rounds=1", out=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(fedprior.ConfigError, match="--rows: unknown row"):
        fedprior.reproduce_table("fst-cbdg-table2", rows=["nope"], out=tmp_path)
    with pytest.raises(fedprior.ConfigError, match="fedbm-table3: no cell of this table runs in the embedded setting"):
        fedprior.reproduce_table("fedbm-table3", out=tmp_path)
    assert list(tmp_path.iterdir()) == []
