"""``fedprior table NAME``: run a paper table's grid and print our numbers beside the paper's."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from fedprior.cli.app import app, stderr, user_errors


def render(title: str, results: list[dict]) -> Table:
    rows = list(dict.fromkeys(r["row"] for r in results))
    columns = list(dict.fromkeys(r["column"] for r in results))
    cell = {(r["row"], r["column"]): r for r in results}
    table = Table(title=f"{title}\nours (paper)", title_justify="left")
    table.add_column("method")
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        values = []
        for column in columns:
            r = cell.get((row, column))
            paper = "-" if r is None or r["paper"] is None else f"{r['paper']:.1f}"
            spread = f" +- {r['std']:.1f}" if r is not None and r.get("seeds", 1) > 1 else ""
            values.append("" if r is None else f"{r['ours']:.1f}{spread} ({paper})")
        table.add_row(row, *values)
    return table


def markdown(title: str, results: list[dict]) -> str:
    columns = list(dict.fromkeys(r["column"] for r in results))
    cell = {(r["row"], r["column"]): r for r in results}
    lines = [f"# {title}", "", "ours (paper)", "", "| method | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for row in dict.fromkeys(r["row"] for r in results):
        values = []
        for column in columns:
            r = cell.get((row, column))
            spread = f" ± {r['std']:.1f}" if r is not None and r.get("seeds", 1) > 1 else ""
            values.append("" if r is None else f"{r['ours']:.1f}{spread} ({'-' if r['paper'] is None else r['paper']})")
        lines.append(f"| {row} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


@app.command()
@user_errors
def table(
    name: str = typer.Argument(..., help="fst-cbdg-table1 ... fst-cbdg-table4"),
    embedded: bool = typer.Option(False, "--embedded", help="Run offline on Fashion-MNIST through the locked-text stand-in instead of the paper's setting."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field in every cell: section.key=value (repeatable)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for the cells' run directories and table.md/json (default runs/NAME-TIMESTAMP)."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Run every cell with seeds 0..N-1; 'ours' is the mean, 'std' the spread."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of cells (row, column, ours, paper) on stdout."),
) -> None:
    """Run every cell of a paper's table and print our number beside the paper's."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start
    from fedprior.experiments.tables import cells, run_table, table_by_name

    paper_table = table_by_name(name)
    planned = cells(paper_table, embedded, set_)
    for cell in planned:  # every config is checked before anything runs
        load_config(cell.preset, cell.overrides)
    folder = out or Path("runs") / f"{name}{'-embedded' if embedded else ''}-{datetime.now():%Y%m%d-%H%M%S}"
    setting = " (embedded: Fashion-MNIST through the locked-text stand-in; paper numbers are CIFAR-10 with CLIP RN50)" if embedded else ""
    stderr.print(f"{paper_table.title}: {len(planned)} cells x {seeds} seed(s){setting}; runs in {folder}", highlight=False)

    def run_cell(cell, seed):
        slug = re.sub(r"[^A-Za-z0-9.=-]+", "_", f"{cell.row}--{cell.column}--seed{seed}").strip("_")
        cell_name, config = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"])
        return start(cell_name, config, folder / slug, report_extras=False)

    def on_cell(cell, result):
        paper = "-" if result["paper"] is None else f"{result['paper']:.1f}"
        spread = f" +- {result['std']:.1f}" if seeds > 1 else ""
        stderr.print(f"  {cell.row:<24} {cell.column:<18} ours {result['ours']:5.1f}{spread}  paper {paper:>5}  ({result['seconds']:.1f} s)", highlight=False)

    results = run_table(paper_table, embedded, set_, run_cell, on_cell, seeds=seeds)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.json").write_text(json.dumps(results, indent=2))
    (folder / "table.md").write_text(markdown(paper_table.title, results))
    if as_json:
        typer.echo(json.dumps(results))
    else:
        Console().print(render(paper_table.title, results))
