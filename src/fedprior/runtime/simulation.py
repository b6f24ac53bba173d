"""The in-process runtime: rounds, client sampling, per-client state, evaluation, checkpoints.

This is the default way to run: every client is simulated in this process, the
sampled clients of a round are trained together when the algorithm provides
``client_update_many`` (and ``vectorize`` is on), or one by one otherwise. After each
round the global model is evaluated and the whole run state is checkpointed
atomically, so an interrupted run resumes where it stopped with the same numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fedprior.algorithms.base import Algorithm, ClientData, Reply, RoundInfo, Stage, State
from fedprior.runtime.checkpoint import Progress, RunState, save_checkpoint
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
    """Run ``algorithm`` over ``num_clients`` simulated clients and return the final state and history.

    ``client_data(i)`` gives client i's data (only the fields the algorithm reads);
    ``test_data`` is the held-out set the global model is evaluated on after every round.
    Given ``start`` (a loaded checkpoint), training continues after its last round.
    """
    started = time.perf_counter()
    if start is not None:
        state, client_states, progress = start.server, start.clients, start.progress
    else:
        first_stage = algorithm.stages[0].name if algorithm.stages else "evaluation"
        state = algorithm.init(RoundInfo(seed=seed, stage=first_stage, round=0))
        client_states, progress = {}, Progress()
        progress.initial = algorithm.evaluate(state, test_data)
        if on_round:
            on_round({"stage": first_stage, "round": 0, **progress.initial})

    step = sum(r for _, r, _ in stage_plan(algorithm, rounds, fraction)[: progress.stage_index]) + progress.round
    for stage_index, (stage, stage_rounds, stage_fraction) in enumerate(stage_plan(algorithm, rounds, fraction)):
        if stage_index < progress.stage_index:
            continue
        first = progress.round + 1 if stage_index == progress.stage_index else 1
        for round_ in range(first, stage_rounds + 1):
            t0 = time.perf_counter()
            info = RoundInfo(seed=seed, stage=stage.name, round=round_)
            sampled = sample_clients(seed, stage.name, round_, num_clients, stage_fraction)
            message = algorithm.broadcast(state, info)
            infos = [info.for_client(c) for c in sampled]
            datas = [client_data(c) for c in sampled]
            previous = [client_states.get(c, {}) for c in sampled]
            if vectorize and algorithm.client_update_many is not None:
                results = algorithm.client_update_many(message, previous, datas, infos)
            else:
                results = [algorithm.client_update(message, s, d, i) for s, d, i in zip(previous, datas, infos)]
            replies = []
            for client_id, (reply, new_state) in zip(sampled, results):
                replies.append(Reply(reply.arrays, reply.num_examples, reply.metrics, client_id))
                if new_state:
                    client_states[client_id] = new_state
            state = algorithm.aggregate(state, replies, info)
            step += 1
            record: dict[str, Any] = {"stage": stage.name, "round": round_, "step": step}
            if stage.evaluate:
                record.update(algorithm.evaluate(state, test_data))
            record.update(mean_client_metrics(replies))
            record.update({"clients": sampled, "seconds": time.perf_counter() - t0})
            progress.history.append(record)
            progress.stage_index, progress.round = stage_index, round_
            if checkpoint_path is not None:
                save_checkpoint(checkpoint_path, RunState(state, client_states, progress))
            if on_round:
                on_round(record)
        progress.stage_index, progress.round = stage_index + 1, 0
    return SimulationResult(state, client_states, progress, time.perf_counter() - started)
