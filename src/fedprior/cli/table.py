"""``fedprior table NAME``: run a paper table's grid and print our numbers beside the paper's."""

from __future__ import annotations

import json
import shlex
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from fedprior.cli.app import IMPORT_HELP, app, import_first, stderr, user_errors
from fedprior.cli.console import make_console, plus_minus, print_table
from fedprior.reproduce.pipeline import EMBEDDED_SEEDS
from fedprior.reproduce.table_page import GATING, cell_text, column_label, grid, other_notes, power_cells

if TYPE_CHECKING:
    from fedprior.experiments.cell import Cell
    from fedprior.reproduce.tables import PaperTable


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
    detects, gap, needs, planned = power_cells(f)
    power = f"; detects {detects} at 80% power" if detects else ""
    power += f", the paper's gap {gap} needs {needs} seeds" if gap and needs else ""
    power += f", {planned} planned" if planned else ""
    return f"  {f['claim']}: {f['paired_difference']} = {f['mean']:+.2f}{sd}, n={f['n']}, {interval}: {f['verdict']}{note}{power}"


@app.command()
@user_errors
def table(
    name: str = typer.Argument(..., help="A paper's table, e.g. fst-cbdg-table2 (an unknown name lists them all)."),
    embedded: bool = typer.Option(False, "--embedded", help="Run offline on an embedded dataset (Fashion-MNIST) instead of the paper's setting."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field in every cell: section.key=value (repeatable)."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Folder for the cells' run directories and table.md/json (default runs/NAME-TIMESTAMP); the same --out again continues a stopped table. "
        "With --verify, where the reruns go (default a temporary folder): the same --out again reuses its finished reruns.",
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
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print table.json (cells, controls, findings) as one line on stdout; with --verify, what the verify found "
        "(per cell its status, per claim its finding both ways), the lines going to stderr.",
    ),
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
    plan: bool = typer.Option(
        False,
        "--plan",
        help="Print, per claim, the seeds planned and the CPU time they cost (from the cells' own timings) from the table's committed record "
        "(--record): its stored plan, else one made now from its seeds (80% power at the paper's gap). Runs nothing.",
    ),
    planned_seeds: bool = typer.Option(
        False,
        "--planned-seeds",
        help="Run each cell the stored seed plan of the table's record (--record) gives more seeds with those seeds, the others with --seeds "
        "(what benchmarks/paper_tables.py runs); a record without a stored plan is an error.",
    ),
    record: Path | None = typer.Option(
        None, "--record", help="The table's committed record for --plan and --planned-seeds (default benchmarks/results/tables/NAME.json)."
    ),
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
    from fedprior.papers import table_by_name
    from fedprior.reproduce.pipeline import command_line, default_folder, planned_cells, reproduce_table
    from fedprior.runtime.threads import available_cores

    import_first(imports)
    if plan:
        table_by_name(name)  # an unknown name lists the tables
        print_plan(name, record or Path("benchmarks/results/tables") / f"{name}.json")
        return
    chosen = selection(rows)
    chosen_columns = selection(columns)
    more = stored_cell_seeds(name, record or Path("benchmarks/results/tables") / f"{name}.json") if planned_seeds else None
    if verify or verify_all:
        paper_table = table_by_name(name)
        planned = planned_cells(paper_table, embedded, set_, chosen, chosen_columns)
        if set_ or imports:
            raise ConfigError("--verify reruns the committed cells as they ran: leave out --set and --import")
        n_seeds, n_jobs = seeds or (EMBEDDED_SEEDS if embedded else 1), jobs or available_cores()
        given = [name, *(["--embedded"] if embedded else []), "--verify", *(["--verify-all"] if verify_all else [])]
        given += [*(["--rows", rows] if rows else []), *(["--columns", columns] if columns else []), "--seeds", str(n_seeds), "--jobs", str(n_jobs)]
        command = shlex.join(["fedprior", "table", *given, "--cells", str(kept_cells), *(["--json"] if as_json else [])])
        verify_cells(paper_table, embedded, planned, kept_cells, out, verify_all, n_seeds, n_jobs, command if as_json else None)
        return
    folder = out or default_folder(name, embedded)
    try:
        result = reproduce_table(
            name,
            embedded=embedded,
            seeds=seeds,
            rows=chosen,
            columns=chosen_columns,
            out=folder,
            jobs=jobs,
            overrides=set_,
            imports=imports,
            on_progress=lambda line: stderr.print(line, highlight=False),
            cell_seeds=more,
        )
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: rerunning the table command goes on, not one cell's resume
        again = command_line(name, embedded, set_, folder, seeds, jobs, chosen, chosen_columns, as_json, imports)
        again += (" --planned-seeds" + (f" --record {shlex.quote(str(record))}" if record else "")) if planned_seeds else ""
        raise Interrupted(getattr(error, "signum", signal.SIGINT), continue_with=f"continue the table with `{again}`") from None
    if as_json:
        typer.echo(json.dumps(result.to_json()))
        return
    document = result.to_json()
    console = make_console()
    for notice in result.notices:
        console.print(notice, highlight=False, style="bold")
    print_table(console, render(result.title, document["cells"], plus_minus(console.file)))
    for line in control_lines(document["controls"]):
        console.print(line, highlight=False, soft_wrap=True)
    if document["findings"]:
        console.print("findings (paired differences over seeds, 95% t interval):", highlight=False)
        for finding in document["findings"]:
            console.print(finding_line(finding), highlight=False, soft_wrap=True)


def print_plan(name: str, path: Path) -> None:
    """``--plan``: the seed plan the record at ``path`` stores, else one made now from its cells (:mod:`fedprior.reproduce.seed_plan`)."""
    from fedprior.errors import ConfigError
    from fedprior.reproduce.pipeline import evaluate_again
    from fedprior.reproduce.seed_plan import make_plan, plan_lines
    from fedprior.reproduce.table_result import TableResult

    if not path.is_file():
        raise ConfigError(f"--record: no record of {name} at {path} (run the table with benchmarks/paper_tables.py first, or give --record PATH)")
    document = json.loads(path.read_text())
    stored = document.get("plan")
    result = TableResult.from_json(document.get("table", document))  # a record holds table.json under "table"; table.json is one itself
    if result.table != name:
        raise ConfigError(f"--record: {path} is table {result.table}, not {name}")
    for line in plan_lines(stored or make_plan(evaluate_again(result)), stored=stored is not None):
        typer.echo(line)


def stored_cell_seeds(name: str, path: Path) -> dict[tuple[str, str], int]:
    """``--planned-seeds``: (row, column) -> seeds of the cells the seed plan stored in the record at ``path`` gives more seeds
    (:func:`fedprior.reproduce.seed_plan.cell_seeds`); a missing record or plan, or another table's record, is a ConfigError."""
    from fedprior.errors import ConfigError
    from fedprior.reproduce.seed_plan import cell_seeds

    if not path.is_file():
        raise ConfigError(f"--record: no record of {name} at {path} (give --record PATH, or leave out --planned-seeds)")
    document = json.loads(path.read_text())
    if document.get("table", {}).get("table") != name:
        raise ConfigError(f"--record: {path} is table {document.get('table', {}).get('table')}, not {name}")
    if "plan" not in document:
        raise ConfigError(f"--planned-seeds: {path} stores no seed plan (make one with benchmarks/paper_tables.py {name} --plan)")
    return cell_seeds(document["plan"])


def verify_cells(
    paper_table: PaperTable, embedded: bool, planned: list[Cell], cells: Path, out: Path | None, every: bool, seeds: int, jobs: int, as_json: str | None = None
) -> None:
    """``--verify``: each chosen kept cell's status, one line each as it is known; where a rerun is not identical, the
    largest difference per cell and metric and each concerned claim's verdict both ways; a count. Exit code 1 if any
    differs or a verdict changes. ``as_json`` (the command, for the report): the lines go to stderr, and stdout gets the
    report as one JSON line (:func:`fedprior.reproduce.table_verify.report`)."""
    import tempfile
    import time

    from fedprior.errors import ConfigError
    from fedprior.reproduce.table_verify import DIFFERS, Verified, claim_checks, largest_differences, report, reruns_reused, status_counts, verify

    kept = cells / paper_table.name
    if not kept.is_dir():
        raise ConfigError(f"--cells: no committed cells of {paper_table.name} in {kept} (give --cells DIR, run from the repository root)")
    if out is not None and out.resolve() == kept.resolve():
        raise ConfigError(f"--out: {out} holds the committed cells; the reruns go elsewhere (leave --out out for a temporary folder)")
    stderr.print(f"{paper_table.title}: verifying the committed cells in {kept}", highlight=False)

    def say(line: str) -> None:
        typer.echo(line, err=as_json is not None)

    def each(v: Verified) -> None:
        say(f"{v.cell.row} / {v.cell.column} seed {v.seed}: {v.line}")

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fedprior-verify-") as scratch:
        results, reruns = verify(paper_table, planned, cells, out or Path(scratch), every, seeds, jobs, each)
    checks = claim_checks(paper_table, embedded, kept, seeds, reruns) if any(v.changed for v in results) else []
    if any(v.changed for v in results):
        say("largest difference per cell (|now - committed| over its rerun seeds):")
        for (row, column), metrics in largest_differences(results).items():
            say(f"  {row} / {column}: " + ", ".join(f"{metric} {d:.2f} (seed {seed})" for metric, (d, seed) in metrics.items()))
        say(f"claims (verdict on the committed seeds, the first {seeds} and any a seed plan kept after them, and with the rerun seeds in their place):")
        for check in checks:
            say(f"  {check.line}")
        if not checks:
            say("  none concerns a rerun cell")
    counts = status_counts(results)
    changed = sum(check.changed for check in checks)
    reused = reruns_reused(results)
    say(
        ", ".join(
            [
                *(f"{n} {status}" for status, n in counts.items()),
                *([f"{changed} verdict(s) changed"] if checks else []),
                *([f"{reused} rerun(s) reused from --out"] if reused else []),
            ]
        )
    )
    if as_json is not None:
        typer.echo(json.dumps(report(paper_table, results, checks, seeds, as_json) | {"wall_seconds": round(time.perf_counter() - started, 1)}))
    if counts.get(DIFFERS) or changed:
        raise typer.Exit(1)


def selection(text: str | None) -> list[str] | None:
    """``--rows``/``--columns``: None when the option is left out (all), else the comma-separated labels (maybe none)."""
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]
