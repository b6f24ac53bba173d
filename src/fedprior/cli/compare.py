"""``fedprior compare RUN_DIR...``: runs side by side in one table, their accuracy curves in one PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from fedprior.cli.app import app, stderr, user_errors

ROWS = {
    "initial_accuracy": "initial accuracy",
    "final_accuracy": "final accuracy",
    "best_accuracy": "best accuracy",
    "final_macro_f1": "final macro-F1",
    "best_macro_f1": "best macro-F1",
    "download_bytes": "bytes sent to clients",
    "upload_bytes": "bytes sent by clients",
    "wall_seconds": "wall time",
}


def shown(key: str, value: Any) -> str:
    """A cell: fractions as %, bytes in MB, seconds with one decimal, '-' where a run has no value."""
    if value is None:
        return "-"
    if key.endswith(("accuracy", "macro_f1")):
        return f"{100 * value:.2f}%"
    if key.endswith("bytes"):
        return f"{value / 1e6:,.2f} MB"
    if key == "wall_seconds":
        return f"{value:.1f} s"
    return str(value)


def render(comparison) -> Table:
    table = Table(title="runs side by side", title_justify="left")
    table.add_column("", no_wrap=True)
    for label in comparison.labels:
        table.add_column(label, justify="right")
    runs = comparison.runs
    table.add_row("status", *(r.status for r in runs))
    table.add_row("experiment", *(r.name for r in runs))
    for key, values in comparison.differences.items():
        table.add_row(key, *("-" if v is None else str(v) for v in values))
    same = " (same)" if comparison.same_partition else ""
    table.add_row(f"partition{same}", *(r.partition or "-" for r in runs))
    table.add_row("rounds", *(str(r.rounds) for r in runs))
    for key, label in ROWS.items():
        if any(key in r.metrics for r in runs):
            table.add_row(label, *(shown(key, r.metrics.get(key)) for r in runs))
    return table


@app.command()
@user_errors
def compare(
    runs: list[Path] = typer.Argument(..., help="Run directories to put side by side (finished or not)."),
    plot: Path = typer.Option(Path("compare.png"), "--plot", help="Where to write the overlaid accuracy curves (PNG)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (every run's numbers and config, the differences) instead of the table."),
) -> None:
    """Compare runs: config differences, final/best accuracy, F1, bytes sent, wall time; their accuracy curves in one PNG."""
    from fedprior.cli.partition import check_output_file
    from fedprior.experiments.compare import compare_runs

    check_output_file(plot, "--plot", example="compare.png")  # a folder or an unwritable place: one line, before reading the runs
    comparison = compare_runs(runs)
    for run in comparison.runs:
        if not run.finished:
            stderr.print(
                f"note: {run.path} has not finished; its numbers come from the {run.rounds} rounds in its metrics.jsonl", highlight=False, soft_wrap=True
            )
    path = comparison.plot(plot)
    if as_json:
        typer.echo(json.dumps({**comparison.to_dict(), "plot": str(path)}))
        return
    Console().print(render(comparison), highlight=False)
    typer.echo(f"accuracy curves written to {path}")
