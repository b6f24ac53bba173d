"""Run paper tables on their embedded setting and keep what they found, with the time each took.

``python benchmarks/paper_tables.py fst-cbdg-table1 fst-cbdg-table2 --jobs 2`` runs each table
in this process with ``fedprior.reproduce_table`` (what ``fedprior table NAME --embedded --jobs J``
runs: 3 seeds, the default there), in
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

``--keep DIR`` (default ``benchmarks/results/cells``) holds each finished cell's
``config.toml`` and ``result.json`` (a few kilobytes), copied there as soon as the cell's
run finishes; a rerun puts them back into ``--runs/NAME`` first, so a table survives the
loss of its run folders (a machine given back, a clean clone) as long as ``DIR`` is
committed: only the cells not kept train again. A kept cell is reused only where its
config is the one the table would run (``fedprior table`` checks, as for any finished run).

A table often takes several passes (a machine given back, a stopped run continued, a table
re-evaluated from its kept cells). ``passes`` lists every pass of the table in
``NAME.json``: its command, machine, wall seconds, whether it continued a stopped run, and
how many cells it copied from earlier tables, restored from ``--keep`` and finished itself
(trained or resumed to their end). A pass that continues a table (its folder or ``--keep``
already holds finished cells) is appended to the passes of the table's existing
``NAME.json``; a pass that starts from nothing starts the list again. ``command``,
``machine``, ``wall_seconds`` and ``continued_a_stopped_run`` at the top are the last
pass's; ``cells_copied_from_earlier_tables``, ``cells_restored_from_keep``,
``cells_finished`` and ``wall_seconds_all_passes`` are summed over the passes. (A file
written before the list existed becomes the list's first pass, with what it recorded:
its last pass's counts only.)

``--findings-only`` trains and measures nothing: it reads each named table's committed
``NAME.json``, evaluates its controls and claims again on the cells it holds (the measured
controls' values as recorded there) with today's definitions, and rewrites the controls,
findings and notices in ``NAME.json`` and the whole ``NAME.md`` (the cells' numbers are
unchanged): a change of what a control gates is read on the committed tables that way.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

from shared import load, machine

from fedprior import TableResult, reproduce_table
from fedprior.experiments.table_runs import cell_folder
from fedprior.papers import table_by_name
from fedprior.reproduce.pipeline import evaluate_again
from fedprior.reproduce.tables import cells

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


KEPT_FILES = ("config.toml", "result.json")
"""What a finished cell needs to be reused (``table_runs.plan_cell``)."""


def keep_finished_cells(out: Path, kept: Path) -> int:
    """Copy the summary of each finished cell in ``out`` that ``kept`` lacks into ``kept``; how many."""
    copied = 0
    for result in sorted(out.glob("*/result.json")):
        target = kept / result.parent.name
        if not (target / "result.json").is_file():
            target.mkdir(parents=True, exist_ok=True)
            for file in KEPT_FILES:
                shutil.copyfile(result.parent / file, target / file)
            copied += 1
    return copied


def restore_kept_cells(kept: Path, out: Path) -> int:
    """Put the kept cells back into ``out`` where it has no folder for them; how many."""
    restored = 0
    for result in sorted(kept.glob("*/result.json")):
        target = out / result.parent.name
        if not target.exists():
            shutil.copytree(result.parent, target)
            restored += 1
    return restored


PASS_FIELDS = ("command", "machine", "wall_seconds", "continued_a_stopped_run", "cells_copied_from_earlier_tables", "cells_restored_from_keep")
"""What a pass records (and what a result file written before ``passes`` existed recorded of its last pass)."""
SUMMED = {
    "cells_copied_from_earlier_tables": "cells_copied_from_earlier_tables",
    "cells_restored_from_keep": "cells_restored_from_keep",
    "cells_finished": "cells_finished",
    "wall_seconds_all_passes": "wall_seconds",
}
"""Top-level field -> the pass field it sums."""


def with_earlier_passes(previous: dict | None, this: dict) -> dict:
    """The result file of a table after pass ``this`` (its fields and ``table``), given the table's file before it (or None).

    ``this`` continues the table (``continued_a_stopped_run``) where ``previous`` exists: its
    passes come first (a file without ``passes`` is one pass, its top-level fields); otherwise
    ``this`` is the first pass.
    """
    earlier: list[dict] = []
    if previous is not None and this["continued_a_stopped_run"]:
        earlier = previous.get("passes") or [{k: previous[k] for k in PASS_FIELDS if k in previous}]
    passes = [*earlier, {k: v for k, v in this.items() if k != "table"}]
    totals = {field: sum(p.get(key, 0) for p in passes) for field, key in SUMMED.items()}
    totals["wall_seconds_all_passes"] = round(totals["wall_seconds_all_passes"], 1)
    return {**{k: v for k, v in this.items() if k != "table"}, **totals, "passes": passes, "table": this["table"]}


def run_table(
    name: str, jobs: int, runs: Path, keep: Path, overrides: list[str], rows: list[str] | None, columns: list[str] | None, earlier: dict[str, Path]
) -> dict:
    """Run one table to its end (``fedprior.reproduce_table``), keeping its finished cells in ``keep/NAME`` as they finish; this pass and the table."""
    out, kept = runs / name, keep / name
    restored = restore_kept_cells(kept, out)
    resumed = (out / "table.json").exists() or any(out.glob("*/result.json"))
    shared = share_finished_cells(name, rows, columns, out, earlier, SEEDS)
    finished_before = len(list(out.glob("*/result.json")))
    command = ["fedprior", "table", name, "--embedded", "--jobs", str(jobs), "--out", str(out), *(arg for o in overrides for arg in ("--set", o))]
    if rows is not None:
        command += ["--rows", ",".join(rows)]
    if columns is not None:
        command += ["--columns", ",".join(columns)]

    def progress(line: str) -> None:  # the plan, then a line as each seed of a cell finishes: keep it at once
        print(line, file=sys.stderr, flush=True)
        keep_finished_cells(out, kept)

    started_load, started = load(), time.perf_counter()
    try:
        table = reproduce_table(name, embedded=True, rows=rows, columns=columns, out=out, jobs=jobs, overrides=overrides, on_progress=progress)
    finally:
        keep_finished_cells(out, kept)
    seconds = time.perf_counter() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out / "table.md", RESULTS / f"{name}.md")
    return {
        "command": " ".join(command),
        "machine": machine() | {"load_at_start": started_load, "load_at_end": load()},
        "wall_seconds": round(seconds, 1),
        "continued_a_stopped_run": resumed,
        "cells_copied_from_earlier_tables": shared,
        "cells_restored_from_keep": restored,
        "cells_finished": len(list(out.glob("*/result.json"))) - finished_before,
        "table": table.to_json(),
    }


def findings_only(name: str, results: Path = RESULTS) -> dict:
    """Evaluate the committed table ``name`` again from ``results/NAME.json`` (nothing trained or measured); rewrite it and ``NAME.md``.

    The measured controls keep the values ``NAME.json`` recorded; ``NAME.md`` keeps the command it
    recorded. Returns the table's document (``table.json``) as rewritten.
    """
    path, page = results / f"{name}.json", results / f"{name}.md"
    record = json.loads(path.read_text())
    table = evaluate_again(TableResult.from_json(record["table"]))
    record["table"] = table.to_json()
    path.write_text(json.dumps(record, indent=2) + "\n")
    command = re.search(r"^command: `(.*)`$", page.read_text(), re.MULTILINE) if page.is_file() else None
    page.write_text(table.markdown(command=command and command.group(1)))
    return record["table"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="+", help="table names (fedprior tables lists them)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/paper-tables"), help="where the cells' run folders go")
    parser.add_argument("--keep", type=Path, default=RESULTS.parent / "cells", help="where finished cells' summaries are kept (commit it)")
    parser.add_argument("--set", action="append", default=[], help="passed to every table as --set")
    parser.add_argument("--rows", action="append", default=[], metavar="NAME=LABEL,LABEL", help="run only these rows of table NAME")
    parser.add_argument("--columns", action="append", default=[], metavar="NAME=COLUMN,COLUMN", help="run only these columns of table NAME")
    parser.add_argument("--findings-only", action="store_true", help="evaluate the committed tables' claims again from their cells; train nothing")
    args = parser.parse_args()
    if args.findings_only:
        for name in args.tables:
            findings_only(name)
            print(f"{name}: findings evaluated again -> {RESULTS / (name + '.json')}, {RESULTS / (name + '.md')}", flush=True)
        return
    rows = {name: labels.split(",") for name, labels in (item.split("=", 1) for item in args.rows)}
    columns = {name: labels.split(",") for name, labels in (item.split("=", 1) for item in args.columns)}
    for i, name in enumerate(args.tables):
        earlier = {t: args.runs / t for t in args.tables[:i]}
        result = run_table(name, args.jobs, args.runs, args.keep, args.set, rows.get(name), columns.get(name), earlier)
        path = RESULTS / f"{name}.json"
        result = with_earlier_passes(json.loads(path.read_text()) if path.is_file() else None, result)
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {result['wall_seconds']:.0f} s -> {RESULTS / (name + '.json')}", flush=True)


if __name__ == "__main__":
    main()
