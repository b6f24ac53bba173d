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

``--plan`` trains nothing either: for each named table whose ``NAME.json`` has no seed plan yet, it plans
the seeds each undecided claim needs from the cells the record holds
(:mod:`fedprior.reproduce.seed_plan`: 80% power at the paper's gap, within
``BUDGET_CPU_SECONDS``) and stores the plan there, with the date and commit, before any
new seed runs; a table that has one keeps it (no peeking), and a plan is made only from a
table whose cells all have the table's first seeds. A run of a table with a stored plan
runs the seeds it plans (``reproduce_table(cell_seeds=...)``), continuing from the kept
cells; ``cpu_seconds_of_cells`` is the cells' run seconds summed (each run on one core).

``--plan-after-verify REPORT`` trains nothing: where ``fedprior table NAME --embedded --verify --verify-all
--json > REPORT`` on another machine kind changed a claim's verdict, it plans that claim's seeds (80% power at
the committed difference, at the larger of the two machines' paired sds, within what the first plan left of
the budget: :func:`fedprior.reproduce.seed_plan.make_verify_plan`) and stores them in the record beside the
first plan (``plan.after_verify``), before they run; the next run of the table runs them.

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
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from shared import load, machine

from fedprior import TableResult, reproduce_table
from fedprior.experiments.table_runs import cell_folder
from fedprior.papers import table_by_name
from fedprior.reproduce.pipeline import evaluate_again
from fedprior.reproduce.seed_plan import BUDGET_CPU_SECONDS, cell_seeds, make_plan, make_verify_plan, plan_lines, verify_plan_lines, with_plan
from fedprior.reproduce.tables import cell_value, cells

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
    plan = {"plan": previous["plan"]} if previous is not None and "plan" in previous else {}  # made once, kept by every pass
    return {**{k: v for k, v in this.items() if k != "table"}, **totals, "passes": passes, **plan, "table": this["table"]}


