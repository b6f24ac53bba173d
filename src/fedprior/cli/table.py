"""``fedprior table NAME``: run a paper table's grid and print our numbers beside the paper's."""

from __future__ import annotations

import json
import shlex
import signal
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from fedprior.cli.app import IMPORT_HELP, app, import_first, stderr, user_errors
from fedprior.cli.console import make_console, plus_minus, print_table

if TYPE_CHECKING:
    from fedprior.experiments.cell import Cell
    from fedprior.reproduce.tables import PaperTable

EMBEDDED_SEEDS = 3
"""Seeds per cell of an embedded table unless --seeds says otherwise (the paper's setting: 1)."""

METRIC_LABELS = {
    "final_accuracy": "acc",
    "best_accuracy": "best acc",
    "final_macro_f1": "F1",
    "best_macro_f1": "best F1",
    "selected_accuracy": "sel. acc",
    "selected_macro_f1": "sel. F1",
    "late_change": "last-10% move",
    "mean_client_pl_accuracy": "PL acc",
}


GATING = "where one fails, the claims it gates there get no verdict"
"""What a failed control does, said above the controls in table.md and on the terminal."""


def grid(results: list[dict]) -> tuple[list[str], list[tuple[str, str]], dict]:
    """Rows, (column, metric) pairs and the cells by (row, column): a table with several metrics gets a column per metric."""
    rows = list(dict.fromkeys(r["row"] for r in results))
    metrics = list(dict.fromkeys(m for r in results for m in r.get("metrics", {"": None}))) if results else []
    columns = [(c, m) for c in dict.fromkeys(r["column"] for r in results) for m in metrics]
    return rows, columns, {(r["row"], r["column"]): r for r in results}


def cell_text(r: dict | None, metric: str, plus_minus: str) -> str:
    if r is None:
        return ""
    if "metrics" in r and metric not in r["metrics"]:
        return "-"  # a metric this row does not produce
    value = r.get("metrics", {}).get(metric) or {"mean": r["ours"], "std": r["std"], "paper": r["paper"]}
    spread = f" {plus_minus} {number(value['std'])}" if r.get("seeds", 1) > 1 else ""
    paper = "-" if value["paper"] is None else number(value["paper"])
    return f"{number(value['mean'])}{spread} ({paper})"


def number(value: float) -> str:
    """A percentage with one decimal (:func:`rounded`); a large count (bits, bytes) in three significant digits."""
    return f"{value:.3g}" if abs(value) >= 1e5 else rounded(value, 1)


