"""What each committed table costs on this machine, from its kept cells (issue 31: a table may take 90 minutes here).

Each kept cell records its wall seconds (``result.json``); a cell that is also another table's (the same final
state, ``state_sha256``: ``fedprior table`` copies a cell whose preset and overrides another table already ran)
is counted once, by the first table in name order (the order of the folders under ``benchmarks/results/cells``). For each table:
its cells, their core-minutes, the core-minutes of its own cells (not copied), and the wall minutes those take
at two at a time (``--jobs 2``, the two cores), with whether that is within the 90 minutes. The table is its first
``TABLE_SEEDS`` seeds (``fedprior table``'s default); cells of later seeds are the ones a seed plan added (issue 52) and
are summed apart (``plan_cells``, ``plan_core_minutes``), so that the budget stays that of a fresh table. The cells'
seconds were measured beside other work (load 2-5), so a quiet machine takes less.

    python benchmarks/table_budgets.py [--out benchmarks/results/table_budgets.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shared import command_line, machine

CELLS = Path(__file__).parent / "results" / "cells"
OUT = Path(__file__).parent / "results" / "table_budgets.json"
LIMIT_MINUTES = 90.0
JOBS = 2
TABLE_SEEDS = 3


def table_cells(folder: Path) -> list[dict]:
    """Each kept cell of one table: its folder name, seed, wall seconds and final state digest."""
    cells = []
    for result in sorted(folder.glob("*/result.json")):
        record = json.loads(result.read_text())
        cells.append(
            {
                "cell": result.parent.name,
                "seed": int(record.get("seed", 0)),
                "seconds": float(record.get("wall_seconds") or 0.0),
                "state": record.get("state_sha256"),
            }
        )
    return cells


def budgets(cells_root: Path = CELLS) -> list[dict]:
    """Per table (folders in name order): its first seeds' cells, core-minutes, own core-minutes, wall minutes at two at a
    time; and the cells and core-minutes of the seeds a plan added."""
    seen: set[str] = set()
    rows = []
    for folder in sorted(p for p in cells_root.iterdir() if p.is_dir()):
        kept = table_cells(folder)
        cells = [c for c in kept if c["seed"] < TABLE_SEEDS]
        planned = [c for c in kept if c["seed"] >= TABLE_SEEDS]
        own = [c for c in cells if not c["state"] or c["state"] not in seen]
        seen.update(c["state"] for c in cells if c["state"])
        total, own_seconds = sum(c["seconds"] for c in cells), sum(c["seconds"] for c in own)
        rows.append(
            {
                "table": folder.name,
                "cells": len(cells),
                "own_cells": len(own),
                "core_minutes": round(total / 60, 1),
                "own_core_minutes": round(own_seconds / 60, 1),
                "wall_minutes_alone": round(total / 60 / JOBS, 1),
                "wall_minutes_after_shared": round(own_seconds / 60 / JOBS, 1),
                "within_limit_alone": total / 60 / JOBS <= LIMIT_MINUTES,
                "slowest_cell_seconds": round(max((c["seconds"] for c in cells), default=0.0)),
                "plan_cells": len(planned),
                "plan_core_minutes": round(sum(c["seconds"] for c in planned) / 60, 1),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=Path, default=CELLS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    record = {
        "what": (
            f"each committed table's kept cells of its first {TABLE_SEEDS} seeds: core-minutes, and wall minutes at {JOBS} at a time against the"
            f" {LIMIT_MINUTES:.0f}-minute limit; the cells of later seeds (a seed plan's) apart"
        ),
        "note": "cell seconds as measured when they ran, beside other work (load 2-5); a cell shared with a table earlier in name order counts there",
        "command": command_line(argv),
        "machine": machine(),
        "tables": budgets(args.cells),
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for row in record["tables"]:
        print(
            f"{row['table']:<16} {row['cells']:>4} cells ({row['own_cells']:>3} own)  {row['core_minutes']:>6} core-min"
            f"  alone {row['wall_minutes_alone']:>5} min  after shared {row['wall_minutes_after_shared']:>5} min"
            f"  {'within' if row['within_limit_alone'] else 'OVER'} {LIMIT_MINUTES:.0f}"
            + (f"  + plan's seeds: {row['plan_cells']} cells, {row['plan_core_minutes']} core-min" if row["plan_cells"] else "")
        )
    return record


if __name__ == "__main__":
    main()
