"""benchmarks/table_budgets.py: a cell two tables keep (the same final state) counts once, for the first table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import table_budgets  # noqa: E402


def keep(root: Path, table: str, cell: str, seconds: float, state: str) -> None:
    folder = root / table / cell
    folder.mkdir(parents=True)
    seed = int(cell.rsplit("--seed", 1)[1])  # a run's result.json records its seed, as the cell's name does
    (folder / "result.json").write_text(json.dumps({"wall_seconds": seconds, "state_sha256": state, "seed": seed}))


def test_a_shared_cell_counts_for_the_first_table_only(tmp_path):
    keep(tmp_path, "a-table", "FedAvg--seed0", 600.0, "s1")
    keep(tmp_path, "a-table", "FixMatch--seed0", 6000.0, "s2")
    keep(tmp_path, "b-table", "FixMatch--seed0", 6000.0, "s2")  # copied from a-table
    keep(tmp_path, "b-table", "DPL--seed0", 10200.0, "s3")
    a, b = table_budgets.budgets(tmp_path)
    assert (a["table"], a["cells"], a["own_cells"], a["core_minutes"], a["own_core_minutes"]) == ("a-table", 2, 2, 110.0, 110.0)
    assert (b["cells"], b["own_cells"], b["core_minutes"], b["own_core_minutes"]) == (2, 1, 270.0, 170.0)
    assert a["wall_minutes_alone"] == 55.0 and a["within_limit_alone"]
    assert b["wall_minutes_alone"] == 135.0 and not b["within_limit_alone"] and b["wall_minutes_after_shared"] == 85.0
    assert b["slowest_cell_seconds"] == 10200


def test_a_seed_plans_cells_are_summed_apart_from_the_tables_first_seeds(tmp_path):
    for seed in range(3):
        keep(tmp_path, "a-table", f"FedBM--beta=0.05--seed{seed}", 120.0, f"s{seed}")
    keep(tmp_path, "a-table", "FedBM--beta=0.05--seed3", 600.0, "s3")
    keep(tmp_path, "a-table", "FedBM--beta=0.05--seed96", 1200.0, "s96")
    (row,) = table_budgets.budgets(tmp_path)
    assert (row["cells"], row["core_minutes"], row["slowest_cell_seconds"]) == (3, 6.0, 120)
    assert (row["plan_cells"], row["plan_core_minutes"]) == (2, 30.0)
