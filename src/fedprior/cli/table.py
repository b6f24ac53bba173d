"""``fedprior table NAME``: run a paper table's grid and print our numbers beside the paper's."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from fedprior.cli.app import app, stderr, user_errors

METRIC_LABELS = {
    "final_accuracy": "acc",
    "best_accuracy": "best acc",
    "final_macro_f1": "F1",
    "best_macro_f1": "best F1",
    "selected_accuracy": "sel. acc",
    "selected_macro_f1": "sel. F1",
}


def grid(results: list[dict]) -> tuple[list[str], list[tuple[str, str]], dict]:
    """Rows, (column, metric) pairs and the cells by (row, column): a table with several metrics gets a column per metric."""
    rows = list(dict.fromkeys(r["row"] for r in results))
    metrics = list(results[0].get("metrics", {"": None})) if results else []
    columns = [(c, m) for c in dict.fromkeys(r["column"] for r in results) for m in metrics]
    return rows, columns, {(r["row"], r["column"]): r for r in results}


def cell_text(r: dict | None, metric: str, plus_minus: str) -> str:
    if r is None:
        return ""
    value = r.get("metrics", {}).get(metric) or {"mean": r["ours"], "std": r["std"], "paper": r["paper"]}
    spread = f" {plus_minus} {number(value['std'])}" if r.get("seeds", 1) > 1 else ""
    paper = "-" if value["paper"] is None else number(value["paper"])
    return f"{number(value['mean'])}{spread} ({paper})"


def number(value: float) -> str:
    """A percentage with one decimal; a large count (bits, bytes) in three significant digits."""
    return f"{value:.3g}" if abs(value) >= 1e5 else f"{value:.1f}"


def column_label(column: str, metric: str, several: bool) -> str:
    return f"{column} {METRIC_LABELS.get(metric, metric)}" if several else column


def render(title: str, results: list[dict]) -> Table:
    rows, columns, cell = grid(results)
    several = len({m for _, m in columns}) > 1
    table = Table(title=f"{title}\nours (paper)", title_justify="left")
    table.add_column("method")
    for column, metric in columns:
        table.add_column(column_label(column, metric, several), justify="right")
    for row in rows:
        table.add_row(row, *(cell_text(cell.get((row, c)), m, "+-") for c, m in columns))
    return table


def markdown(title: str, results: list[dict]) -> str:
    rows, columns, cell = grid(results)
    several = len({m for _, m in columns}) > 1
    labels = [column_label(c, m, several) for c, m in columns]
    lines = [f"# {title}", "", "ours (paper)", "", "| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for row in rows:
        lines.append(f"| {row} | " + " | ".join(cell_text(cell.get((row, c)), m, "±") for c, m in columns) + " |")
    return "\n".join(lines) + "\n"


@app.command()
@user_errors
def table(
    name: str = typer.Argument(..., help="A paper's table, e.g. fst-cbdg-table2 (an unknown name lists them all)."),
    embedded: bool = typer.Option(False, "--embedded", help="Run offline on an embedded dataset (Fashion-MNIST) instead of the paper's setting."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field in every cell: section.key=value (repeatable)."),
    out: Path | None = typer.Option(None, "--out", help="Folder for the cells' run directories and table.md/json (default runs/NAME-TIMESTAMP)."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Run every cell with seeds 0..N-1; 'ours' is the mean, 'std' the spread."),
    rows: str | None = typer.Option(None, "--rows", help="Run only these rows (comma-separated labels, e.g. 'MFCL(PN),FedSimCLR')."),
    columns: str | None = typer.Option(None, "--columns", help="Run only these columns (comma-separated, as the grid names them, e.g. 'Sc2,Sc10')."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of cells (row, column, ours, paper) on stdout."),
) -> None:
    """Run every cell of a paper's table and print our number beside the paper's."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start
    from fedprior.experiments.tables import cells, run_table
    from fedprior.papers import table_by_name

    paper_table = table_by_name(name)
    chosen = [r.strip() for r in rows.split(",")] if rows else None
    chosen_columns = [c.strip() for c in columns.split(",")] if columns else None
    planned = cells(paper_table, embedded, set_, chosen, chosen_columns)
    for cell in planned:  # every config is checked before anything runs
        load_config(cell.preset, cell.overrides)
    folder = out or Path("runs") / f"{name}{'-embedded' if embedded else ''}-{datetime.now():%Y%m%d-%H%M%S}"
    setting = f" (embedded: {paper_table.embedded_note})" if embedded and paper_table.embedded_note else ""
    stderr.print(f"{paper_table.title}: {len(planned)} cells x {seeds} seed(s){setting}; runs in {folder}", highlight=False)

    def run_cell(cell, seed):
        slug = re.sub(r"[^A-Za-z0-9.=-]+", "_", f"{cell.row}--{cell.column}--seed{seed}").strip("_")
        cell_name, config = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"])
        return start(cell_name, config, folder / slug, report_extras=False)

    def on_cell(cell, result):
        paper = "-" if result["paper"] is None else number(result["paper"])
        spread = f" +- {number(result['std'])}" if seeds > 1 else ""
        stderr.print(
            f"  {cell.row:<24} {cell.column:<18} ours {number(result['ours']):>5}{spread}  paper {paper:>5}  ({result['seconds']:.1f} s)", highlight=False
        )

    results = run_table(paper_table, embedded, set_, run_cell, on_cell, seeds=seeds, rows=chosen, columns=chosen_columns)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.json").write_text(json.dumps(results, indent=2))
    (folder / "table.md").write_text(markdown(paper_table.title, results))
    if as_json:
        typer.echo(json.dumps(results))
    else:
        Console().print(render(paper_table.title, results))
