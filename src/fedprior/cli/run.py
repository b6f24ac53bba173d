"""``fedprior run`` and ``fedprior resume``: train with a progress bar on stderr (one plain line per round where stderr is not a terminal), the summary on stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from fedprior.cli.app import ALGORITHM_HELP, IMPORT_HELP, app, import_first, stderr, user_errors


class RoundProgress:
    """A progress bar on stderr: round, accuracy of the global model, time left."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("acc {task.fields[accuracy]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=stderr,
            transient=False,
        )
        self.task: TaskID | None = None

    def start(self, experiment, total: int, done: int = 0) -> None:
        self.bar.start()
        self.task = self.bar.add_task(experiment.name, total=total, completed=done, accuracy="-")

    def round(self, record: dict[str, Any]) -> None:
        if self.task is None:
            return
        completed = record.get("step") or 0
        if "accuracy" in record:  # rounds without evaluation (federation.evaluate_every) keep the last figure
            self.bar.update(self.task, completed=completed, accuracy=f"{100 * record['accuracy']:.2f}%")
        else:
            self.bar.update(self.task, completed=completed)

    def note(self, line: str) -> None:
        self.bar.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def stop(self) -> None:
        self.bar.stop()


class RoundLines:
    """Where stderr is not a terminal (a file, a pipe: SLURM, nohup, CI): one plain line per round, flushed at once.

    The lines are run.log's (``run_log.py`` formats both): a bar that redraws itself would
    show nothing in a log file until the run ends.
    """

    def __init__(self) -> None:
        self.total = 0

    def start(self, experiment, total: int, done: int = 0) -> None:
        from fedprior.results.run_log import start_line

        self.total = total
        self.emit(start_line(experiment, total, done))

    def round(self, record: dict[str, Any]) -> None:
        from fedprior.results.run_log import round_line

        self.emit(round_line(record, self.total))

    def note(self, line: str) -> None:
        self.emit(line)

    def stop(self) -> None:
        pass

    @staticmethod
    def emit(line: str) -> None:
        from fedprior.results.run_log import stamped

        print(stamped(line), file=sys.stderr, flush=True)


def report(summary: dict[str, Any], as_json: bool) -> None:
    """The summary on stdout, one JSON line or one line of text (``fedprior run ... > out.txt`` keeps it); the progress and the
    warnings (failed or empty clients) on stderr."""
    from fedprior.results.run_log import summary_line, summary_warnings

    for line in summary_warnings(summary):
        stderr.print(line, style="yellow", highlight=False, soft_wrap=True)
    typer.echo(json.dumps(summary) if as_json else summary_line(summary))


def with_progress(action) -> dict[str, Any]:
    """``action(on_start=..., on_round=..., on_note=...)`` with a progress bar on a terminal, one line per round elsewhere."""
    progress: RoundProgress | RoundLines = RoundProgress() if stderr.is_terminal else RoundLines()
    try:
        return action(on_start=progress.start, on_round=progress.round, on_note=progress.note)
    finally:
        progress.stop()


