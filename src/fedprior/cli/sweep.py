"""``fedprior run NAME --seeds N --sweep KEY=V1,V2 --out OUT``: a grid of runs, one folder each, continued after a stop.

The grid and its folders are :mod:`fedprior.experiments.sweep`'s; the runs go through
:mod:`fedprior.experiments.table_runs` like a paper table's cells. One line per run as it
ends (``[done/total]``, its values and seed, final accuracy, seconds, ``reused``/``resumed``);
with ``--jobs 1`` also one line as each starts.
"""

from __future__ import annotations

import json
import math
import shlex
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from fedprior.cli.app import stderr


def run_sweep(
    preset: str,
    set_: list[str],
    sweep: list[str],
    seeds: str | None,
    out: Path | None,
    jobs: int,
    as_json: bool,
    dry_run: bool,
    imports: list[str],
    algorithm: str | None = None,
) -> None:
    """Plan the grid (every config checked, every folder looked at), then run what is left; ``dry_run``: only say what would run.

    ``algorithm`` (``--algorithm NAME``) replaces the config's algorithm section in every run, as for one run."""
    from fedprior.errors import Interrupted
    from fedprior.experiments.config import read_toml
    from fedprior.experiments.sweep import NOTE_PLANNING_FROM, other_runs, parse_seeds, parse_sweep, plan_sweep
    from fedprior.experiments.table_runs import REUSED, RUN, check_grid_folder, check_grid_writable, execute_runs

    sweeps = [parse_sweep(text) for text in sweep]
    seed_list = parse_seeds(seeds) if seeds is not None else [seed_of(preset, set_, sweeps, imports, algorithm)]  # --sweep alone: the config's seed
    folder = out or Path("runs") / f"{read_toml(preset)[0]}-sweep-{datetime.now():%Y%m%d-%H%M%S}"
    check_grid_folder(folder, command="sweep")
    planned = len(seed_list) * math.prod(len(s.values) for s in sweeps)
    if planned >= NOTE_PLANNING_FROM:
        stderr.print(f"{preset}: checking the {planned:,} runs' configs and folders before any runs (about 2 ms each) ...", highlight=False)
    runs = plan_sweep(preset, set_, sweeps, seed_list, folder, imports, seeds_given=seeds is not None, algorithm=algorithm)
    check_grid_writable(folder, runs, command="sweep")
    grid = " x ".join([*(f"{len(s.values)} {s.key}" for s in sweeps), f"{len(seed_list)} seed(s)"])
    stderr.print(f"{preset}: {len(runs)} run(s) ({grid}), {min(jobs, len(runs))} at once; runs in {folder}", highlight=False, soft_wrap=True)
    kept = [r.action for r in runs if r.action != RUN]
    if kept:
        stderr.print(
            f"continuing the sweep in {folder}: {kept.count(REUSED)} finished run(s) reused, {len(kept) - kept.count(REUSED)} resumed", highlight=False
        )
    others = other_runs(folder, runs)
    if others:
        stderr.print(
            f"note: {folder} also holds {len(others)} run(s) of another grid ({', '.join(p.name for p in others[:3])}{', ...' if len(others) > 3 else ''}); "
            f"`fedprior compare {folder}` reads them too",
            highlight=False,
            soft_wrap=True,
        )
    if dry_run:
        for run in runs:
            typer.echo(f"{run.path}: {run.action} ({' '.join([*run.cell.overrides, f'run.seed={run.seed}']) or 'the config as it is'})")
        return
    done: dict[Path, dict[str, Any]] = {}

    def on_start(run) -> None:
        stderr.print(f"[{len(done) + 1}/{len(runs)}] {label(run)} running in {run.path}", highlight=False, soft_wrap=True)

    def on_done(run, summary) -> None:
        done[run.path] = {"run_dir": str(run.path), "swept": run.cell.overrides[len(set_) :], "seed": run.seed, "action": run.action, "summary": summary}
        how = "" if run.action == RUN else f", {run.action}"
        stderr.print(
            f"[{len(done)}/{len(runs)} done] {label(run)}: final accuracy {100 * summary['final_accuracy']:.2f}% "
            f"(best {100 * summary['best_accuracy']:.2f}%, {summary['wall_seconds']:.1f} s{how})",
            highlight=False,
            soft_wrap=True,
        )

    try:
        execute_runs(runs, jobs, on_done, on_start)
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: the same command continues the whole sweep
        again = command_line(preset, set_, sweep, seeds, folder, jobs, imports, algorithm)
        raise Interrupted(getattr(error, "signum", signal.SIGINT), continue_with=f"continue the sweep with `{again}`") from None
    if as_json:
        typer.echo(json.dumps({"out": str(folder), "runs": [done[run.path] for run in runs]}))
        return
    typer.echo(f"{len(runs)} run(s) in {folder}; seeds folded into mean ± sd: `fedprior compare {folder}`")  # the summary: stdout


def label(run) -> str:
    """A run in progress lines: its swept values (``lr=0.01``) and seed."""
    return " ".join(part for part in (run.cell.row.replace("--", " "), f"seed {run.seed}") if part)


def seed_of(preset: str, set_: list[str], sweeps: list, imports: list[str], algorithm: str | None = None) -> int:
    """The seed the grid's runs have (``--sweep`` without ``--seeds``): its first run's (``run.seed`` is not swept). That run's
    config, not ``preset`` with ``set_`` alone, which may break a rule that every run's swept value keeps; a refusal names the run."""
    from fedprior.errors import ConfigError
    from fedprior.experiments.config import load_config
    from fedprior.experiments.sweep import points

    first = points(sweeps)[0]
    name_swept = any(s.key == "algorithm.name" for s in sweeps)
    try:
        return load_config(preset, [*set_, *first.overrides], imports, algorithm, name_swept=name_swept)[1].run.seed
    except ConfigError as error:
        raise ConfigError(f"--sweep: the run {first.label}: {error}" if first.label else str(error)) from None


def command_line(
    preset: str, set_: list[str], sweep: list[str], seeds: str | None, folder: Path, jobs: int, imports: list[str], algorithm: str | None = None
) -> str:
    """The ``fedprior run`` command that continues this sweep in ``folder`` (shell-quoted)."""
    parts = ["fedprior", "run", preset, *(arg for module in imports for arg in ("--import", module))]
    parts += ["--algorithm", algorithm] if algorithm is not None else []
    parts += [arg for override in set_ for arg in ("--set", override)]
    parts += [arg for text in sweep for arg in ("--sweep", text)]
    parts += ["--seeds", seeds] if seeds is not None else []
    parts += ["--jobs", str(jobs), "--out", str(folder)]
    return shlex.join(parts)
