"""Issue 31 item 3: the GPU setting's commands are valid tables and configs; ``-m benchmark`` runs them at a tiny size."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from fedprior.experiments.config import load_config
from fedprior.reproduce.paper_tables import table_by_name
from fedprior.reproduce.tables import cells

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import gpu_setting  # noqa: E402


@pytest.mark.parametrize("size", ["gpu", "tiny"])
@pytest.mark.parametrize("name", sorted(gpu_setting.TABLES))
def test_every_cell_of_the_gpu_setting_loads_with_its_overrides(name, size):
    spec = gpu_setting.TABLES[name]
    rows = spec["rows"].split(",")
    grid = cells(table_by_name(spec["table"]), embedded=True, extra=[*spec[size], "run.device=cpu"], rows=rows, columns=[spec["column"]])
    assert sorted({c.row for c in grid}) == sorted(rows)
    for cell in grid:
        _, config = load_config(cell.preset, cell.overrides)  # an unknown key (a field another row lacks) fails here
        if size == "gpu" and cell.row.startswith("Central"):
            assert config.federation.num_clients == 1
        if cell.row.endswith("untrained"):
            assert config.federation.rounds == 0  # the size's --set federation.rounds does not train the control
    if size == "gpu" and name == "feddb":
        (fedavg,) = [c for c in grid if c.row == "FedAvg"]
        assert load_config(fedavg.preset, fedavg.overrides)[1].federation.rounds == 800


@pytest.mark.parametrize("name", sorted(gpu_setting.TABLES))
def test_the_controls_only_rows_are_the_rows_of_the_tables_central_controls(name, tmp_path):
    """--controls-only runs exactly the rows of the table's central controls (in this spec's rows)."""
    spec = gpu_setting.TABLES[name]
    command = gpu_setting.table_command(spec, "gpu", tmp_path, "cpu", 4, controls_only=True)
    rows = set(command[command.index("--rows") + 1].split(","))
    pairs = [(c.above, c.below) for c in table_by_name(spec["table"]).controls if hasattr(c, "above")]
    central = {row for pair in pairs if pair[0].startswith("Central") and set(pair) <= set(spec["rows"].split(",")) for row in pair}
    assert central and rows == central, (central, rows)


def test_the_device_script_runs_the_gpu_setting_outside_a_dry_run():
    lines = [line for line in (BENCHMARKS / "device_extra.txt").read_text().splitlines() if line and not line.startswith("#")]
    (line,) = [line for line in lines if line.startswith("gpu-setting ")]
    assert "benchmarks/gpu_setting.py --device $DEVICE" in line and '[ "$DRY_RUN" = 1 ] && exit 0' in line


def test_each_cell_runs_the_seeds_the_tables_stored_plan_gives_it(tmp_path):
    """Issue 52 item 6: by default a table runs with ``--planned-seeds`` on its committed record, whose stored plan gives
    the cells their seeds (the record's seeds elsewhere); ``--seeds N`` runs N everywhere."""
    spec = gpu_setting.MFCL_ROWS
    committed = json.loads((gpu_setting.RECORDS / "mfcl-table2.json").read_text())
    planned = {c["row"]: c["seeds"] for c in committed["plan"]["cells"] if c["column"] == spec["column"]}
    assert planned.get("MFCL(PN)", 0) > committed["table"]["seeds"]  # the committed plan gives the federated row more seeds
    assert gpu_setting.planned_seeds(spec) == {row: planned.get(row, committed["table"]["seeds"]) for row in spec["rows"].split(",")}
    record = {"table": {"table": "mfcl-table2", "seeds": 2}, "plan": {"cells": [{"row": "Central MFCL(PN)", "column": "Sc2", "seeds": 7}]}}
    (tmp_path / "mfcl-table2.json").write_text(json.dumps(record))
    assert gpu_setting.planned_seeds(spec, tmp_path) == {
        "MFCL(PN)": 2,
        "MFCL(PN) untrained": 2,
        "Central MFCL(PN)": 7,
        "Central MFCL(PN) (sequential steps)": 2,
    }
    command = gpu_setting.table_command(spec, "gpu", tmp_path / "out", "cuda", 4, records=tmp_path)
    assert command[command.index("--seeds") + 1] == "2" and command[-3:] == ["--planned-seeds", "--record", str(tmp_path / "mfcl-table2.json")]
    fixed = gpu_setting.table_command(spec, "gpu", tmp_path / "out", "cuda", 4, seeds=1, records=tmp_path)
    assert fixed[fixed.index("--seeds") + 1] == "1" and "--planned-seeds" not in fixed
    (tmp_path / "mfcl-table2.json").write_text(json.dumps({"table": record["table"]}))
    with pytest.raises(SystemExit, match="stores no seed plan"):
        gpu_setting.planned_seeds(spec, tmp_path)
    assert gpu_setting.seeds_option("planned") is None and gpu_setting.seeds_option("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="expected 'planned' or a positive number"):
        gpu_setting.seeds_option("0")


def small_plans(folder: Path) -> Path:
    """The tables' committed records with one seed a cell and a plan that gives MFCL(PN) (Sc2) a second: the planned
    path at the cost of one more run (the committed plans' 3-5 seeds a cell take half an hour at the tiny size here)."""
    folder.mkdir()
    for name in {spec["table"] for spec in gpu_setting.TABLES.values()}:
        record = json.loads((gpu_setting.RECORDS / f"{name}.json").read_text())
        record["table"]["seeds"] = 1
        record["plan"] = {**record["plan"], "cells": [{"row": "MFCL(PN)", "column": "Sc2", "seeds": 2}] if name == "mfcl-table2" else []}
        (folder / f"{name}.json").write_text(json.dumps(record))
    return folder


@pytest.mark.benchmark
def test_the_gpu_setting_runs_at_a_tiny_size_on_the_cpu(tmp_path):
    records = small_plans(tmp_path / "records")
    record = gpu_setting.main(["--tiny", "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"), "--records", str(records)])
    assert set(record["tables"]) == set(gpu_setting.TABLES)
    for name, table in record["tables"].items():
        assert table["finished"], name
        assert {c["row"] for c in table["cells"]} == set(gpu_setting.TABLES[name]["rows"].split(","))
        assert {c["row"]: c["seeds"] for c in table["cells"]} == gpu_setting.planned_seeds(gpu_setting.TABLES[name], records) == table["seeds"], name
        assert any(c["status"] in ("passed", "failed") for c in table["controls"]), name
    assert record["tables"]["mfcl"]["seeds"]["MFCL(PN)"] == 2
    assert json.loads((tmp_path / "out" / "gpu_setting.json").read_text())["size"] == "tiny (CPU check)"
