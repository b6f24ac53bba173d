"""Run paper tables on their embedded setting and keep what they found, with the time each took.

``python benchmarks/paper_tables.py fst-cbdg-table1 fst-cbdg-table2 --jobs 2`` runs each table
with ``fedprior table NAME --embedded --jobs J`` (3 seeds, the default there), in
``--runs/NAME`` (a rerun continues a stopped table: finished cells are reused, so the wall
time of a continued table is not its full time), and writes
``benchmarks/results/tables/NAME.json``: the command, the machine, the load, the wall
seconds and the whole ``table.json`` (cells, controls, findings), beside ``NAME.md``, the
table as ``fedprior table`` wrote it. The docs quote those files.

``--rows NAME=LABEL,LABEL`` runs only those rows of table NAME (``fedprior table --rows``),
``--columns NAME=COLUMN,COLUMN`` only those columns (``fedprior table --columns``).
A cell that an earlier table of the same command has finished with the same config and
seed (the same preset and overrides, whatever its row is called: FedBM's Table VI repeats
Table I's FedBM, Central Learning and FedAvg cells; FedDB's Table 4 repeats Table 2's
FedAvg rows and FedDB as "DPL + DMA") is copied into the later table's folder first, so
``fedprior table`` reuses it instead of training it again; it checks that the copied run's
config is the one it would run, and refuses otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from shared import load, machine

from fedprior.experiments.table_runs import cell_folder
from fedprior.experiments.tables import cells
from fedprior.papers import table_by_name

RESULTS = Path(__file__).parent / "results" / "tables"
SEEDS = 3
"""``fedprior table --embedded``'s default."""


def share_finished_cells(name: str, rows: list[str] | None, columns: list[str] | None, out: Path, earlier: dict[str, Path], seeds: int) -> int:
    """Copy the finished runs of the ``earlier`` tables (name -> folder) that are cells of table ``name`` into ``out``; how many.

    A cell is the same when its preset and overrides are: rows and columns may be named differently."""
    done = [(folder, c) for t, folder in earlier.items() for c in cells(table_by_name(t), embedded=True)]
    copied = 0
    for cell in cells(table_by_name(name), embedded=True, rows=rows, columns=columns):
        twins = [(folder, c) for folder, c in done if (c.preset, c.overrides) == (cell.preset, cell.overrides)]
        for seed in range(seeds):
            target = cell_folder(out, cell, seed)
            source = next((s for s in (cell_folder(f, c, seed) for f, c in twins) if (s / "result.json").is_file()), None)
            if source is not None and not target.exists():
                shutil.copytree(source, target)
                copied += 1
    return copied


def run_table(name: str, jobs: int, runs: Path, extra: list[str], rows: list[str] | None, columns: list[str] | None, earlier: dict[str, Path]) -> dict:
    """Run one table to its end; the result file's contents."""
    out = runs / name
    resumed = (out / "table.json").exists() or any(out.glob("*/result.json"))
    shared = share_finished_cells(name, rows, columns, out, earlier, SEEDS)
    command = ["fedprior", "table", name, "--embedded", "--jobs", str(jobs), "--out", str(out), *extra]
    if rows is not None:
        command += ["--rows", ",".join(rows)]
    if columns is not None:
        command += ["--columns", ",".join(columns)]
    started_load, started = load(), time.perf_counter()
    subprocess.run([Path(sys.executable).parent / "fedprior", *command[1:]], check=True)
    seconds = time.perf_counter() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out / "table.md", RESULTS / f"{name}.md")
    return {
        "command": " ".join(command),
        "machine": machine() | {"load_at_start": started_load, "load_at_end": load()},
        "wall_seconds": round(seconds, 1),
        "continued_a_stopped_run": resumed,
        "cells_copied_from_earlier_tables": shared,
        "table": json.loads((out / "table.json").read_text()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="+", help="table names (fedprior tables lists them)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/paper-tables"), help="where the cells' run folders go")
    parser.add_argument("--set", action="append", default=[], help="passed to every table as --set")
    parser.add_argument("--rows", action="append", default=[], metavar="NAME=LABEL,LABEL", help="run only these rows of table NAME")
    parser.add_argument("--columns", action="append", default=[], metavar="NAME=COLUMN,COLUMN", help="run only these columns of table NAME")
    args = parser.parse_args()
    extra = [item for value in args.set for item in ("--set", value)]
    rows = {name: labels.split(",") for name, labels in (item.split("=", 1) for item in args.rows)}
    columns = {name: labels.split(",") for name, labels in (item.split("=", 1) for item in args.columns)}
    for i, name in enumerate(args.tables):
        earlier = {t: args.runs / t for t in args.tables[:i]}
        result = run_table(name, args.jobs, args.runs, extra, rows.get(name), columns.get(name), earlier)
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {result['wall_seconds']:.0f} s -> {RESULTS / (name + '.json')}", flush=True)


if __name__ == "__main__":
    main()
