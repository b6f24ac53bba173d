"""How a local run trains a round's clients: worker processes, how they start, and client updates run at once in each."""

from __future__ import annotations

import sys
import warnings

import torch

from fedprior.algorithms.base import Algorithm
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.runtime.sampling import clients_per_round
from fedprior.runtime.simulation import stage_plan
from fedprior.runtime.threads import available_cores, default_workers
from fedprior.runtime.workers import FORK_WITH_THREADS, default_start_method


def worker_start_method(asked: str, device: torch.device, concurrent: int = 1) -> str | None:
    """``run.start_method``: 'auto' is spawn with CUDA (CUDA cannot run in a forked process) or with ``concurrent`` client updates
    in each worker (``run.concurrent_clients > 1``: threads in a forked worker crash now and then, ``fedprior.runtime.workers``),
    else the runtime's default."""
    if asked == "auto":
        return "spawn" if device.type == "cuda" or concurrent > 1 else None
    if asked == "fork" and device.type == "cuda":
        raise ConfigError(
            f"run.start_method: 'fork' cannot be used with run.device = {device} (CUDA cannot run in a forked process); accepted with CUDA: auto, spawn"
        )
    if asked == "fork" and concurrent > 1:
        raise ConfigError(
            f"run.start_method: 'fork' cannot be used with run.concurrent_clients = {concurrent} ({FORK_WITH_THREADS}); "
            "accepted with run.concurrent_clients > 1: auto, spawn"
        )
    if asked == "fork" and default_start_method() != "fork":
        raise ConfigError(f"run.start_method: 'fork' is not safe or not available on {sys.platform}; accepted here: auto, spawn")
    return asked


def worker_processes(config: ExperimentConfig, algorithm: Algorithm, *, feature_space: bool, cuda: bool) -> int:
    """How many worker processes train a round's clients (``fedprior.runtime.threads.default_workers``).

    Never more than the most clients any stage samples in a round (more would only
    idle), which an explicit ``run.workers`` above it is told in a warning; also warned:
    more workers than cores (they then compete for the cores; the numbers stay those of
    ``workers = 1`` either way).
    """
    plan = stage_plan(algorithm, config.federation.rounds, config.federation.fraction)
    per_round = max((clients_per_round(config.federation.num_clients, f) for stage, _, f in plan if not stage.server_only), default=1)
    workers = default_workers(config.run.workers, feature_space=feature_space, clients_per_round=per_round, cuda=cuda)
    asked = config.run.workers
    if asked > workers:
        warnings.warn(
            f"run.workers = {asked}: starting {workers} worker process{'es' if workers != 1 else ''}, the most clients a round trains; more would idle",
            stacklevel=2,
        )
    cores = available_cores()
    if asked and workers > cores:
        warnings.warn(
            f"run.workers = {asked}: {workers} worker processes on {cores} core{'s' if cores != 1 else ''}; they share the cores, which makes a round no faster, often slower, than with run.workers = {cores} (the numbers are the same)",
            stacklevel=2,
        )
    return workers


def check_concurrent_updates(config: ExperimentConfig, algorithm: Algorithm) -> None:
    """ConfigError where ``run.concurrent_clients > 1`` asks ``algorithm`` for client updates at once that must run one at a time."""
    if config.run.concurrent_clients > 1 and not algorithm.thread_safe_updates:
        raise ConfigError(
            f"run.concurrent_clients: algorithm '{algorithm.name}' trains its clients one at a time (its client updates draw from torch's "
            f"global random generator, which threads share, or keep state between calls; see Algorithm.thread_safe_updates); accepted for it: 1"
        )


def concurrent_clients(config: ExperimentConfig, algorithm: Algorithm, device: torch.device) -> int:
    """``run.concurrent_clients`` checked against the runtime and the algorithm (``fedprior.runtime.concurrent``).

    More than 1 needs an algorithm whose updates may run in threads (``Algorithm.thread_safe_updates``;
    the local runtime is checked before: ``build.check_runtime_fields``); on the CPU it is allowed, with
    a note: threads without CUDA streams give the same numbers, and run faster only on cores nothing else uses.
    """
    asked = config.run.concurrent_clients
    if asked == 1:
        return 1
    check_concurrent_updates(config, algorithm)
    if device.type != "cuda":
        warnings.warn(
            f"run.concurrent_clients = {asked} on {device}: the client updates run in threads without CUDA streams; the numbers are those "
            f"of 1, and a round is faster only where cores are idle, if at all (run.workers is the CPU's lever; docs/runtime.md)",
            stacklevel=2,
        )
    return asked
