"""Run paper tables on their embedded setting and keep what they found, with the time each took.

``python benchmarks/paper_tables.py fst-cbdg-table1 fst-cbdg-table2 --jobs 2`` runs each table
with ``fedprior table NAME --embedded --jobs J`` (3 seeds, the default there), in
``--runs/NAME`` (a rerun continues a stopped table: finished cells are reused, so the wall
time of a continued table is not its full time), and writes
``benchmarks/results/tables/NAME.json``: the command, the machine, the load, the wall
seconds and the whole ``table.json`` (cells, controls, findings), beside ``NAME.md``, the
table as ``fedprior table`` wrote it. The docs quote those files.
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

RESULTS = Path(__file__).parent / "results" / "tables"


def run_table(name: str, jobs: int, runs: Path, extra: list[str]) -> dict:
    """Run one table to its end; the result file's contents."""
    out = runs / name
    resumed = (out / "table.json").exists() or any(out.glob("*/result.json"))
    command = ["fedprior", "table", name, "--embedded", "--jobs", str(jobs), "--out", str(out), *extra]
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
        "table": json.loads((out / "table.json").read_text()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="+", help="table names (fedprior tables lists them)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/paper-tables"), help="where the cells' run folders go")
    parser.add_argument("--set", action="append", default=[], help="passed to every table as --set")
    args = parser.parse_args()
    extra = [item for value in args.set for item in ("--set", value)]
    for name in args.tables:
        result = run_table(name, args.jobs, args.runs, extra)
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {result['wall_seconds']:.0f} s -> {RESULTS / (name + '.json')}", flush=True)


if __name__ == "__main__":
    main()
