"""``fedprior tables``: every paper table, its rows, columns and cells in both settings, and what running it cost here.

The cost is read from the table's record ``benchmarks/results/tables/NAME.json``, written by
``benchmarks/paper_tables.py`` when it ran the table: its wall seconds (over every pass where
a table took several), the command, and the machine (cores, CPU capability). A table with no
record says "not measured".
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fedprior.cli.app import app, user_errors
from fedprior.reproduce.pipeline import EMBEDDED_SEEDS

if TYPE_CHECKING:
    from fedprior.reproduce.tables import PaperTable

CHECKOUT_RECORDS = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "tables"
"""The records of a source checkout (``fedprior tables`` run from anywhere in it)."""


def records_folder(given: Path | None) -> Path:
    """``--results``, else ``benchmarks/results/tables`` under the working directory, else the source checkout's."""
    if given is not None:
        return given
    here = Path("benchmarks/results/tables")
    return here if here.is_dir() else CHECKOUT_RECORDS


def setting_grid(table: PaperTable, embedded: bool) -> dict[str, Any]:
    """The rows, columns and number of cells of ``table`` in one setting (the embedded grid, or the paper's)."""
    from fedprior.reproduce.tables import cells

    if embedded:
        rows = [r.label for r in table.rows if r.embedded]
        columns = list(dict.fromkeys(c.in_setting(True)[0] for c in table.columns if c.embedded))
    else:
        rows = [r.label for r in table.rows if r.paper_setting]
        columns = [c.label for c in table.columns]
    n = len(cells(table, embedded))
    return {"rows": rows if n else [], "columns": columns if n else [], "cells": n, "seeds": EMBEDDED_SEEDS if embedded else 1}


def measured_cost(record: dict[str, Any], embedded_cells: int, paper_cells: int) -> dict[str, Any]:
    """What a table's record says it cost: wall seconds (every pass), runs, the command's --jobs, the machine, and caveats."""
    document = record.get("table", {})
    embedded = document.get("setting") == "embedded"
    seconds = record.get("wall_seconds_all_passes", record["wall_seconds"])
    command = shlex.split(record.get("command", ""))
    jobs = command[command.index("--jobs") + 1] if "--jobs" in command[:-1] else None
    caveats = []
    if record.get("continued_a_stopped_run") and "wall_seconds_all_passes" not in record:
        caveats.append("it continued a stopped run: the earlier passes' time is not in it")
    if record.get("cells_copied_from_earlier_tables"):
        caveats.append(f"{record['cells_copied_from_earlier_tables']} runs copied from earlier tables: their time is not in it")
    machine = record.get("machine", {})
    return {
        "wall_seconds": seconds,
        "passes": len(record.get("passes", [])) or 1,
        "cells": len(document.get("cells", [])),
        "of_cells": embedded_cells if embedded else paper_cells,
        "seeds": document.get("seeds"),
        "setting": document.get("setting"),
        "jobs": jobs,
        "cores": machine.get("cores"),
        "machine": machine.get("kind"),
        "command": record.get("command"),
        "caveats": caveats,
    }


def describe(entry: dict[str, Any]) -> list[str]:
    """A table's lines for the terminal."""
    lines = [f"{entry['table']}: {entry['title']}"]
    for setting, key in (("paper setting", "paper"), ("embedded", "embedded")):
        grid = entry[key]
        if not grid["cells"]:
            lines.append(f"  {setting}: no cell runs there (its datasets are not embedded)")
            continue
        runs = f", {grid['seeds']} seeds by default: {grid['seeds'] * grid['cells']} runs" if grid["seeds"] > 1 else ", 1 seed by default"
        lines.append(f"  {setting}: {len(grid['rows'])} rows x {len(grid['columns'])} columns = {grid['cells']} cells{runs}")
        lines.append(f"    columns: {', '.join(grid['columns'])}")
        left_out = [row for row in entry["rows"] if row not in grid["rows"]]
        if left_out:
            lines.append(f"    rows left out there: {', '.join(left_out)}")
    lines.append(f"  rows: {', '.join(entry['rows'])}")
    lines.append(f"  claims: {entry['claims']}, controls: {entry['controls']}")
    cost = entry["cost"]
    if cost is None:
        lines.append(f"  cost: not measured (no {entry['record']})")
        return lines
    passes = f" over {cost['passes']} passes" if cost["passes"] > 1 else ""
    jobs = f", --jobs {cost['jobs']}" if cost["jobs"] else ""
    lines.append(
        f"  cost: {cost['wall_seconds']:.0f} s wall{passes} for {cost['cells']} of {cost['of_cells']} {cost['setting']} cells x {cost['seeds']} seeds{jobs}, "
        f"on {cost['cores']} cores ({cost['machine']}{', the last pass' if cost['passes'] > 1 else ''})" + "".join(f"; {c}" for c in cost["caveats"])
    )
    return lines


@app.command()
@user_errors
def tables(
    results: Path | None = typer.Option(
        None, "--results", help="Where the tables' records NAME.json are (default benchmarks/results/tables here, else the source checkout's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON list (every table's rows, columns, cells and cost) on stdout."),
) -> None:
    """List the paper tables: rows, columns and cells in the paper's setting and the embedded one, claims, controls, and what a run cost here."""
    from fedprior.errors import ConfigError
    from fedprior.papers import all_tables
    from fedprior.results.json_file import read_json
    from fedprior.runtime.threads import available_cores

    folder = records_folder(results)
    if not folder.is_dir():
        raise ConfigError(f"--results: {folder} is not a folder; give the folder of the tables' records NAME.json (benchmarks/results/tables)")
    entries = []
    for name, table in all_tables().items():
        paper, embedded = setting_grid(table, False), setting_grid(table, True)
        record = folder / f"{name}.json"
        cost = measured_cost(read_json(record, "--results"), embedded["cells"], paper["cells"]) if record.is_file() else None
        entries.append(
            {
                "table": name,
                "title": table.title,
                "rows": [r.label for r in table.rows],
                "paper": paper,
                "embedded": embedded,
                "claims": len(table.claims),
                "controls": len(table.controls),
                "record": str(record),
                "cost": cost,
            }
        )
    if as_json:
        typer.echo(json.dumps(entries))
        return
    typer.echo(
        f"{len(entries)} tables; `fedprior table NAME --embedded` runs one offline; costs as recorded in {folder} (this machine: {available_cores()} cores)"
    )
    for entry in entries:
        typer.echo("\n".join(describe(entry)))