@app.command()
@user_errors
def run(
    preset: str = typer.Argument(..., help="A preset name (see `fedprior presets`) or a path to a TOML config."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field: section.key=value (repeatable)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Where to write the run (default runs/NAME-TIMESTAMP)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary on stdout."),
    runtime: str | None = typer.Option(
        None,
        "--runtime",
        help="Where to run (sets run.runtime): local (in-process), flower-sim (Flower's simulation engine), flower-local (a SuperLink and SuperNodes on this machine).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Train nothing and write nothing: print the config as TOML (every field) and the partition's statistics as TOML comments (with --json: one JSON object).",
    ),
    imports: list[str] = typer.Option(
        [],
        "--import",
        help=f"{IMPORT_HELP} Kept in the run's config (run.imports) where the run's algorithm is one of yours, so a resume imports it again.",
    ),
    algorithm: str | None = typer.Option(None, "--algorithm", metavar="NAME", help=ALGORITHM_HELP),
    seeds: str | None = typer.Option(
        None, "--seeds", help="Run once per seed, each run in its own folder of --out: N for seeds 0..N-1, or a list (0,3,5; '7,' for seed 7 alone)."
    ),
    sweep: list[str] = typer.Option(
        [],
        "--sweep",
        help="Run once per value, each run in its own folder of --out: section.key=v1,v2,... (repeatable: the grid is every combination, times --seeds).",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="With --seeds/--sweep: the folder holding one run folder per seed and value (default runs/NAME-sweep-TIMESTAMP); "
        "the same command again continues a stopped sweep. Then `fedprior compare OUT`.",
    ),
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        min=1,
        help="With --seeds/--sweep: runs at once, each in its own process with one thread, run.workers=1 and run.concurrent_clients=1 (default 1: in this process).",
    ),
) -> None:
    """Run an experiment: train with a progress bar, write a run directory, print a summary.

    With --seeds and/or --sweep, run the grid of seeds and values instead, one run folder
    each in --out; the same command with the same --out continues a stopped grid (finished
    runs reused, stopped ones resumed), and `fedprior compare OUT` folds the seeds into mean ± sd.
    """
    from fedprior.errors import ConfigError
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    import_first(imports)
    overrides = [*set_, *([f"run.runtime={runtime!r}"] if runtime else [])]
    if seeds is not None or sweep:
        if run_dir is not None:
            raise ConfigError("--run-dir names one run; with --seeds or --sweep give --out, the folder for the grid's runs")
        from fedprior.cli.sweep import run_sweep

        run_sweep(preset, overrides, sweep, seeds, out, jobs or 1, as_json, dry_run, imports, algorithm)
        return
    for option, value in (("--out", out), ("--jobs", jobs)):
        if value is not None:
            raise ConfigError(f"{option} is for a grid of runs (--seeds, --sweep); one run goes to --run-dir")
    name, config = load_config(preset, overrides, imports, algorithm)
    if dry_run:
        show_dry_run(preset, overrides, name, config, as_json, imports, algorithm)
        return
    summary = with_progress(lambda **cb: start(name, config, run_dir, **cb))
    report(summary, as_json)


def show_dry_run(source: str, overrides: list[str], name: str, config, as_json: bool, imports: list[str] | None = None, algorithm: str | None = None) -> None:
    """``--dry-run``: the config and the partition its run would train on, on stdout; nothing trained, nothing written."""
    from fedprior.cli.dry_run import config_header, statistics_lines
    from fedprior.experiments.dry_run import dry_run

    plan = dry_run(config)
    if as_json:
        typer.echo(json.dumps({"name": name, "config": config.to_dict(), **plan}))
        return
    typer.echo(config.to_toml(header=config_header(source, overrides, imports, algorithm)))
    typer.echo("\n".join(statistics_lines(config, plan)))


@app.command()
@user_errors
def resume(
    run_dir: Path = typer.Argument(..., help="The run directory of an interrupted run."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary on stdout."),
    previous: bool = typer.Option(False, "--previous", help="Continue from the checkpoint before the last one (when the last one is damaged)."),
    imports: list[str] = typer.Option([], "--import", help=f"{IMPORT_HELP} Not needed for the modules in the run's run.imports, which are imported anyway."),
) -> None:
    """Continue an interrupted run from its last checkpoint; it ends with the numbers of an uninterrupted run.

    The run's config.toml must be the one it started with; federation.rounds may be raised
    to train a run further (or lowered, down to the rounds already done). A finished run
    is left as it is: one line says so, exit code 0 (with --json, its summary on stdout).
    The modules in its run.imports are imported again (they may be renamed there).
    """
    from fedprior.experiments.runner import resume as resume_run

    import_first(imports)
    finished: list[str] = []
    summary = with_progress(lambda **cb: resume_run(run_dir, previous=previous, on_finished=finished.append, **cb))
    if finished:
        stderr.print(finished[0], highlight=False, markup=False, soft_wrap=True)
        if as_json:
            typer.echo(json.dumps(summary))
        return
    report(summary, as_json)
