"""Run an experiment into a run directory, or resume one, and summarize it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedprior.algorithms.pieces.metrics import selected_round
from fedprior.encoders.shipped_towers import cpu_kind, machine_kind
from fedprior.errors import ConfigError, FedpriorError, Interrupted
from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.config import ExperimentConfig, described, preset_note
from fedprior.experiments.paper_registry import report_extra, summary_extra
from fedprior.experiments.resume_check import check_rounds, check_same_config, checkpoint_metadata, finished_message, finished_summary
from fedprior.experiments.run_config import read_config, write_config
from fedprior.partition.plot import plot_heatmap
from fedprior.results.fingerprints import round_digest, state_sha256
from fedprior.results.report import write_report
from fedprior.results.run_dir import RunDir
from fedprior.results.trackers import Trackers, check_trackers
from fedprior.runtime.checkpoint import Progress
from fedprior.runtime.simulation import RoundNotTrained, simulate, total_rounds
from fedprior.runtime.system_round import system_summary
from fedprior.runtime.traffic import communication

RoundCallback = Callable[[dict[str, Any]], None]


def partition_statistics(experiment: Experiment) -> dict[str, Any]:
    return experiment.partition_statistics()


def client_failures(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Sampled client updates, and those that failed or held no data: totals, and counts per round step.

    Failed: a Flower node gone, a timeout, a ClientApp error, a killed worker, or an update
    with NaN/inf left out under ``run.non_finite = "drop"``. Empty: a client with no data (a
    Dirichlet partition with a small alpha). ``rounds_without_update``: rounds whose global
    model did not change because no answering client held data.
    """
    rounds = [r for r in history if "clients" in r]
    failed = {str(r["step"]): len(r["failed_clients"]) for r in rounds if r.get("failed_clients")}
    empty = {str(r["step"]): len(r["empty_clients"]) for r in rounds if r.get("empty_clients")}
    return {
        "client_updates": sum(len(r["clients"]) for r in rounds),
        "failed_updates": sum(failed.values()),
        "failed_clients_per_round": failed,
        "empty_updates": sum(empty.values()),
        "empty_clients_per_round": empty,
        "rounds_without_update": [r["step"] for r in rounds if r.get("aggregated") is False],
    }


def attack_and_clip_check(history: list[dict[str, Any]]) -> dict[str, Any]:
    """A simulated attack's malicious clients (``malicious_client_ids``) and how many sampled updates they sent
    (``malicious_updates``); client-side clipping's server check over the run (``dp_overnorm_replies``, ``dp_corrected_bits``,
    ``dp_checked_replies``, totals of the rounds' counts; ``algorithms/pieces/clip_check.py``). {} for a run with neither."""
    out: dict[str, Any] = {}
    ids = next((r["malicious_client_ids"] for r in history if "malicious_client_ids" in r), None)
    if ids is not None:
        out.update({"malicious_client_ids": ids, "malicious_updates": sum(len(r.get("malicious_clients", [])) for r in history)})
    for key in ("dp_overnorm_replies", "dp_corrected_bits", "dp_checked_replies"):
        if any(key in r for r in history):
            out[key] = int(sum(r.get(key, 0) for r in history))
    return out


def late_change(initial: dict[str, Any], history: list[dict[str, Any]]) -> float:
    """How far test accuracy moved over the last 10% of the run's rounds: the last evaluation minus the last one at or
    before round floor(0.9 * rounds) (the initial model's at round 0). Near 0: the run has converged (a table's controls ask it of
    their rows: docs/feddb.md, "Claims and controls of the tables")."""
    curve = [(0, initial["accuracy"]), *((r["step"], r["accuracy"]) for r in history if "accuracy" in r)]
    cut = int(0.9 * len(history))
    before = [accuracy for step, accuracy in curve if step <= cut]
    return curve[-1][1] - before[-1]


def partition_domains(experiment: Experiment) -> dict[str, Any]:
    """The partition plot's domain colours in a feature-shift federation (``partition.domains``): each client's domain and the
    domains' names; {} otherwise."""
    dataset, partition = experiment.dataset, experiment.partition
    if not experiment.config.partition.domains or dataset.train_domains is None or "train" not in partition.roles:
        return {}
    from fedprior.partition.domains import domain_of_clients

    return {"client_domains": domain_of_clients(partition.roles["train"], dataset.train_domains), "domain_names": dataset.domain_names}


