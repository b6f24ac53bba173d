"""Run a paper's table from start to end: plan its cells, run them (or reuse, resume, copy), measure its controls, judge its claims.

:func:`reproduce_table` is what ``fedprior table NAME`` does, option parsing and printing aside, and
``fedprior.reproduce_table`` from Python. It writes the cells' run folders, ``table.json``
(:meth:`TableResult.to_json <fedprior.reproduce.table_result.TableResult.to_json>`) and ``table.md``
(:mod:`fedprior.reproduce.table_page`) into one folder; called again with the same folder it continues a
stopped table (:mod:`fedprior.experiments.table_runs`: finished cells reused, stopped ones resumed), so a
folder that already holds every finished cell (a committed table's kept cells, copied there) gives the table
again without training.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from fedprior.errors import ConfigError
from fedprior.reproduce.table_page import number
from fedprior.reproduce.table_result import CellResult, ControlResult, Finding, TableResult

if TYPE_CHECKING:
    from fedprior.experiments.cell import Cell
    from fedprior.reproduce.tables import PaperTable

EMBEDDED_SEEDS = 3
"""Seeds per cell of an embedded table unless ``seeds`` says otherwise (the paper's setting: 1)."""


def planned_cells(table: PaperTable, embedded: bool, overrides: Sequence[str], rows: list[str] | None, columns: list[str] | None) -> list[Cell]:
    """The cells of the chosen rows and columns (None: all) in the setting; a ConfigError where there is none."""
    from fedprior.reproduce.tables import cells

    planned = cells(table, embedded, list(overrides), rows, columns)
    if not planned:
        where = "in the embedded setting (its datasets are not embedded); run it without --embedded" if embedded else "in the paper's setting"
        raise ConfigError(f"{table.name}: no cell of {'the chosen rows and columns' if rows or columns else 'this table'} runs {where}")
    return planned


def default_folder(name: str, embedded: bool) -> Path:
    """``runs/NAME[-embedded]-TIMESTAMP``: where a table runs when no folder is given."""
    return Path("runs") / f"{name}{'-embedded' if embedded else ''}-{datetime.now():%Y%m%d-%H%M%S}"


def command_line(
    name: str,
    embedded: bool,
    overrides: Sequence[str],
    folder: Path,
    seeds: int | None,
    jobs: int | None,
    rows: Sequence[str] | None,
    columns: Sequence[str] | None,
    as_json: bool = False,
    imports: Sequence[str] = (),
) -> str:
    """The ``fedprior table`` command that runs (and continues) this table in ``folder`` (shell-quoted); a None option is left out."""
    parts = ["fedprior", "table", name, *(["--embedded"] if embedded else [])]
    parts += [arg for module in imports for arg in ("--import", module)]
    parts += [arg for override in overrides for arg in ("--set", override)]
    parts += ["--rows", ",".join(rows)] if rows is not None else []
    parts += ["--columns", ",".join(columns)] if columns is not None else []
    parts += ["--seeds", str(seeds)] if seeds is not None else []
    parts += ["--jobs", str(jobs)] if jobs is not None else []
    parts += ["--out", str(folder), *(["--json"] if as_json else [])]
    return shlex.join(parts)


def reproduce_table(
    name: str,
    *,
    embedded: bool = True,
    seeds: int | None = None,
    rows: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    out: str | Path | None = None,
    jobs: int | None = None,
    overrides: Sequence[str] = (),
    imports: Sequence[str] = (),
    on_progress: Callable[[str], None] | None = None,
    cell_seeds: Mapping[tuple[str, str], int] | None = None,
) -> TableResult:
    """Run every cell of the paper table ``name`` (``list_tables()``) and judge its claims: ``fedprior table NAME``.

    ``embedded``: offline on an embedded dataset (True, the default here) or in the paper's setting (its data and
    encoder, on this machine). ``seeds``: every cell runs seeds 0..seeds-1 (default 3 embedded, 1 in the paper's
    setting). ``rows``, ``columns``: only these (labels as the grid names them; None: all). ``out``: the folder of
    the cells' runs, table.json and table.md (default ``runs/NAME[-embedded]-TIMESTAMP``); the same folder again
    continues a stopped table. ``jobs``: cells at once, each in its own process with one thread (default: the
    cores available). ``overrides``: ``section.key=value`` for every cell (``--set``); ``imports``: modules added to
    every cell's ``run.imports`` (``--import``). ``on_progress(line)`` gets each line ``fedprior table`` prints while
    it runs (the plan, then one per finished seed of a cell). ``cell_seeds``: (row, column) -> seeds for the cells that
    run more than ``seeds`` (a table's seed plan, :mod:`fedprior.reproduce.seed_plan`); a claim is then judged on the
    seeds both its cells have.

    Bad input raises a ConfigError before anything runs; an interrupted table (KeyboardInterrupt) continues when
    called again with the same ``out``.
    """
    from fedprior.algorithms.registry import import_modules
    from fedprior.experiments.build import check_planned
    from fedprior.experiments.config import load_config
    from fedprior.experiments.dry_run import check_planned_algorithms
    from fedprior.experiments.table_runs import REUSED, RUN, check_grid_folder, check_grid_writable, copy_twin, execute_runs, plan_cell, run_order, twins
    from fedprior.reproduce.findings import evaluate
    from fedprior.reproduce.paper_tables import table_by_name
    from fedprior.reproduce.tables import aggregate_table, cell_value, control_configs
    from fedprior.runtime.threads import available_cores

    if isinstance(overrides, str) or isinstance(imports, str):
        raise ConfigError("overrides and imports: expected a list of strings (e.g. ['federation.rounds=2']), got one string")
    overrides, imports = list(overrides), list(imports)
    if imports:
        import_modules(imports, "imports")
    table = table_by_name(name)
    chosen_rows, chosen_columns = (None if rows is None else list(rows)), (None if columns is None else list(columns))
    planned = planned_cells(table, embedded, overrides, chosen_rows, chosen_columns)
    n_seeds = seeds or (EMBEDDED_SEEDS if embedded else 1)
    folder = Path(out) if out is not None else default_folder(name, embedded)
    check_grid_folder(folder)
    say = on_progress or (lambda line: None)
    more = dict(cell_seeds or {})

    def seeds_of(cell: Cell) -> int:
        return max(n_seeds, more.get((cell.row, cell.column), 0))

    runs = {}
    built = []
    for cell in planned:  # every config is checked, and every cell folder a stopped table left, before anything runs
        for seed in range(seeds_of(cell)):
            cell_name, config = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"], imports)
            if seed == 0:
                check_planned(config, f"cell {cell.row} / {cell.column}: ")
                built.append((config, f"cell {cell.row} / {cell.column}: "))
            runs[cell.row, cell.column, seed] = plan_cell(folder, cell, seed, cell_name, config)
    check_planned_algorithms(built)  # privacy.dp, Power-of-Choice, concurrent clients: on the built algorithm, before any cell runs
    check_grid_writable(folder, runs.values())
    to_measure = control_configs(table, embedded, overrides, chosen_columns, imports)  # checked before any cell runs, measured after
    n_jobs = jobs or available_cores()
    setting = f" (embedded: {table.embedded_note})" if embedded and table.embedded_note else ""
    extra = sum(seeds_of(cell) - n_seeds for cell in planned)
    planned_more = f" (+{extra} planned seed run(s) of {sum(seeds_of(c) > n_seeds for c in planned)} cell(s))" if extra else ""
    say(f"{table.title}: {len(planned)} cells x {n_seeds} seed(s){planned_more}, {n_jobs} at once{setting}; runs in {folder}")
    kept = [r.action for r in runs.values() if r.action != RUN]
    if kept:
        say(f"continuing the table in {folder}: {kept.count(REUSED)} finished run(s) reused, {len(kept) - kept.count(REUSED)} resumed")

    def on_done(run, summary):
        cell = run.cell
        paper = "-" if cell.paper is None else number(cell.paper)
        ours = number(cell_value(table, summary, table.metrics[0]))
        how = "" if run.action == RUN else f", {run.action}"
        say(f"  {cell.row:<24} {cell.column:<18} seed {run.seed}  ours {ours:>5}  paper {paper:>5}  ({summary['wall_seconds']:.1f} s{how})")

    planned_runs = sorted(runs.values(), key=run_order)  # seed by seed across the cells (what a stopped plan leaves is paired)
    copies = twins(planned_runs)  # a config two cells share trains once
    if copies:
        say(f"{len(copies)} run(s) have the config of another cell's run: each such config trains once, its twins copy it")
    summaries = execute_runs([run for i, run in enumerate(planned_runs) if i not in copies], n_jobs, on_done)
    for i, j in copies.items():
        copied = copy_twin(planned_runs[j], planned_runs[i])
        summaries[copied.cell.row, copied.cell.column, copied.seed] = copied.result
        on_done(copied, copied.result)
    cells = aggregate_table(
        table,
        embedded,
        overrides,
        lambda cell, seed: summaries[cell.row, cell.column, seed],
        seeds=n_seeds,
        rows=chosen_rows,
        columns=chosen_columns,
        seeds_of=seeds_of,
    )
    measured = {key: control.measure(preset, config) for key, (control, preset, config) in to_measure.items()}
    evaluated = evaluate(table, cells, embedded, measured)
    result = TableResult(
        name,
        table.title,
        "embedded" if embedded else "paper",
        n_seeds,
        tuple(overrides),
        tuple(imports),
        tuple(map(CellResult.from_json, cells)),
        tuple(map(ControlResult.from_json, evaluated["controls"])),
        tuple(map(Finding.from_json, evaluated["findings"])),
        tuple(evaluated["notices"]),
        folder,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.json").write_text(json.dumps(result.to_json(), indent=2))
    again = command_line(name, embedded, overrides, folder, seeds, jobs, chosen_rows, chosen_columns, imports=imports)
    (folder / "table.md").write_text(result.markdown(command=again))
    return result


def evaluate_again(result: TableResult) -> TableResult:
    """``result`` with its controls, findings and notices evaluated again on its cells by today's definition of its table.

    Nothing is trained or measured: a measured control keeps the value ``result`` recorded (one not measured then stays
    not measured). How a change of a claim or of what a control gates reads on a committed table.
    """
    from dataclasses import replace

    from fedprior.reproduce.findings import evaluate
    from fedprior.reproduce.paper_tables import table_by_name

    measured = {(c.condition, c.column): (c.value, c.measured or "") for c in result.controls if c.kind == "measured" and c.value is not None}
    evaluated = evaluate(table_by_name(result.table), [c.to_json() for c in result.cells], result.setting == "embedded", measured)
    return replace(
        result,
        controls=tuple(map(ControlResult.from_json, evaluated["controls"])),
        findings=tuple(map(Finding.from_json, evaluated["findings"])),
        notices=tuple(evaluated["notices"]),
    )