def made_now() -> dict[str, str]:
    """When and at which commit a plan is made (its ``made`` and ``commit``)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    return {"made": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit}


def store_plan(name: str, results: Path = RESULTS, budget: float = BUDGET_CPU_SECONDS) -> tuple[dict, bool]:
    """The seed plan of table ``name``: the one its record holds, else one made now from its cells and stored; (plan, made now).

    Refused (ValueError) where a cell already has more seeds than the table: a plan is made before the new seeds run.
    """
    path = results / f"{name}.json"
    record = json.loads(path.read_text())
    if "plan" in record:
        return record["plan"], False
    table = TableResult.from_json(record["table"])
    grown = [f"{c.row} / {c.column}" for c in table.cells if c.seeds != table.seeds]
    if grown:
        raise ValueError(f"{name}: cells {', '.join(grown)} have other than the table's {table.seeds} seeds; a plan is made before any new seed runs")
    plan = make_plan(evaluate_again(table), budget, **made_now())
    record = {k: v for k, v in record.items() if k != "table"} | {"plan": plan, "table": record["table"]}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return plan, True


def store_verify_plan(name: str, report: Path, results: Path = RESULTS) -> tuple[dict, bool]:
    """The second seed plan of table ``name`` (``plan.after_verify`` of its record), for the claims whose verdict changed
    when its cells were rerun on another machine kind (``report``: ``fedprior table NAME --verify --json``'s output):
    the one the record holds, else one made now and stored (:func:`fedprior.reproduce.seed_plan.make_verify_plan`);
    (plan, made now). A report of another table, or one where no verdict changed, is refused (ValueError)."""
    path = results / f"{name}.json"
    record = json.loads(path.read_text())
    if "plan" not in record:
        raise ValueError(f"{name}: its record stores no seed plan; make the first one before a second (benchmarks/paper_tables.py {name} --plan)")
    plan = record["plan"]
    if "after_verify" in plan:
        return plan["after_verify"], False
    verified = json.loads(report.read_text())
    if verified.get("table") != name:
        raise ValueError(f"{report} is a verify of {verified.get('table')}, not {name}")
    if not any(c["changed"] for c in verified["claims"]):
        raise ValueError(f"{report}: no verdict changed on the other machine kind; nothing to plan")
    after = make_verify_plan(evaluate_again(TableResult.from_json(record["table"])), verified, plan, **made_now())
    after["report"] = str(report)
    record = {k: v for k, v in record.items() if k != "table"} | {"plan": {**plan, "after_verify": after}, "table": record["table"]}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return after, True


def run_table(
    name: str,
    jobs: int,
    runs: Path,
    keep: Path,
    overrides: list[str],
    rows: list[str] | None,
    columns: list[str] | None,
    earlier: dict[str, Path],
    plan: dict | None = None,
) -> dict:
    """Run one table to its end (``fedprior.reproduce_table``), keeping its finished cells in ``keep/NAME`` as they finish; this pass and the table."""
    out, kept = runs / name, keep / name
    restored = restore_kept_cells(kept, out)
    resumed = (out / "table.json").exists() or any(out.glob("*/result.json"))
    shared = share_finished_cells(name, rows, columns, out, earlier, max([SEEDS, *cell_seeds(plan).values()]))
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
    planned = cell_seeds(plan)
    try:
        table = reproduce_table(
            name, embedded=True, rows=rows, columns=columns, out=out, jobs=jobs, overrides=overrides, on_progress=progress, cell_seeds=planned
        )
    finally:
        keep_finished_cells(out, kept)
    seconds = time.perf_counter() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    table = with_plan(table, plan)  # the findings show the seeds the record's plan gives them
    again = re.search(r"^command: `(.*)`$", (out / "table.md").read_text(), re.MULTILINE)
    (RESULTS / f"{name}.md").write_text(table.markdown(command=again and again.group(1)))
    return {
        "command": " ".join(command),
        "machine": machine() | {"load_at_start": started_load, "load_at_end": load()},
        "wall_seconds": round(seconds, 1),
        "continued_a_stopped_run": resumed,
        "cells_copied_from_earlier_tables": shared,
        "cells_restored_from_keep": restored,
        "cells_finished": len(list(out.glob("*/result.json"))) - finished_before,
        "cpu_seconds_of_cells": round(sum(c.seconds for c in table.cells), 1),
        "seeds_from_plan": None if not plan else f"the plan made {plan['made']} (commit {plan['commit']}): {len(planned)} cell(s) with more seeds",
        "table": table.to_json(),
    }


def with_kept_metrics(document: dict, kept: Path) -> tuple[dict, list[str]]:
    """``document`` (a table.json) with the metrics its table now reports that its cells lack, read from the kept cells in
    ``kept`` (``ROW--COLUMN--seedN/result.json``) as ``aggregate_table`` computes them; and which (cell: metric) were added.

    A metric added to a table (FedDB's pseudo-label coverage) is in every kept run's summary already; nothing else of a
    cell changes. A cell whose kept seeds do not all have the metric is left without it, as ``aggregate_table`` would."""
    table = table_by_name(document["table"])
    planned = {(c.row, c.column): c for c in cells(table, embedded=document["setting"] == "embedded")}
    added = []
    for entry in document["cells"]:
        cell = planned.get((entry["row"], entry["column"]))
        missing = [m for m in table.metrics if m not in entry["metrics"]]
        if cell is None or not missing:
            continue
        files = [cell_folder(kept, cell, seed) / "result.json" for seed in range(entry["seeds"])]
        if not all(f.is_file() for f in files):
            continue
        summaries = [json.loads(f.read_text()) for f in files]
        for metric in missing:
            if all(metric in s or (table.derived and metric in table.derived(s)) for s in summaries):
                values = np.array([cell_value(table, s, metric) for s in summaries], dtype=float)
                entry["metrics"][metric] = {
                    "scale": table.scales.get(metric, 100.0),
                    "mean": round(float(values.mean()), 2),
                    "std": round(float(values.std(ddof=1)), 2) if values.size > 1 else 0.0,
                    "values": [round(float(v), 2) for v in values],
                    "paper": cell.paper_metrics.get(metric),
                }
                added.append(f"{entry['row']} / {entry['column']}: {metric}")
    return document, added


def findings_only(name: str, results: Path = RESULTS, kept: Path = RESULTS.parent / "cells") -> dict:
    """Evaluate the committed table ``name`` again from ``results/NAME.json`` (nothing trained or measured); rewrite it and ``NAME.md``.

    A metric the table now reports that its cells lack is read from its kept cells (``kept/NAME``: :func:`with_kept_metrics`).

    The measured controls keep the values ``NAME.json`` recorded; ``NAME.md`` keeps the command it
    recorded. Returns the table's document (``table.json``) as rewritten.
    """
    path, page = results / f"{name}.json", results / f"{name}.md"
    record = json.loads(path.read_text())
    document, _ = with_kept_metrics(record["table"], kept / name)
    table = with_plan(evaluate_again(TableResult.from_json(document)), record.get("plan"))
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
    parser.add_argument("--plan", action="store_true", help="plan each table's seeds from its record and store the plan there (kept if stored); train nothing")
    parser.add_argument(
        "--plan-after-verify",
        type=Path,
        metavar="REPORT",
        help="plan seeds for the claims whose verdict changed on another machine kind (REPORT: fedprior table NAME --verify --json's output) "
        "and store the plan in the table's record (kept if stored); train nothing",
    )
    args = parser.parse_args()
    if args.plan_after_verify:
        for name in args.tables:
            after, made = store_verify_plan(name, args.plan_after_verify)
            print("\n".join([f"{name}:", *verify_plan_lines(after)]) + ("" if made else "\n  (the plan stored before: kept)"), flush=True)
        return
    if args.plan:
        for name in args.tables:
            plan, made = store_plan(name)
            print("\n".join([f"{name}:", *plan_lines(plan, stored=True)]) + ("" if made else "\n  (the plan stored before: kept)"), flush=True)
        return
    if args.findings_only:
        for name in args.tables:
            findings_only(name, kept=args.keep)
            print(f"{name}: findings evaluated again -> {RESULTS / (name + '.json')}, {RESULTS / (name + '.md')}", flush=True)
        return
    rows = {name: labels.split(",") for name, labels in (item.split("=", 1) for item in args.rows)}
    columns = {name: labels.split(",") for name, labels in (item.split("=", 1) for item in args.columns)}
    for i, name in enumerate(args.tables):
        earlier = {t: args.runs / t for t in args.tables[:i]}
        path = RESULTS / f"{name}.json"
        plan = json.loads(path.read_text()).get("plan") if path.is_file() else None
        result = run_table(name, args.jobs, args.runs, args.keep, args.set, rows.get(name), columns.get(name), earlier, plan)
        result = with_earlier_passes(json.loads(path.read_text()) if path.is_file() else None, result)
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {result['wall_seconds']:.0f} s -> {RESULTS / (name + '.json')}", flush=True)


if __name__ == "__main__":
    main()