def final_client_accuracy(progress: Progress) -> dict[str, Any]:
    """The last evaluation's per-client accuracies on the clients' local test splits (``partition.local_test_fraction``;
    :func:`fedprior.algorithms.pieces.personal.per_client_metrics`), keys prefixed ``final_``; {} without them."""
    scored = [r for r in [progress.initial, *progress.history] if "client_accuracy" in r]
    if not scored:
        return {}
    keys = ("client_ids", "client_accuracy", "client_accuracy_mean", "client_accuracy_sd", "client_accuracy_worst10", "client_accuracy_pooled")
    return {f"final_{key}": scored[-1][key] for key in keys if key in scored[-1]}  # a record written before the pooled accuracy lacks it


def summarize(experiment: Experiment, progress: Progress, run: RunDir, wall_seconds: float) -> dict[str, Any]:
    """The run's summary (what ``fedprior run --json`` prints).

    ``round_fingerprints``: a digest of each round's floats (round 0: the initial evaluation;
    ``fingerprints.round_digest``); ``machine_kind`` and ``cpu``: what decides the bits (CPU kernels, GPU).
    """
    config = experiment.config
    history = [r["accuracy"] for r in progress.history if "accuracy" in r]
    evaluated_rounds = [r["step"] for r in progress.history if "accuracy" in r]
    initial = progress.initial["accuracy"]
    f1 = [r["macro_f1"] for r in progress.history if "macro_f1" in r]
    extra: dict[str, Any] = {}
    if "macro_f1" in progress.initial:
        extra = {
            "initial_macro_f1": progress.initial["macro_f1"],
            "final_macro_f1": f1[-1] if f1 else progress.initial["macro_f1"],
            "best_macro_f1": max([progress.initial["macro_f1"], *f1]),
        }
    epsilons = [r["dp_epsilon"] for r in progress.history if "dp_epsilon" in r]
    if epsilons:  # client-level DP (privacy.dp): epsilon at delta after every round, and after the last, and what it is
        from fedprior.privacy.config import accounting

        privacy, f = config.privacy, config.federation
        extra.update({"dp_epsilon": epsilons[-1], "dp_epsilon_per_round": epsilons, "dp_delta": privacy.delta, "dp_accountant": privacy.accountant})
        if privacy.dp == "sample":  # record-level DP-SGD: the worst client's epsilon, the median client's, each client's own accountant
            from fedprior.privacy.dp_sgd import ACCOUNTANT

            medians = [r["dp_epsilon_median"] for r in progress.history if "dp_epsilon_median" in r]
            extra.update({"dp_level": "example", "dp_accountant": f"opacus-{ACCOUNTANT}", "dp_epsilon_median": medians[-1]})
        else:
            extra["dp_accounting"] = accounting(privacy, f.sampler, f.num_clients, f.fraction).describe()
    extra.update(attack_and_clip_check(progress.history))
    extra.update(system_summary(progress.history))  # {} without a system model ([system] off)
    extra.update(final_client_accuracy(progress))
    chosen = selected_round(progress.history)
    if chosen is not None:  # run.model_selection = 'validation': test metrics of the round the validation split ranks best
        extra.update({"selected_round": chosen["round"], "selected_accuracy": chosen["accuracy"], "selected_macro_f1": chosen.get("macro_f1", float("nan"))})
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
        "late_change": late_change(progress.initial, progress.history),
        "history": history,
        "evaluated_rounds": evaluated_rounds,
        "round_fingerprints": [round_digest(r) for r in [progress.initial, *progress.history]],
        **extra,
        **communication(progress.history),
        **client_failures(progress.history),
        "wall_seconds": wall_seconds,
        "device": str(experiment.device),
        "workers": experiment.workers,
        "threads": experiment.threads.as_dict(),
        "machine_kind": machine_kind(experiment.device),
        "cpu": cpu_kind(),
        "run_dir": str(run.path),
    }


def check_runtime_knows_algorithm(config: ExperimentConfig) -> None:
    """Refuse a Flower runtime for an algorithm registered from user code (``register_algorithm``, ``--import``,
    ``run.imports``): it lives in this process only, and Flower's nodes are other processes. An installed
    package's entry point (``fedprior.algorithms``) is loaded by every process, so its algorithms run anywhere."""
    from fedprior.algorithms.registry import REGISTERED_HERE

    name, runtime = config.algorithm.name, config.run.runtime
    if runtime != "local" and name in REGISTERED_HERE:
        raise ConfigError(
            f"run.runtime: '{runtime}' runs clients in other processes, which do not know the algorithm '{name}' registered here; "
            "accepted for it: local (or install it as a package with a 'fedprior.algorithms' entry point)"
        )


