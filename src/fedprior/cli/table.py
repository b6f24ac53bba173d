"""``fedprior table NAME``: run a paper table's grid and print our numbers beside the paper's."""

from __future__ import annotations

import json
import shlex
import signal
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
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Folder for the cells' run directories and table.md/json (default runs/NAME-TIMESTAMP); the same --out again continues a stopped table.",
    ),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Run every cell with seeds 0..N-1; 'ours' is the mean, 'std' the spread."),
    rows: str | None = typer.Option(None, "--rows", help="Run only these rows (comma-separated labels, e.g. 'MFCL(PN),FedSimCLR')."),
    columns: str | None = typer.Option(None, "--columns", help="Run only these columns (comma-separated, as the grid names them, e.g. 'Sc2,Sc10')."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of cells (row, column, ours, paper) on stdout."),
) -> None:
    """Run every cell of a paper's table and print our number beside the paper's.

    Run again with the same --out, it continues a stopped table: finished cells are reused,
    a cell stopped mid-way resumes from its checkpoint, the others run.
    """
    from fedprior.errors import ConfigError, Interrupted
    from fedprior.experiments.config import load_config
    from fedprior.experiments.table_runs import REUSED, RUN, plan_cell
    from fedprior.experiments.tables import cells, run_table
    from fedprior.papers import table_by_name

    paper_table = table_by_name(name)
    chosen = selection(rows)
    chosen_columns = selection(columns)
    planned = cells(paper_table, embedded, set_, chosen, chosen_columns)
    if not planned:
        where = "in the embedded setting (its datasets are not embedded); run it without --embedded" if embedded else "in the paper's setting"
        raise ConfigError(f"{name}: no cell of {'the chosen rows and columns' if chosen or chosen_columns else 'this table'} runs {where}")
    folder = out or Path("runs") / f"{name}{'-embedded' if embedded else ''}-{datetime.now():%Y%m%d-%H%M%S}"
    runs = {}
    for cell in planned:  # every config is checked, and every cell folder a stopped table left, before anything runs
        for seed in range(seeds):
            cell_name, config = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"])
            runs[cell.row, cell.column, seed] = plan_cell(folder, cell, seed, cell_name, config)
    setting = f" (embedded: {paper_table.embedded_note})" if embedded and paper_table.embedded_note else ""
    stderr.print(f"{paper_table.title}: {len(planned)} cells x {seeds} seed(s){setting}; runs in {folder}", highlight=False)
    kept = [r.action for r in runs.values() if r.action != RUN]
    if kept:
        stderr.print(
            f"continuing the table in {folder}: {kept.count(REUSED)} finished run(s) reused, {len(kept) - kept.count(REUSED)} resumed", highlight=False
        )

    def run_cell(cell, seed):
        return runs[cell.row, cell.column, seed].execute()

    def on_cell(cell, result):
        paper = "-" if result["paper"] is None else number(result["paper"])
        spread = f" +- {number(result['std'])}" if seeds > 1 else ""
        actions = [runs[cell.row, cell.column, seed].action for seed in range(seeds)]
        how = "" if set(actions) == {RUN} else f", {actions[0]}" if seeds == 1 else f", seeds {' / '.join(actions)}"
        stderr.print(
            f"  {cell.row:<24} {cell.column:<18} ours {number(result['ours']):>5}{spread}  paper {paper:>5}  ({result['seconds']:.1f} s{how})",
            highlight=False,
        )

    try:
        results = run_table(paper_table, embedded, set_, run_cell, on_cell, seeds=seeds, rows=chosen, columns=chosen_columns)
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: rerunning the table command goes on, not one cell's resume
        again = command_line(name, embedded, set_, folder, seeds, rows, columns, as_json)
        raise Interrupted(getattr(error, "signum", signal.SIGINT), continue_with=f"continue the table with `{again}`") from None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.json").write_text(json.dumps(results, indent=2))
    (folder / "table.md").write_text(markdown(paper_table.title, results))
    if as_json:
        typer.echo(json.dumps(results))
    else:
        Console().print(render(paper_table.title, results))


def selection(text: str | None) -> list[str] | None:
    """``--rows``/``--columns``: None when the option is left out (all), else the comma-separated labels (maybe none)."""
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def command_line(name: str, embedded: bool, set_: list[str], folder: Path, seeds: int, rows: str | None, columns: str | None, as_json: bool) -> str:
    """The ``fedprior table`` command that continues this table in ``folder`` (shell-quoted)."""
    parts = ["fedprior", "table", name, *(["--embedded"] if embedded else [])]
    parts += [arg for override in set_ for arg in ("--set", override)]
    parts += ["--rows", rows] if rows is not None else []
    parts += ["--columns", columns] if columns is not None else []
    parts += ["--seeds", str(seeds)] if seeds != 1 else []
    parts += ["--out", str(folder), *(["--json"] if as_json else [])]
    return shlex.join(parts)
