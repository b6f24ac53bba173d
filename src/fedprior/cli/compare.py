"""``fedprior compare RUN_DIR...``: runs grouped by method (seeds folded), mean ± sd per group in one table, their accuracy curves in one PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fedprior.cli.app import IMPORT_HELP, app, import_first, stderr, user_errors
from fedprior.cli.console import make_console, plus_minus, print_table
from fedprior.errors import FedpriorError

COLUMNS = {
    "final_accuracy": "final\naccuracy %",
    "best_accuracy": "best\naccuracy %",
    "dp_epsilon": "DP\nepsilon",
    "final_macro_f1": "final\nmacro-F1 %",
    "best_macro_f1": "best\nmacro-F1 %",
    "final_client_accuracy_mean": "per-client\nmean %",
    "final_client_accuracy_pooled": "per-client\npooled %",
    "bytes": "MB to / from\nclients",
    "wall_seconds": "wall\ntime s",
}
"""The group table's metric columns (initial accuracy and every sd are in --json and --csv); a column shows where a run has its metric
(DP epsilon: a run with client-level DP, ``privacy.dp``; its delta is the run's ``privacy.delta``, named in the caption)."""
SPREAD = ("accuracy", "macro_f1", "accuracy_mean", "accuracy_pooled")
"""Metrics shown as mean ± sd; the others (bytes, seconds: the same for every seed, or machine noise) as the mean."""


WRITTEN = {"plot": "accuracy curves", "csv": "per-group CSV", "runs_csv": "per-run CSV"}
"""What each file written by ``compare`` holds (its line on stdout)."""


def number(key: str, value: float) -> str:
    """A value in a column's unit: fractions as % (the header says so), bytes as MB, epsilon with three decimals (as the round line), seconds with one."""
    if key.endswith(SPREAD):
        return f"{100 * value:.2f}"
    if key.endswith("bytes"):
        return f"{value / 1e6:,.2f}"
    if key == "dp_epsilon":
        return f"{value:.3f}"
    return f"{value:.1f}"


def spread(key: str, row: dict[str, Any], plus: str = "±") -> str:
    """A group's cell: mean ± sd (sample sd, n - 1; ``plus`` is ``+-`` where the output cannot encode ±) for accuracy and F1,
    the mean for the rest; '-' where no run has the metric."""
    mean, sd = row[f"{key}_mean"], row[f"{key}_sd"]
    if mean is None:
        return "-"
    if sd is None or not key.endswith(SPREAD):
        return number(key, mean)
    return f"{number(key, mean)} {plus} {number(key, sd)}"


def shown(key: str, value: Any) -> str:
    """A run's cell: fractions as %, bytes in MB, seconds with one decimal, epsilon with three, '-' where the run has no value."""
    if value is None:
        return "-"
    if key.endswith(SPREAD):
        return f"{number(key, value)}%"
    if key.endswith("bytes"):
        return f"{number(key, value)} MB"
    if key == "wall_seconds":
        return f"{number(key, value)} s"
    if key == "dp_epsilon":
        return number(key, value)
    return str(value)


def render(comparison, width: int | None = None, plus: str = "±") -> Table:
    """One row per group: its label, n (starred where some of its runs have not finished), seeds, mean ± sd of each metric.

    Where the table is wider than ``width`` (the terminal), the columns wall time, MB and
    best/final macro-F1 are left out in that order (the caption says which: --csv and
    --json have them), rather than cropped or broken inside a number. The caption also
    warns of runs counted once (repeats of a run: the same config and seed), names the
    fields in which the groups differ, and says whether they are paired or why not.
    """
    rows = comparison.group_rows()
    have = set(comparison.metrics) | ({"bytes"} if {"download_bytes", "upload_bytes"} <= set(comparison.metrics) else set())
    keys = [k for k in COLUMNS if k in have]
    left_out: list[str] = []
    while True:
        table = group_table(comparison, rows, keys, left_out, plus)
        if width is None or len(keys) <= 2:
            return table
        if needed_width(table) <= width:
            return table
        left_out.insert(0, COLUMNS[keys.pop()].replace("\n", " "))


def needed_width(table: Table) -> int:
    """The narrowest the table can be drawn without breaking a no-wrap cell: those columns' widest line, the others' min_width, borders and padding."""
    widths = []
    for column in table.columns:
        lines = [line for cell in (column.header, *column.cells) for line in str(cell).splitlines()]
        widths.append(max(map(len, lines), default=0) if column.no_wrap else (column.min_width or 1))
    return sum(widths) + 3 * len(widths) + 1


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def distinct(values: list[Any]) -> str:
    """A field's distinct values over the runs, in the order met ('-': a run without the field)."""
    from fedprior.results.compare_groups import shown_value

    return ", ".join(dict.fromkeys("-" if v is None else shown_value(v) for v in values))


def caption(comparison, rows: list[dict[str, Any]], left_out: list[str], plus: str) -> str:
    """The group table's notes, a line each: counts and the sd, unfinished runs, runs counted once, the fields the groups differ in, pairing, left-out columns."""
    repeats = comparison.repeats
    aside = [f"{counted(len(repeats), 'repeated run')} counted once"] if repeats else []
    aside += [f"{counted(len(comparison.shorter), 'shorter run')} left out"] if comparison.shorter else []
    once = f" ({', '.join(aside)})" if aside else ""
    lines = [f"{counted(len(comparison.runs), 'run')}{once} in {counted(len(rows), 'group')}; {plus}: sample sd over a group's runs (n - 1)"]
    if any(row["finished"] < row["n"] for row in rows):
        lines.append("*: some of the group's runs have not finished (their numbers are from the rounds they recorded)")
    if repeats:
        lines.append(f"warning: counted once: {'; '.join(repeat.text() for repeat in repeats)}")
    if comparison.shorter:
        lines.append(
            f"warning: left out of their groups' numbers (a mean folds runs of one length): {'; '.join(run.text() for run in comparison.shorter)}; "
            "finish them (`fedprior resume RUN`, or the sweep's or table's command again) to count them"
        )
    differences = comparison.method_differences
    if len(rows) > 1 and differences:
        lines.append("the groups differ in: " + "; ".join(f"{key} ({distinct(values)})" for key, values in differences.items()))
    budget = comparison.budget_differences
    if comparison.paired:
        lines.append("paired: every group ran the same seeds with the same budget, each seed on one partition")
    elif budget:
        lines.append("not paired: the groups' budgets differ: " + "; ".join(f"{key.replace('_', ' ')} ({distinct(values)})" for key, values in budget.items()))
    if "dp_epsilon" in comparison.metrics:
        private = [run for run in comparison.runs if "dp_epsilon" in run.metrics]
        deltas, accountants = distinct([r.config.get("privacy.delta") for r in private]), distinct([r.config.get("privacy.accountant") for r in private])
        lines.append(
            f"DP epsilon: the privacy spent by the last round, at privacy.delta = {deltas} (privacy.accountant: {accountants}); '-': a run without client-level DP"
        )
    if left_out:
        lines.append(f"left out for the terminal's width (in --csv, --json): {', '.join(left_out)}")
    return "\n".join(lines)


def group_table(comparison, rows: list[dict[str, Any]], keys: list[str], left_out: list[str], plus: str = "±") -> Table:
    caption_text = caption(comparison, rows, left_out, plus)
    table = Table(title="runs grouped by method, seeds folded", title_justify="left", caption=caption_text, caption_justify="left")
    longest = max((len(word) for row in rows for word in row["group"].split()), default=6)
    table.add_column("method", overflow="fold", min_width=min(longest, 24))  # a field=value broken only when longer than 24
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("seeds", overflow="fold", min_width=min(5, max(len(" ".join(map(str, row["seeds"]))) for row in rows)))
    for key in keys:
        table.add_column(COLUMNS[key], justify="right", no_wrap=True)  # 74.00 ± 4.00 on one line; the method column folds instead
    for row in rows:
        n = f"{row['n']}" + ("*" if row["finished"] < row["n"] else "")
        cells = [f"{spread('download_bytes', row)} / {spread('upload_bytes', row)}" if k == "bytes" else spread(k, row, plus) for k in keys]
        table.add_row(row["group"], n, " ".join(map(str, row["seeds"])), *cells)
    return table


def difference_lines(comparison) -> list[str]:
    """The paired differences (:meth:`~fedprior.results.compare.Comparison.paired_differences`), a line each, in points:
    ``final accuracy: B - A = +2.35 points, 95% t interval [-0.80, +5.50] over 3 seeds: not resolved``."""
    lines = []
    for d in comparison.paired_differences():
        what = f"{d['metric'].replace('_', ' ')}: {d['group']} - {d['minus']} = {100 * d['mean']:+.2f} points"
        if d["low"] is None:
            lines.append(f"{what} (one seed: no interval)")
        else:
            lines.append(f"{what}, 95% t interval [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}] over {d['n']} seeds: {d['verdict']}")
    if lines:
        lines.insert(0, "paired differences, seed by seed (mean, 95% t interval of the mean, n - 1 df; holds: above 0, reversed: below 0):")
    return lines


def render_runs(comparison) -> Table:
    """One row per run (--runs): its label, group, seed, status, partition, rounds, final and best accuracy, and DP epsilon where a run has it."""
    same = " (same)" if comparison.same_partition else ""
    table = Table(title="runs", title_justify="left")
    private = "dp_epsilon" in comparison.metrics
    numeric = ("seed", "rounds", "final accuracy", "best accuracy", "DP epsilon")
    for name in ("run", "method", "seed", "status", f"partition{same}", "rounds", "final accuracy", "best accuracy", *(["DP epsilon"] if private else [])):
        table.add_column(name, justify="right" if name in numeric else "left", overflow="fold")
    for row, run in zip(comparison.run_rows(), (r for g in comparison.groups for r in g.runs), strict=True):
        table.add_row(
            row["label"],
            row["group"],
            str(row["seed"]),
            run.status,
            run.partition or "-",
            str(run.rounds),
            shown("final_accuracy", row.get("final_accuracy")),
            shown("best_accuracy", row.get("best_accuracy")),
            *([shown("dp_epsilon", row.get("dp_epsilon"))] if private else []),
        )
    return table


@app.command()
@user_errors
def compare(
    runs: list[Path] = typer.Argument(
        ...,
        help="Run directories to compare (finished or not), or folders holding them (a sweep's or a table's --out); "
        "runs that differ only in run.seed (or where/how they ran) form one group.",
    ),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also write the accuracy curves to this PNG file: a mean line and a ±sd band per group (none is written without it)."
    ),
    x_axis: str = typer.Option(
        "round",
        "--x",
        help="The plot's x-axis: 'round', or 'time' (simulated seconds, for runs with a system model: [system] in docs/system-heterogeneity.md).",
    ),
    csv_file: Path | None = typer.Option(
        None, "--csv", help="Also write one row per group (mean and sd of each metric, accuracy as fractions) to this CSV file."
    ),
    runs_csv: Path | None = typer.Option(
        None, "--runs-csv", help="Also write one row per run (its group, seed and metrics, accuracy as fractions) to this CSV file."
    ),
    per_run: bool = typer.Option(False, "--runs", help="Also print one row per run under the group table."),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object (every run's numbers and config, the groups' mean and sd, the differences) instead of the table."
    ),
    imports: list[str] = typer.Option(
        [],
        "--import",
        help=f"{IMPORT_HELP} (compare reads run directories as data and runs of your own algorithms need none; accepted like in run and resume).",
    ),
) -> None:
    """Compare runs grouped by method, seeds folded: mean ± sd of final/best accuracy, F1, bytes sent, wall time per group; --plot: their curves in one PNG.

    A run repeated (the same config and seed) counts once, with a warning under the table; the
    table also names the fields in which the groups differ, and calls them paired only where
    they ran the same seeds with the same budget (rounds, local epochs, ...) on the same partitions.
    Paired groups get each group's difference from the first, seed by seed, on final and best
    accuracy: mean and 95% t interval, and whether it holds (above 0), is reversed or not resolved.
    """
    from fedprior.cli.partition import check_output_file
    from fedprior.results.compare import compare_runs

    import_first(imports)
    # a folder or an unwritable place: one line, before reading the runs
    for path, option in ((plot, "--plot"), (csv_file, "--csv"), (runs_csv, "--runs-csv")):
        if path is not None:
            check_output_file(path, option, example="compare.png" if option == "--plot" else "compare.csv")
    if x_axis not in ("round", "time"):
        raise FedpriorError(f"--x {x_axis}: accepted: round, time")
    if x_axis != "round" and plot is None:
        raise FedpriorError("--x: sets the x-axis of --plot; give --plot FILE.png too")
    comparison = compare_runs(runs)
    for run in comparison.runs:
        if not run.finished:
            stderr.print(
                f"note: {run.path} has not finished; its numbers come from the {run.rounds} rounds in its metrics.jsonl", highlight=False, soft_wrap=True
            )
    written = {} if plot is None else {"plot": str(comparison.plot(plot, x_axis))}
    if csv_file is not None:
        written["csv"] = str(comparison.write_csv(csv_file, per="group"))
    if runs_csv is not None:
        written["runs_csv"] = str(comparison.write_csv(runs_csv, per="run"))
    if as_json:
        typer.echo(json.dumps({**comparison.to_dict(), "plot": None, **written}))
        return
    console = make_console()
    print_table(console, render(comparison, console.width, plus_minus(console.file)))
    for line in difference_lines(comparison):
        typer.echo(line)
    if per_run:
        print_table(console, render_runs(comparison))
    for kind, where in written.items():
        typer.echo(f"{WRITTEN[kind]} written to {where}")
