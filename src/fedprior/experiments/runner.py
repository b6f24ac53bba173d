"""Run an experiment into a run directory, or resume one, and summarize it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from fedprior.errors import ConfigError
from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.config import ExperimentConfig
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


def communication(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Bytes sent over the run: server -> clients (each sampled client receives the broadcast) and clients -> server.

    ``stage_communication`` splits them by stage, with the number of (round, client)
    participations, so per-round and per-client figures (mfcl.md Table 8) follow.
    """
    stages: dict[str, dict[str, int]] = {}
    for r in history:
        entry = stages.setdefault(r.get("stage", ""), {"participations": 0, "download_bytes": 0, "upload_bytes": 0})
        entry["participations"] += len(r.get("clients", []))
        entry["download_bytes"] += int(r.get("download_bytes", 0) * len(r.get("clients", [])))
        entry["upload_bytes"] += int(sum(r.get("upload_bytes", {}).values()))
    return {"download_bytes": sum(e["download_bytes"] for e in stages.values()),
            "upload_bytes": sum(e["upload_bytes"] for e in stages.values()), "stage_communication": stages}


def summarize(experiment: Experiment, progress: Progress, run: RunDir, wall_seconds: float) -> dict[str, Any]:
    """The run's summary (what ``fedprior run --json`` prints)."""
    config = experiment.config
    history = [r["accuracy"] for r in progress.history if "accuracy" in r]
    initial = progress.initial["accuracy"]
    f1 = [r["macro_f1"] for r in progress.history if "macro_f1" in r]
    extra: dict[str, Any] = {}
    if "macro_f1" in progress.initial:
        extra = {"initial_macro_f1": progress.initial["macro_f1"], "final_macro_f1": f1[-1] if f1 else progress.initial["macro_f1"],
                 "best_macro_f1": max([progress.initial["macro_f1"], *f1])}
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
        **extra,
        **communication(progress.history),
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

    ``report_extras``: add the algorithm's own report section, registered by its paper
    (``fedprior.papers``; FST-CBDG: Figures 2 and 3, which run the supervised baselines too).
    """
    from fedprior.papers import report_extra  # the papers compose experiments: imported here, not at the top

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
    hook = report_extra(config.algorithm.name) if report_extras else None
    if hook is not None:
        additions, extra = hook(experiment, summary, run.path)
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
