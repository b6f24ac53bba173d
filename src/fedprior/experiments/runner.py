"""Run an experiment into a run directory, or resume one, and summarize it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from fedprior.errors import ConfigError
from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.fst_report import REPORT_EXTRAS
from fedprior.experiments.report import write_report
from fedprior.experiments.run_dir import RunDir
from fedprior.partition.plot import plot_heatmap
from fedprior.partition.statistics import class_counts, describe
from fedprior.runtime.checkpoint import Progress, load_checkpoint
from fedprior.runtime.simulation import simulate, total_rounds

RoundCallback = Callable[[dict[str, Any]], None]


def partition_statistics(experiment: Experiment) -> dict[str, Any]:
    labels = experiment.dataset.train_labels
    parts = [experiment.partition.holdings(c) for c in range(experiment.partition.num_clients)]
    return describe(class_counts(labels, parts, experiment.dataset.num_classes))


def summarize(experiment: Experiment, progress: Progress, run: RunDir, wall_seconds: float) -> dict[str, Any]:
    """The run's summary (what ``fedprior run --json`` prints)."""
    config = experiment.config
    history = [r["accuracy"] for r in progress.history if "accuracy" in r]
    initial = progress.initial["accuracy"]
    return {
        "name": experiment.name,
        "description": config.description,
        "algorithm": config.algorithm.name,
        "dataset": config.data.dataset,
        "encoder": experiment.encoder_name,
        "partition": config.partition.scheme,
        "num_clients": experiment.task.num_clients,
        "seed": config.run.seed,
        "runtime": config.run.runtime,
        "rounds": len(progress.history),
        "initial_accuracy": initial,
        "final_accuracy": history[-1] if history else initial,
        "best_accuracy": max([initial, *history]),
        "history": history,
        "wall_seconds": wall_seconds,
        "run_dir": str(run.path),
    }


def execute(
    name: str,
    config: ExperimentConfig,
    run: RunDir,
    *,
    resume: bool = False,
    on_start: Callable[[Experiment, int], None] | None = None,
    on_round: RoundCallback | None = None,
    report_extras: bool = True,
    runtime_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the experiment, train (or continue training) with checkpoints, write results and the report.

    ``report_extras``: add the algorithm's own report section (FST-CBDG: Figures 2 and 3,
    which run the supervised baselines too).
    """
    started = time.perf_counter()
    if config.run.runtime != "local":  # Flower: fail before any long work if it is not installed
        from fedprior.flower.runtime import require_flower

        require_flower()
    experiment = build_experiment(name, config)
    stats = partition_statistics(experiment)
    if not resume:
        run.write_config(name, config)
        run.write_partition(experiment.partition, stats)
        plot_heatmap(
            stats["class_counts"], run.partition_plot, class_names=experiment.dataset.class_names,
            title=f"{config.partition.scheme} partition of {config.data.dataset}",
        )
    config = experiment.config  # as built (a centralized baseline runs one client)
    if on_start:
        on_start(experiment, total_rounds(experiment.algorithm, config.federation.rounds))

    def record(entry: dict[str, Any]) -> None:
        if entry.get("step") is not None:
            run.append_metrics(entry)
        if on_round:
            on_round(entry)

    start_from = load_checkpoint(run.checkpoint) if resume and run.checkpoint.is_file() else None
    run.rewrite_metrics(start_from.progress.history if start_from else [])
    if config.run.runtime != "local":  # the same loop on Flower (fedprior.flower; runtime_options go there)
        from fedprior.flower.runtime import train_on_flower

        result = train_on_flower(experiment, run, start=start_from, on_round=record, **(runtime_options or {}))
    else:
        result = simulate(
            experiment.algorithm,
            experiment.client_data,
            experiment.task.num_clients,
            experiment.test,
            seed=config.run.seed,
            rounds=config.federation.rounds,
            fraction=config.federation.fraction,
            vectorize=config.run.vectorize,
            checkpoint_path=run.checkpoint,
            start=start_from,
            on_round=record,
        )
    summary = summarize(experiment, result.progress, run, time.perf_counter() - started)
    extra = ""
    if report_extras and config.algorithm.name in REPORT_EXTRAS:
        additions, extra = REPORT_EXTRAS[config.algorithm.name](experiment, summary, run.path)
        summary.update(additions)
    run.write_result(summary)
    write_report(run, summary, stats, extra)
    return summary


def start(name: str, config: ExperimentConfig, run_dir: Path | None, **callbacks) -> dict[str, Any]:
    run = RunDir(run_dir) if run_dir else RunDir.new(name)
    if run.checkpoint.exists():
        raise ConfigError(f"--run-dir: {run.path} already holds a run; resume it with `fedprior resume {run.path}`")
    return execute(name, config, run, **callbacks)


def resume(path: Path, **callbacks) -> dict[str, Any]:
    run = RunDir.existing(path)
    name, config = run.read_config()
    return execute(name, config, run, resume=True, **callbacks)