def rounded(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, half away from zero on its shortest decimal form: 1.95 -> '2.0'.

    A table's numbers are stored rounded to two decimals (table.json); formatting the float 1.95 directly gives
    '1.9' (it is 1.94999... in binary), a second rounding that the docs, quoting table.json, would not match.
    """
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def column_label(column: str, metric: str, several: bool) -> str:
    return f"{column} {METRIC_LABELS.get(metric, metric)}" if several else column


def render(title: str, results: list[dict], plus: str = "±") -> Table:
    """The table on the terminal: ours ± sd (``plus``: ``+-`` where the output cannot encode ±) (paper) per cell."""
    rows, columns, cell = grid(results)
    several = len({m for _, m in columns}) > 1
    table = Table(title=f"{title}\nours (paper)", title_justify="left")
    table.add_column("method")
    for column, metric in columns:
        table.add_column(column_label(column, metric, several), justify="right")
    for row in rows:
        table.add_row(row, *(cell_text(cell.get((row, c)), m, plus) for c, m in columns))
    return table


def markdown(title: str, results: list[dict], evaluated: dict | None = None, overrides: list[str] | None = None, command: str | None = None) -> str:
    """The table (ours (paper), mean ± sd over seeds), under its notices (a failed control first), then its controls and findings.

    ``overrides`` (the ``--set`` options, given to every cell) and ``command`` (how to run the
    table again), where given, are recorded under the notices: a table whose cells ran with
    changed fields says which, so that its numbers are never read as the preset's.
    """
    rows, columns, cell = grid(results)
    several = len({m for _, m in columns}) > 1
    labels = [column_label(c, m, several) for c, m in columns]
    lines = [f"# {title}", ""]
    if evaluated and evaluated["notices"]:
        lines += [*(f"**{notice}**  " for notice in evaluated["notices"]), ""]
    if overrides is not None:
        given = ", ".join(code_span(o) for o in overrides) if overrides else "none (every cell as its table defines it)"
        lines += [f"overrides (--set, in every cell): {given}" + ("  " if command else ""), *([f"command: {code_span(command)}"] if command else []), ""]
    seeds = results[0].get("seeds", 1) if results else 1
    spread = f"; mean ± sd over {seeds} seeds (sd with n - 1)" if seeds > 1 else "; one seed"
    lines += [f"ours (paper){spread}", "", "| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for row in rows:
        lines.append(f"| {row} | " + " | ".join(cell_text(cell.get((row, c)), m, "±") for c, m in columns) + " |")
    if evaluated:
        lines += ["", *controls_markdown(evaluated["controls"]), *findings_markdown(evaluated["findings"])]
    return "\n".join(lines) + "\n"


def code_span(text: str) -> str:
    """``text`` as a Markdown code span (a backtick inside it is fenced by two)."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def controls_markdown(controls: list[dict]) -> list[str]:
    if not controls:
        return ["## Controls", "", "none: nothing in this table bounds what a method can reach", ""]
    lines = ["## Controls", "", f"checked in each column on the mean over seeds; {GATING}", ""]
    lines += ["| condition | column | above | below | difference | needed | status |", "|---|---|---|---|---|---|---|"]
    for c in controls:
        if c.get("kind") == "measured":  # a number measured on the column's setting (tables.MeasuredControl)
            if c["status"] == "not run":
                lines.append(f"| {c['condition']} | {c['column']} | | | | {c['margin']:g} | not run (not measured) |")
            else:
                lines.append(f"| {c['condition']} | {c['column']} | {c['value']:.1f} ({c['measured']}) | | | {c['margin']:g} | {c['status']} |")
        elif c["status"] == "not run":
            lines.append(f"| {c['condition']} | {c['column']} | | | | {c['margin']:g} | not run ({', '.join(c['missing'])}) |")
        else:
            lines.append(
                f"| {c['condition']} | {c['column']} | {c['above']:.1f} | {c['below']:.1f} | {c['difference']:+.1f} | {c['margin']:g} | {c['status']} |"
            )
    gates = {c["condition"]: c["gates"] for c in controls if c.get("gates")}  # a table.json written before controls named them has none
    if gates:
        lines += ["", "what each control gates (rows, or claims by name; a claim is gated through either of its rows):", ""]
        lines += [f"- {condition}: {', '.join(gated)}" for condition, gated in gates.items()]
    return [*lines, ""]


def findings_markdown(findings: list[dict]) -> list[str]:
    lines = [
        "## Findings",
        "",
        "each claim of the paper on the paired differences over seeds (the difference column: better - worse, or worse - better "
        "for a cost such as bits, so that a positive mean favours the claim; seed s of both rows: the same partition "
        "and client sampling), their mean, sd (n - 1) and 95% interval of the mean (Student t, n - 1 degrees of freedom); "
        "holds: interval above 0, reversed: below 0, not resolved: spans 0 or one seed",
        "",
    ]
    if not findings:
        return [*lines, "no claim declared", ""]
    lines += ["| claim | column | metric | difference | n | mean | sd | 95% interval | verdict | paper |", "|---|---|---|---|---|---|---|---|---|---|"]
    for f in findings:
        metric = METRIC_LABELS.get(f["metric"], f["metric"])
        if f["verdict"] == "not run":
            lines.append(f"| {f['claim']} | {f['column']} | {metric} | {f['paired_difference']} | | | | | {f['note']} | |")
            continue
        sd = "" if f["sd"] is None else f"{f['sd']:.2f}"
        interval = "one seed: no interval" if f["low"] is None else f"[{f['low']:+.2f}, {f['high']:+.2f}]"
        verdict = f"**{f['verdict']}**" + (f" ({extra})" if (extra := other_notes(f)) else "")
        paper = "" if f["paper"] is None else f"{f['paper']:+.1f}"
        lines.append(
            f"| {f['claim']} | {f['column']} | {metric} | {f['paired_difference']} | {f['n']} | {f['mean']:+.2f} | {sd} | {interval} | {verdict} | {paper} |"
        )
    lines += ["", "Sources:", ""]
    lines += [f"- {f['claim']}: {f['source']}" for f in findings if f["source"]]
    return [*lines, ""]


def other_notes(f: dict) -> str:
    """A finding's notes other than 'one seed: no interval' (which its interval already says)."""
    return "; ".join(n for n in f["note"].split("; ") if n and n != "one seed: no interval")


def control_lines(controls: list[dict]) -> list[str]:
    """The controls for the terminal: a heading, then one line per control and column with its status and numbers."""
    if not controls:
        return ["controls: none (nothing in this table bounds what a method can reach)"]
    return [f"controls (on the mean over seeds; {GATING}):", *map(control_line, controls)]


def control_line(c: dict) -> str:
    """One control in one column: passed, failed or not run, then what it measured against what it needs."""
    where = f"{c['condition']} at {c['column']}"
    if c["status"] == "not run":
        why = "not measured" if c["missing"] == ["not measured"] else f"row(s) {', '.join(c['missing'])} not run"
        return f"  not run  {where}: {why}"
    if c.get("kind") == "measured":
        return f"  {c['status']:<7}  {where}: {c['value']:.1f}, needed {c['margin']:g} ({c['measured']})"
    moved = f"; the upper row moved {c['late_change']:.2f} points over its last 10% of rounds" if "late_change" in c else ""
    return f"  {c['status']:<7}  {where}: {c['above']:.1f} vs {c['below']:.1f}, difference {c['difference']:+.1f}, needed {c['margin']:g}{moved}"


def finding_line(f: dict) -> str:
    """One line per claim for the terminal."""
    if f["verdict"] == "not run":
        return f"  {f['claim']}: {f['note']}"
    interval = "one seed: no interval" if f["low"] is None else f"95% [{f['low']:+.2f}, {f['high']:+.2f}]"
    sd = "" if f["sd"] is None else f" sd {f['sd']:.2f}"
    note = f" ({extra})" if (extra := other_notes(f)) else ""
    return f"  {f['claim']}: {f['paired_difference']} = {f['mean']:+.2f}{sd}, n={f['n']}, {interval}: {f['verdict']}{note}"


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
    seeds: int | None = typer.Option(
        None, "--seeds", min=1, help=f"Run every cell with seeds 0..N-1 (default {EMBEDDED_SEEDS} with --embedded, else 1); 'ours' is the mean, 'std' the sd."
    ),
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        min=1,
        help="Cells run at once, each in its own process with one thread, run.workers=1 and run.concurrent_clients=1 (default: the cores available).",
    ),
    rows: str | None = typer.Option(None, "--rows", help="Run only these rows (comma-separated labels, e.g. 'MFCL(PN),FedSimCLR')."),
    columns: str | None = typer.Option(None, "--columns", help="Run only these columns (comma-separated, as the grid names them, e.g. 'Sc2,Sc10')."),
    as_json: bool = typer.Option(False, "--json", help="Print table.json (cells, controls, findings) as one line on stdout."),
    imports: list[str] = typer.Option(
        [], "--import", help=f"{IMPORT_HELP} Added to every cell's run.imports (for a --set algorithm.name=... of your own, say)."
    ),
    verify: bool = typer.Option(
        False,
        "--verify",
        help="Rerun the committed cells (--cells) and compare each with its committed result: identical, differs (from which round), or, "
        "recorded on another machine kind, the differences of the table's numbers and whether each claim's verdict stays the same. "
        "One seed per row (seed 0 of its first kept cell); exit code 1 if any differs or, on another machine kind, a verdict changes.",
    ),
    verify_all: bool = typer.Option(False, "--verify-all", help="--verify every seed (--seeds) of every chosen cell."),
    kept_cells: Path = typer.Option(
        Path("benchmarks/results/cells"), "--cells", help="Where --verify finds the committed cells: DIR/NAME/ROW--COLUMN--seedN/{config.toml,result.json}."
    ),
) -> None:
    """Run every cell of a paper's table and print our number beside the paper's, its controls and a verdict per claim.

    Run again with the same --out, it continues a stopped table: finished cells are reused,
    a cell stopped mid-way resumes from its checkpoint, the others run. With --verify, rerun
    the committed cells instead and say whether today's code gives their numbers to the bit.
    """
    from fedprior.errors import ConfigError, Interrupted
    from fedprior.experiments.config import load_config
    from fedprior.experiments.table_runs import REUSED, RUN, check_grid_folder, copy_twin, execute_runs, plan_cell, twins
    from fedprior.papers import table_by_name
    from fedprior.reproduce.findings import evaluate
    from fedprior.reproduce.tables import cell_value, cells, control_configs, run_table
    from fedprior.runtime.threads import available_cores

    import_first(imports)
    paper_table = table_by_name(name)
    chosen = selection(rows)
    chosen_columns = selection(columns)
    planned = cells(paper_table, embedded, set_, chosen, chosen_columns)
    if not planned:
        where = "in the embedded setting (its datasets are not embedded); run it without --embedded" if embedded else "in the paper's setting"
        raise ConfigError(f"{name}: no cell of {'the chosen rows and columns' if chosen or chosen_columns else 'this table'} runs {where}")
    n_seeds = seeds or (EMBEDDED_SEEDS if embedded else 1)
    if verify or verify_all:
        if set_ or imports:
            raise ConfigError("--verify reruns the committed cells as they ran: leave out --set and --import")
        verify_cells(paper_table, embedded, planned, kept_cells, out, verify_all, n_seeds, jobs or available_cores())
        return
    folder = out or Path("runs") / f"{name}{'-embedded' if embedded else ''}-{datetime.now():%Y%m%d-%H%M%S}"
    check_grid_folder(folder)
    runs = {}
    for cell in planned:  # every config is checked, and every cell folder a stopped table left, before anything runs
        for seed in range(n_seeds):
            cell_name, config = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"], imports)
            runs[cell.row, cell.column, seed] = plan_cell(folder, cell, seed, cell_name, config)
    to_measure = control_configs(paper_table, embedded, set_, chosen_columns, imports)  # checked before any cell runs, measured after
    n_jobs = jobs or available_cores()
    setting = f" (embedded: {paper_table.embedded_note})" if embedded and paper_table.embedded_note else ""
    stderr.print(f"{paper_table.title}: {len(planned)} cells x {n_seeds} seed(s), {n_jobs} at once{setting}; runs in {folder}", highlight=False)
    kept = [r.action for r in runs.values() if r.action != RUN]
    if kept:
        stderr.print(
            f"continuing the table in {folder}: {kept.count(REUSED)} finished run(s) reused, {len(kept) - kept.count(REUSED)} resumed", highlight=False
        )

    def on_done(run, summary):
        cell = run.cell
        paper = "-" if cell.paper is None else number(cell.paper)
        ours = number(cell_value(paper_table, summary, paper_table.metrics[0]))
        how = "" if run.action == RUN else f", {run.action}"
        stderr.print(
            f"  {cell.row:<24} {cell.column:<18} seed {run.seed}  ours {ours:>5}  paper {paper:>5}  ({summary['wall_seconds']:.1f} s{how})",
            highlight=False,
        )

    planned_runs = list(runs.values())
    copies = twins(planned_runs)  # a config two cells share trains once
    if copies:
        stderr.print(f"{len(copies)} run(s) have the config of another cell's run: each such config trains once, its twins copy it", highlight=False)
    try:
        summaries = execute_runs([run for i, run in enumerate(planned_runs) if i not in copies], n_jobs, on_done)
        for i, j in copies.items():
            copied = copy_twin(planned_runs[j], planned_runs[i])
            summaries[copied.cell.row, copied.cell.column, copied.seed] = copied.result
            on_done(copied, copied.result)
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: rerunning the table command goes on, not one cell's resume
        again = command_line(name, embedded, set_, folder, seeds, jobs, rows, columns, as_json, imports)
        raise Interrupted(getattr(error, "signum", signal.SIGINT), continue_with=f"continue the table with `{again}`") from None
    results = run_table(
        paper_table, embedded, set_, lambda cell, seed: summaries[cell.row, cell.column, seed], seeds=n_seeds, rows=chosen, columns=chosen_columns
    )
    measured = {key: control.measure(preset, config) for key, (control, preset, config) in to_measure.items()}
    evaluated = evaluate(paper_table, results, embedded, measured)
    document = {
        "table": name,
        "title": paper_table.title,
        "setting": "embedded" if embedded else "paper",
        "seeds": n_seeds,
        "overrides": list(set_),
        "imports": list(imports),
        "cells": results,
        **evaluated,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.json").write_text(json.dumps(document, indent=2))
    again = command_line(name, embedded, set_, folder, seeds, jobs, rows, columns, as_json=False, imports=imports)
    (folder / "table.md").write_text(markdown(paper_table.title, results, evaluated, overrides=list(set_), command=again))
    if as_json:
        typer.echo(json.dumps(document))
        return
    console = make_console()
    for notice in evaluated["notices"]:
        console.print(notice, highlight=False, style="bold")
    print_table(console, render(paper_table.title, results, plus_minus(console.file)))
    for line in control_lines(evaluated["controls"]):
        console.print(line, highlight=False, soft_wrap=True)
    if evaluated["findings"]:
        console.print("findings (paired differences over seeds, 95% t interval):", highlight=False)
        for finding in evaluated["findings"]:
            console.print(finding_line(finding), highlight=False, soft_wrap=True)


def verify_cells(paper_table: PaperTable, embedded: bool, planned: list[Cell], cells: Path, out: Path | None, every: bool, seeds: int, jobs: int) -> None:
    """``--verify``: each chosen kept cell's status, one line each as it is known; where a rerun is not identical, the
    largest difference per cell and metric and each concerned claim's verdict both ways; a count. Exit code 1 if any
    differs or a verdict changes."""
    import tempfile

    from fedprior.errors import ConfigError
    from fedprior.reproduce.table_verify import DIFFERS, Verified, claim_checks, largest_differences, verify

    kept = cells / paper_table.name
    if not kept.is_dir():
        raise ConfigError(f"--cells: no committed cells of {paper_table.name} in {kept} (give --cells DIR, run from the repository root)")
    if out is not None and out.resolve() == kept.resolve():
        raise ConfigError(f"--out: {out} holds the committed cells; the reruns go elsewhere (leave --out out for a temporary folder)")
    stderr.print(f"{paper_table.title}: verifying the committed cells in {kept}", highlight=False)

    def report(v: Verified) -> None:
        typer.echo(f"{v.cell.row} / {v.cell.column} seed {v.seed}: {v.line}")

    with tempfile.TemporaryDirectory(prefix="fedprior-verify-") as scratch:
        results, reruns = verify(paper_table, planned, cells, out or Path(scratch), every, seeds, jobs, report)
    checks = claim_checks(paper_table, embedded, kept, seeds, reruns) if any(v.changed for v in results) else []
    if any(v.changed for v in results):
        typer.echo("largest difference per cell (|now - committed| over its rerun seeds):")
        for (row, column), metrics in largest_differences(results).items():
            typer.echo(f"  {row} / {column}: " + ", ".join(f"{metric} {d:.2f} (seed {seed})" for metric, (d, seed) in metrics.items()))
        typer.echo(f"claims (verdict on the committed {seeds} seed(s), and with the rerun seeds in their place):")
        for check in checks:
            typer.echo(f"  {check.line}")
        if not checks:
            typer.echo("  none concerns a rerun cell")
    counts = {status: sum(v.status == status for v in results) for status in dict.fromkeys(v.status for v in results)}
    changed = sum(check.changed for check in checks)
    typer.echo(", ".join([*(f"{n} {status}" for status, n in counts.items()), *([f"{changed} verdict(s) changed"] if checks else [])]))
    if counts.get(DIFFERS) or changed:
        raise typer.Exit(1)


def selection(text: str | None) -> list[str] | None:
    """``--rows``/``--columns``: None when the option is left out (all), else the comma-separated labels (maybe none)."""
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def command_line(
    name: str,
    embedded: bool,
    set_: list[str],
    folder: Path,
    seeds: int | None,
    jobs: int | None,
    rows: str | None,
    columns: str | None,
    as_json: bool,
    imports: list[str] | None = None,
) -> str:
    """The ``fedprior table`` command that continues this table in ``folder`` (shell-quoted)."""
    parts = ["fedprior", "table", name, *(["--embedded"] if embedded else [])]
    parts += [arg for module in imports or [] for arg in ("--import", module)]
    parts += [arg for override in set_ for arg in ("--set", override)]
    parts += ["--rows", rows] if rows is not None else []
    parts += ["--columns", columns] if columns is not None else []
    parts += ["--seeds", str(seeds)] if seeds is not None else []
    parts += ["--jobs", str(jobs)] if jobs is not None else []
    parts += ["--out", str(folder), *(["--json"] if as_json else [])]
    return shlex.join(parts)
