"""The round loop, written once for every runtime: sampling, updates, aggregation, evaluation, checkpoints.

The clients' updates run in a :class:`~fedprior.runtime.clients.ClientPool`: in this
process by default (:func:`simulate`), or on Flower SuperNodes. Each round the loop
samples clients (one stream shared by all algorithms, ``sampling.py``), broadcasts,
collects the replies, drops the empty and the failed ones (recording both), sorts the
rest by client id (float sums depend on order) and aggregates them, evaluates the
global model, and checkpoints the whole run state atomically, so an interrupted run
resumes where it stopped with the same numbers.

Communication is accounted in every round for every algorithm: ``download_bytes`` is
what each sampled client receives (the broadcast's tensors), ``upload_bytes`` what each
client that answered sent (its reply's tensors), by client id, both in bytes of the
tensors' buffers (mfcl.md Table 8 counts the same payloads).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, Reply, RoundInfo, Stage, State
from fedprior.algorithms.tensors import payload_bytes
from fedprior.runtime.checkpoint import Progress, RunState, save_checkpoint
from fedprior.runtime.clients import ClientPool, InProcessClients
from fedprior.runtime.sampling import sample_clients

RoundCallback = Callable[[dict[str, Any]], None]


@dataclass
class SimulationResult:
    state: State
    client_states: dict[int, State]
    progress: Progress
    wall_seconds: float


def stage_plan(algorithm: Algorithm, rounds: int, fraction: float) -> list[tuple[Stage, int, float]]:
    """(stage, its rounds, its fraction) for each stage, with the federation defaults filled in."""
    return [
        (s, rounds if s.rounds is None else s.rounds, fraction if s.fraction is None else s.fraction)
        for s in algorithm.stages
    ]


def total_rounds(algorithm: Algorithm, rounds: int) -> int:
    return sum(r for _, r, _ in stage_plan(algorithm, rounds, 1.0))


def mean_client_metrics(replies: list[Reply]) -> dict[str, float]:
    names = sorted({k for r in replies for k in r.metrics})
    return {f"client_{k}": float(np.mean([r.metrics[k] for r in replies if k in r.metrics])) for k in names}


def run_rounds(
    algorithm: Algorithm,
    pool: ClientPool,
    test_data: ClientData,
    *,
    seed: int,
    rounds: int,
    fraction: float,
    vectorize: bool = True,
    checkpoint_path: Path | None = None,
    start: RunState | None = None,
    on_round: RoundCallback | None = None,
) -> SimulationResult:
    """Train ``algorithm`` with the clients of ``pool``; evaluate on ``test_data`` after every round.

    Given ``start`` (a loaded checkpoint), training continues after its last round.
    """
    started = time.perf_counter()

    def save(state: State, progress: Progress) -> None:
        if checkpoint_path is not None:
            save_checkpoint(checkpoint_path, RunState(state, pool.states(), progress))

    if start is not None:
        state, progress = start.server, start.progress
    else:
        first_stage = algorithm.stages[0].name if algorithm.stages else "evaluation"
        state = algorithm.init(RoundInfo(seed=seed, stage=first_stage, round=0))
        progress = Progress(initial=algorithm.evaluate(state, test_data))
        save(state, progress)
        if on_round:
            on_round({"stage": first_stage, "round": 0, **progress.initial})

    plan = stage_plan(algorithm, rounds, fraction)
    step = sum(r for _, r, _ in plan[: progress.stage_index]) + progress.round
    if any(r > 0 and not s.server_only for s, r, _ in plan[progress.stage_index:]):
        pool.prepare()
    for stage_index, (stage, stage_rounds, stage_fraction) in enumerate(plan):
        if stage_index < progress.stage_index:
            continue
        first = progress.round + 1 if stage_index == progress.stage_index else 1
        for round_ in range(first, stage_rounds + 1):
            t0 = time.perf_counter()
            step += 1
            info = RoundInfo(seed=seed, stage=stage.name, round=round_)
            if stage.server_only:  # server work alone: no client is sampled, nothing is sent
                sampled, message, answered, failures = [], Broadcast({}), [], {}
            else:
                sampled = sample_clients(seed, stage.name, round_, pool.num_clients, stage_fraction)
                message = algorithm.broadcast(state, info)
                answered, failures = pool.update(message, info, step, sampled, vectorize)
            replies = sorted((r for r in answered if r.num_examples > 0), key=lambda r: r.client_id)
            empty = sorted(r.client_id for r in answered if r.num_examples == 0)
            if replies or stage.server_only:
                state = algorithm.aggregate(state, replies, info)
            record: dict[str, Any] = {"stage": stage.name, "round": round_, "step": step}
            if stage.evaluate:
                record.update(algorithm.evaluate(state, test_data))
            record.update(mean_client_metrics(replies))
            record.update({"clients": sampled, "failed_clients": sorted(failures)})
            record["download_bytes"] = payload_bytes(message.arrays)
            record["upload_bytes"] = {str(r.client_id): payload_bytes(r.arrays) for r in sorted(answered, key=lambda r: r.client_id)}
            if failures:
                record["failures"] = {str(c): failures[c] for c in sorted(failures)}
            if empty:
                record["empty_clients"] = empty
            if not replies and not stage.server_only:
                record["aggregated"] = False
                record["note"] = "no sampled client trained (all failed or held no data); the previous state is kept"
            record["seconds"] = time.perf_counter() - t0
            progress.history.append(record)
            progress.stage_index, progress.round = stage_index, round_
            save(state, progress)
            if on_round:
                on_round(record)
        progress.stage_index, progress.round = stage_index + 1, 0
    return SimulationResult(state, pool.states(), progress, time.perf_counter() - started)


def simulate(
    algorithm: Algorithm,
    client_data: Callable[[int], ClientData],
    num_clients: int,
    test_data: ClientData,
    *,
    seed: int,
    rounds: int,
    fraction: float,
    vectorize: bool = True,
    checkpoint_path: Path | None = None,
    start: RunState | None = None,
    on_round: RoundCallback | None = None,
) -> SimulationResult:
    """The in-process runtime: ``run_rounds`` with every client simulated here (``client_data(i)`` gives client i's data)."""
    pool = InProcessClients(algorithm, client_data, num_clients, start.clients if start is not None else None)
    return run_rounds(
        algorithm, pool, test_data, seed=seed, rounds=rounds, fraction=fraction, vectorize=vectorize,
        checkpoint_path=checkpoint_path, start=start, on_round=on_round,
    )