def budget_stopped(run: RunDir, metadata: dict[str, str]) -> dict[str, Any] | None:
    """What the checkpoint says where a privacy budget ended the run (``simulation.STOPPED``) and its result.json was written; else None."""
    from fedprior.runtime.simulation import STOPPED

    if STOPPED not in metadata or not run.result.is_file():
        return None
    try:
        json.loads(run.result.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # damaged: the resume stops at the budget again and writes it anew
        return None
    return json.loads(metadata[STOPPED])


def execute(
    name: str,
    config: ExperimentConfig,
    run: RunDir,
    *,
    resume: bool = False,
    previous: bool = False,
    on_start: Callable[[Experiment, int, int], None] | None = None,
    on_round: RoundCallback | None = None,
    on_finished: Callable[[str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    report_extras: bool = True,
    runtime_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the experiment, train (or continue training) with checkpoints, write results and the report.

    ``report_extras``: add the algorithm's own report section, registered by its paper
    (``fedprior.experiments.paper_registry``, filled by ``fedprior.papers``; FST-CBDG: Figures 2 and 3, which run the supervised baselines too).
    A resume first checks the checkpoint (``previous``: continue from the one before the
    last) and that config.toml is still the run's config (``resume_check.py``).
    ``on_start(experiment, total rounds, rounds already done)`` is called before training; ``on_note(line)`` hears
    what the run says between rounds (worker processes starting), which run.log gets too.
    A resume of a finished run (every round done, result.json written) trains nothing,
    writes nothing, calls ``on_finished(message)`` and returns the summary in result.json.
    The run's ``run.log`` gets the start line, one line per round and the summary
    (``run_log.py``; :func:`resumable` adds warnings and why a run stopped).
    """

    started = time.perf_counter()
    config = described(name, config)  # a run made from a preset with other data, partition, algorithm, ...: its own description
    check_runtime_knows_algorithm(config)
    if config.run.runtime != "local":  # Flower: fail before any long work if it is not installed
        from fedprior.flower.runtime import require_flower

        require_flower()
    start_from = None
    if resume:  # before any long work: a damaged checkpoint or an edited config stops here
        start_from = run.load_checkpoint(previous)
        if start_from is not None:
            check_same_config(start_from.metadata, config, run.config)
    given, metadata = config, checkpoint_metadata(config)
    check_trackers(config, run)  # MLflow and wandb installed, MLflow's store reachable (a resumed run's MLflow run in it), before any long work
    experiment = build_experiment(name, config)
    if start_from is not None and (stopped := budget_stopped(run, start_from.metadata)):  # its budget is spent: resume trains nothing
        if on_finished:
            on_finished(f"{run.path} was stopped by its privacy budget before {stopped['stage']} round {stopped['round']}: {stopped['note']}; nothing to do")
        return json.loads(run.result.read_text(encoding="utf-8"))
    if start_from is not None and (finished := finished_summary(run.result, experiment.algorithm, experiment.config.federation.rounds, start_from.progress)):
        if on_finished:
            on_finished(finished_message(run.path, finished))
        return finished
    stats = partition_statistics(experiment)
    if not resume:
        write_config(run, name, config)
    if not resume or not run.partition_intact(experiment.partition):
        run.write_partition(experiment.partition, stats)
    if not resume or not run.partition_plot.is_file():
        plot_heatmap(
            stats["class_counts"],
            run.partition_plot,
            class_names=experiment.dataset.class_names,
            title=f"{config.partition.scheme} partition of {config.data.dataset}"
            + (f", domains {config.partition.domains}" if config.partition.domains else ""),
            **partition_domains(experiment),
        )
    config = experiment.config  # as built (a centralized baseline runs one client)
    if start_from is not None:
        check_rounds(experiment.algorithm, config.federation.rounds, start_from.progress)
    total, done = total_rounds(experiment.algorithm, config.federation.rounds), len(start_from.progress.history) if start_from else 0
    run.journal.start(experiment, total, done)
    if on_start:
        on_start(experiment, total, done)

    def record(entry: dict[str, Any]) -> None:
        if entry.get("step") is not None:
            run.append_metrics(entry)
        trackers.record(entry)
        run.journal.round(entry)
        if on_round:
            on_round(entry)

    def note(line: str) -> None:
        run.journal.write(line)
        if on_note:
            on_note(line)

    run.rewrite_metrics(start_from.progress.history if start_from else [])
    trackers = Trackers(run, name, config, start_from.progress if start_from else None)  # TensorBoard, MLflow, W&B
    try:
        if config.run.runtime != "local":  # the same loop on Flower (fedprior.flower; runtime_options go there)
            from fedprior.flower.runtime import train_on_flower

            result = train_on_flower(experiment, run, start=start_from, on_round=record, checkpoint_metadata=metadata, **(runtime_options or {}))
        else:
            client_data, test = experiment.resident_inputs()  # on the run's device, once
            result = simulate(
                experiment.algorithm,
                client_data,
                experiment.task.num_clients,
                test,
                experiment.round_loop(),
                checkpoint_path=run.checkpoint,
                start=start_from,
                on_round=record,
                checkpoint_metadata=metadata,
                worker_setup=experiment.client_side(),
                client_size=experiment.client_size,
                on_note=note,
            )
    except BaseException:  # Ctrl-C, an error: the W&B run ends as failed, so that a resume in this process opens it anew
        trackers.stop()
        raise
    summary = summarize(experiment, result.progress, run, time.perf_counter() - started)
    if result.stopped is not None:  # a privacy budget ended the run before a round (privacy.max_epsilon)
        summary["stopped"] = result.stopped
    summary["state_sha256"] = state_sha256(result.state, result.client_states)
    extra = ""
    numbers = summary_extra(config.algorithm.name)  # cheap, in every run: a table's claims may test them
    if numbers is not None:
        summary.update(numbers(run.path))
    hook = report_extra(config.algorithm.name) if report_extras else None
    if hook is not None:
        additions, extra = hook(experiment, summary, run.path)
        summary.update(additions)
    write_report(run, summary, stats, extra, notes=preset_note(name, given), hyperparameters=config.algorithm.hyperparameters())
    run.write_result(summary)  # after the report: result.json marks a finished run, which a resume leaves alone
    trackers.finish(summary)
    run.journal.finish(summary)
    return summary


def resumable(run: RunDir, action: Callable[[], dict[str, Any]], lock: bool = True) -> dict[str, Any]:
    """``action()`` holding the run directory's lock (``lock``; see :func:`resume` for when not); a stop it can be resumed from names ``run``.

    Ctrl-C and SIGTERM become :class:`Interrupted` (the CLI says how to resume), a round no
    client could be reached for ends with the resume command, and a failed write (a full
    disk) is one line naming the file and, once a checkpoint exists, how to go on. Python
    warnings, and why a run stopped, go to its run.log too.
    """
    with run.locked() if lock else contextlib.nullcontext(), run.journal.recording():
        try:
            return action()
        except KeyboardInterrupt as error:  # Ctrl-C; or Interrupted, with its signal, where the CLI caught SIGTERM
            raise Interrupted(getattr(error, "signum", signal.SIGINT), run.path if run.config.is_file() else None) from None
        except RoundNotTrained as error:
            raise RoundNotTrained(f"{error} with `fedprior resume {run.path}`") from None
        except OSError as error:
            where = error.filename or "a file"
            if run.result_written:  # the trackers' last writes come after result.json: the run itself is complete
                after = f"; the run itself had finished ({run.result} is written), only {where} is incomplete"
            elif run.checkpoint.is_file():
                after = f"; then `fedprior resume {run.path}` continues the run"
            else:
                after = ""
            raise FedpriorError(f"cannot write {where} ({error.strerror or error}): free space or fix the permissions{after}") from error


def start(name: str, config: ExperimentConfig, run_dir: Path | None, **callbacks) -> dict[str, Any]:
    """Run the experiment into ``run_dir`` (a new ``runs/NAME-TIMESTAMP`` if None), which must be new or empty."""
    run = RunDir(run_dir) if run_dir else RunDir.new(name)
    run.check_new()
    return resumable(run, lambda: execute(name, config, run, **callbacks))


def resume(path: Path, previous: bool = False, config: ExperimentConfig | None = None, **callbacks) -> dict[str, Any]:
    """Continue the run in ``path`` from its last checkpoint (``previous``: from the one before).

    ``config``: continue with this config instead of config.toml's; it may differ only in what
    a resume may change (threads, workers, device, ...: the resume check refuses the rest).
    A finished run (result.json) in a folder this process cannot write is checked without taking the
    lock, which is a write: its resume writes nothing (``execute``), and one that would write fails then.
    """
    run = RunDir.existing(path)
    read_only = run.result.is_file() and not os.access(run.path, os.W_OK)

    def action() -> dict[str, Any]:
        name, saved = read_config(run)
        return execute(name, config or saved, run, resume=True, previous=previous, **callbacks)

    return resumable(run, action, lock=not read_only)
