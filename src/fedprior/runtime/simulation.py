"""The round loop, written once for every runtime: sampling, updates, aggregation, evaluation, checkpoints.

The clients' updates run in a :class:`~fedprior.runtime.clients.ClientPool`: in this
process or in worker processes (:func:`simulate`, ``run.workers``), or on Flower
SuperNodes. Each round the loop chooses clients (``loop.sampler``, drawing from one stream per
round shared by all algorithms, ``sampling.py``; Power-of-Choice first asks its candidates
for their loss through the pool, ``ClientPool.losses``; an algorithm with ``Algorithm.dispatch`` names them itself:
asynchronous aggregation on its simulated clock, ``engines/asynchronous.py``), broadcasts, collects the replies, drops the empty and the failed ones
(recording both), sorts the rest by client id (float sums depend on order) and
aggregates them, evaluates the global model every ``evaluate_every`` rounds and after
the last round of each stage (a record without evaluation has no accuracy), and
checkpoints the whole run state atomically, so an interrupted run resumes where it
stopped with the same numbers. On an accelerator the server and client states may live on
the run's device between rounds (replies, client optimizer state); a
checkpoint copies them to the host when it writes, and the :class:`SimulationResult` holds
host copies. With ``checkpoint_every = k`` (``run.checkpoint_every``)
the checkpoint is written after every k-th round (counted over all stages), after the
run's last round, and, when the loop stops on an exception (Ctrl-C and SIGTERM arrive as
one), for the last completed round not yet written; a resume then recomputes the rounds
after the checkpoint, with the same numbers (the seeds depend on the round, not on what
ran before in the process). Given a :class:`~fedprior.runtime.threads.ThreadPolicy`,
the round runs with its ``train`` threads and the evaluation with its ``evaluate`` threads.
Replies and the new global model are screened for NaN/inf (``divergence.py``): a
diverged run stops with a clear error instead of finishing at chance accuracy.

A round in which no sampled client could be reached (every update failed: a node gone,
a timeout, a ClientApp error) trains nothing, so it is not counted: the loop retries it
for up to ``wait_for_clients`` seconds (``federation.wait_for_clients``; nodes may come
back) and, if still nobody answers, reports the round with ``"trained": false`` and
stops with :class:`RoundNotTrained`, leaving the checkpoint of the last trained round to
resume from. (A round whose clients all answered but held no data is a trained round
that changed nothing: ``"aggregated": false``.)

With a system model (``loop.system``, the ``[system]`` section; ``system_round.py``) a round also simulates time: the
sampled clients that are not available fail it, a deadline drops the late replies or gives the slow clients a step budget
(``RoundInfo.step_budgets``), over-selection keeps the first m to finish, and the record adds ``round_simulated_seconds`` and
``simulated_time``. Without one (the default) none of this runs.

Communication is accounted in every round for every algorithm, as totals over the
round's clients (``traffic.py``): ``download_bytes`` is what the sampled clients receive
(the broadcast's tensors, once per sampled client), ``upload_bytes`` what the clients that
answered sent (their replies' tensors), with ``upload_bytes_by_client`` beside it, all in
bytes of the tensors' buffers (the MFCL paper's Table 8 counts the same payloads).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

import numpy as np

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, Reply, RoundInfo, Stage, State
from fedprior.algorithms.pieces.metrics import selected_round, selection_score
from fedprior.algorithms.pieces.tensors import payload_bytes, to_cpu
from fedprior.errors import ConfigError, FedpriorError
from fedprior.runtime.checkpoint import Progress, RunState, blobs_path, save_checkpoint
from fedprior.runtime.client_store import ClientStates
from fedprior.runtime.clients import ClientPool, InProcessClients, check_power_of_choice
from fedprior.runtime.concurrent import Lanes
from fedprior.runtime.divergence import check_global, screen_replies
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import Draw, PowerOfChoice, Uniform, chosen_clients, clients_per_round
from fedprior.runtime.system_config import check_asynchronous_system
from fedprior.runtime.system_round import check_partial_work, over_selected_count, plan_round, settle_round, simulated_time
from fedprior.runtime.threads import torch_threads
from fedprior.runtime.traffic import round_traffic
from fedprior.runtime.workers import WorkerClients, WorkerSetup

RoundCallback = Callable[[dict[str, Any]], None]


@dataclass
class SimulationResult:
    state: State
    client_states: Mapping[int, State]
    """Each client's state (a :class:`~fedprior.runtime.client_store.ClientStates` store: those on disk are read when asked for)."""
    progress: Progress
    wall_seconds: float
    stopped: dict[str, Any] | None = None
    """Where ``loop.before_round`` ended the run before a round (a privacy budget): what it said, with the stage and round; else None."""


STOPPED = "stopped"
"""Checkpoint metadata key: the JSON of why ``loop.before_round`` ended the run (its resume stops there again)."""


class _Stop(Exception):
    """``loop.before_round`` said no: the run ends before the round (caught in :func:`run_rounds`)."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record.get("note", "stopped"))
        self.record = record


class RoundNotTrained(FedpriorError):
    """No sampled client of a round could be reached; the run stopped before that round (resumable)."""


def stage_plan(algorithm: Algorithm, rounds: int, fraction: float) -> list[tuple[Stage, int, float]]:
    """(stage, its rounds, its fraction) for each stage, with the federation defaults filled in."""
    return [(s, rounds if s.rounds is None else s.rounds, fraction if s.fraction is None else s.fraction) for s in algorithm.stages]


def total_rounds(algorithm: Algorithm, rounds: int) -> int:
    return sum(r for _, r, _ in stage_plan(algorithm, rounds, 1.0))


def mean_client_metrics(replies: list[Reply]) -> dict[str, float]:
    names = sorted({k for r in replies for k in r.metrics})
    return {f"client_{k}": float(np.mean([r.metrics[k] for r in replies if k in r.metrics])) for k in names}


def evaluated(stage: Stage, round_: int, stage_rounds: int, every: int) -> bool:
    """Whether round ``round_`` of ``stage`` ends with an evaluation: every ``every`` rounds, and the stage's last."""
    return stage.evaluate and (round_ % every == 0 or round_ == stage_rounds)


def reportable(validation: dict[str, Any], history: list[dict[str, Any]], last: bool) -> bool:
    """Whether an evaluation's test metrics can be reported (``run.test_metrics = 'selectable'``): a stage's last
    round (the final metrics), or a round whose validation score beats every earlier round's, which is the only
    kind :func:`fedprior.algorithms.pieces.metrics.selected_round` can pick (it keeps the first best)."""
    if last:
        return True
    if not validation:
        return False
    best = selected_round(history)
    return best is None or selection_score(validation) > selection_score(best)


def reach_clients(
    pool: ClientPool, message, info: RoundInfo, step: int, sampled: list[int], vectorize: bool, wait: float, retry_every: float
) -> tuple[list[Reply], dict[int, str], int]:
    """``pool.update``, repeated every ``retry_every`` seconds for up to ``wait`` seconds while no client replies.

    Returns (replies, failures of the last attempt, attempts). Replies empty with failures
    non-empty means that no client could be reached within ``wait``.
    """
    attempts, deadline = 0, None
    while True:
        attempts += 1
        answered, failures = pool.update(message, info, step, sampled, vectorize)
        if answered or not failures:
            return answered, failures, attempts
        deadline = deadline if deadline is not None else time.monotonic() + wait
        left = deadline - time.monotonic()
        if left <= 0:
            return answered, failures, attempts
        time.sleep(min(retry_every, left))


def run_rounds(
    algorithm: Algorithm,
    pool: ClientPool,
    test_data: ClientData,
    loop: RoundLoop,
    *,
    checkpoint_path: Path | None = None,
    start: RunState | None = None,
    on_round: RoundCallback | None = None,
    checkpoint_metadata: dict[str, str] | None = None,
) -> SimulationResult:
    """Train ``algorithm`` with the clients of ``pool`` as ``loop`` says; evaluate on ``test_data`` every ``loop.evaluate_every`` rounds.

    Given ``start`` (a loaded checkpoint), training continues after its last round.
    A round in which no sampled client could be reached is retried for ``loop.wait_for_clients``
    seconds (every ``loop.retry_every``) before the run stops with :class:`RoundNotTrained`;
    a client update with NaN/inf is handled as ``loop.non_finite`` says (``divergence.py``).
    ``checkpoint_metadata`` is stored in every checkpoint (default: the one ``start`` had).
    Where ``loop.before_round`` ends the run before a round (a privacy budget), the loop reports that round's record
    (``"trained": false`` with what it said), writes the checkpoint of the last round with the reason in its metadata
    (``STOPPED``) and returns with ``stopped`` set; a resume asks again and stops at the same round.
    """
    if isinstance(loop.sampler, PowerOfChoice):
        check_power_of_choice(algorithm)  # refused before anything runs where the clients hold no labels to score
    if loop.system is not None and loop.system.config.partial_work:
        check_partial_work(algorithm)
    if algorithm.dispatch is not None and not isinstance(loop.sampler, Uniform):
        raise ConfigError(f"federation.sampler: algorithm '{algorithm.name}' chooses its own clients (Algorithm.dispatch); accepted: uniform")
    if algorithm.dispatch is not None and loop.system is not None:  # its own clock times the clients (Runtime.client_duration)
        check_asynchronous_system(algorithm.name, loop.system.config)
        loop = replace(loop, system=None)
    seed, threads = loop.seed, loop.threads
    evaluate_threads = threads.evaluate if threads else None
    if checkpoint_metadata is None:
        checkpoint_metadata = {k: v for k, v in start.metadata.items() if k != STOPPED} if start is not None else {}
    with torch_threads(threads.train if threads else None):
        started = time.perf_counter()

        def evaluate(state: State, history: list[dict[str, Any]], last: bool = True) -> dict[str, Any]:
            with torch_threads(evaluate_threads):
                scores = algorithm.validate(state) if algorithm.validate is not None else {}
                if loop.test_metrics == "selectable" and not reportable(scores, history, last):
                    return scores
                return {**algorithm.evaluate(state, test_data), **scores}

        plan = stage_plan(algorithm, loop.rounds, loop.fraction)
        total_steps = sum(r for _, r, _ in plan)
        pending: RunState | None = None  # the last completed round, when its checkpoint is not written yet

        def save(state: State, progress: Progress, step: int) -> None:
            """Checkpoint the completed ``step`` now if it is due (``loop.checkpoint_every``, the last round), else keep it pending."""
            nonlocal pending
            if checkpoint_path is None:
                return
            # the client states as they are now: the pool replaces a client's state rather than mutating it, so a copy of
            # the mapping keeps this round's, whatever a later round does before the loop stops
            snapshot = Progress(progress.stage_index, progress.round, list(progress.history), progress.initial)  # the loop appends to progress
            completed = RunState(state, client_snapshot(pool.states()), snapshot, checkpoint_metadata)
            if loop.checkpoint_every == 1 or step == total_steps or (step > 0 and step % loop.checkpoint_every == 0):
                save_checkpoint(checkpoint_path, completed)
                pending = None
            else:
                pending = completed

        if start is not None:
            state, progress = start.server, start.progress
        else:
            first_stage = algorithm.stages[0].name if algorithm.stages else "evaluation"
            state = algorithm.init(RoundInfo(seed=seed, stage=first_stage, round=0))
            progress = Progress(initial=evaluate(state, []))
            save(state, progress, 0)
            if on_round:
                on_round({"stage": first_stage, "round": 0, **progress.initial})

        step = sum(r for _, r, _ in plan[: progress.stage_index]) + progress.round
        try:
            if any(r > 0 and not s.server_only for s, r, _ in plan[progress.stage_index :]):
                pool.prepare()
            for stage_index, (stage, stage_rounds, stage_fraction) in enumerate(plan):
                if stage_index < progress.stage_index:
                    continue
                first = progress.round + 1 if stage_index == progress.stage_index else 1
                for round_ in range(first, stage_rounds + 1):
                    t0 = time.perf_counter()
                    step += 1
                    info = RoundInfo(seed=seed, stage=stage.name, round=round_)
                    selection: dict[str, Any] = {}
                    if stage.server_only:  # server work alone: no client is sampled, nothing is sent
                        answered: list[Reply] = []
                        failures: dict[int, str] = {}
                        sampled: list[int] = []
                        message, attempts = Broadcast({}), 1
                    else:
                        if loop.before_round is not None and (said := loop.before_round(state)) is not None:
                            raise _Stop({"stage": stage.name, "round": round_, "step": step, "trained": False, **said})
                        if algorithm.dispatch is not None:  # it chooses its clients itself (asynchronous aggregation's clock)
                            sampled = sorted(int(c) for c in algorithm.dispatch(state, info))
                        else:
                            sampled, selection = choose_clients(loop, pool, state, info, step, stage_fraction)
                        message = algorithm.broadcast(state, info)
                        if loop.system is None:
                            answered, failures, attempts = reach_clients(
                                pool, message, info, step, sampled, loop.vectorize, loop.wait_for_clients, loop.retry_every
                            )
                        else:  # the system model: who can take part, how much each does, whose reply counts (system_round.py)
                            system_plan = plan_round(
                                loop.system, sampled, step, payload_bytes(message.arrays), loop.client_sizes, loop.local_epochs, loop.batch_size
                            )
                            budgeted = replace(info, step_budgets=tuple(sorted(system_plan.budgets.items()))) if system_plan.budgets else info
                            answered, failures, attempts = reach_clients(
                                pool,
                                message,
                                budgeted,
                                step,
                                system_plan.train,
                                loop.vectorize and not system_plan.budgets,
                                loop.wait_for_clients,
                                loop.retry_every,
                            )
                            failures = {**system_plan.failures, **failures}
                        if failures and not answered and (loop.system is None or system_plan.train):
                            stop_unreached(stage.name, round_, step, sampled, failures, attempts, on_round)
                        if loop.system is not None:
                            uploads = {r.client_id: payload_bytes(r.arrays) for r in answered}
                            traffic = round_traffic(payload_bytes(message.arrays), system_plan.train, uploads)
                            target = clients_per_round(pool.num_clients, stage_fraction)
                            answered, late, system_fields = settle_round(
                                loop.system, system_plan, answered, step, payload_bytes(message.arrays), uploads, target
                            )
                            failures = {**failures, **late}
                        answered, dropped = screen_replies(answered, stage.name, round_, loop.non_finite, state)  # reached, but diverged
                        failures = {**failures, **dropped}
                    replies = sorted((r for r in answered if r.num_examples > 0), key=lambda r: r.client_id)
                    empty = sorted(r.client_id for r in answered if r.num_examples == 0)
                    if replies or stage.server_only or algorithm.aggregates_no_reply or algorithm.dispatch is not None:
                        state = algorithm.aggregate(state, replies, info)
                    record: dict[str, Any] = {"stage": stage.name, "round": round_, "step": step}
                    if algorithm.round_metrics is not None:  # the server's own numbers of the round (client-level DP's epsilon)
                        record.update(algorithm.round_metrics(state))
                    if evaluated(stage, round_, stage_rounds, loop.evaluate_every):
                        record.update(evaluate(state, progress.history, last=round_ == stage_rounds))
                    check_global(state, record, stage.name, round_)
                    record.update(mean_client_metrics(replies))
                    record.update({"clients": sampled, "failed_clients": sorted(failures)})
                    if loop.malicious_clients:  # a simulated attack: who misbehaved this round (and, in the run's first round, who may)
                        record["malicious_clients"] = sorted(set(sampled) & loop.malicious_clients)
                        if step == 1:
                            record["malicious_client_ids"] = sorted(loop.malicious_clients)
                    record.update(selection)
                    if loop.system is not None and not stage.server_only:
                        record.update(traffic)  # every reply sent counts, kept or not; only the available clients received the broadcast
                        record.update(system_fields)
                    else:
                        record.update(round_traffic(payload_bytes(message.arrays), sampled, {r.client_id: payload_bytes(r.arrays) for r in answered}))
                    if loop.system is not None:
                        record.setdefault("round_simulated_seconds", 0.0)
                        record["simulated_time"] = simulated_time(progress.history) + record["round_simulated_seconds"]
                    if failures:
                        record["failures"] = {str(c): failures[c] for c in sorted(failures)}
                    if empty:
                        record["empty_clients"] = empty
                    if attempts > 1:
                        record["attempts"] = attempts
                    if not replies and not stage.server_only and algorithm.dispatch is None:
                        nobody = "no client was sampled" if not sampled else "no sampled client trained (those that answered held no data)"
                        if algorithm.aggregates_no_reply:
                            record["note"] = f"{nobody}; the noised mean of no updates was released (client-level DP)"
                        else:
                            record["aggregated"] = False
                            record["note"] = f"{nobody}; the previous state is kept"
                    record["seconds"] = time.perf_counter() - t0
                    progress.history.append(record)
                    progress.stage_index, progress.round = stage_index, round_
                    save(state, progress, step)
                    if on_round:
                        on_round(record)
                progress.stage_index, progress.round = stage_index + 1, 0
        except _Stop as stop:  # the run ends here, cleanly: the last round's checkpoint, saying why
            stopped = stop.record
            if on_round:
                on_round(stopped)
            if checkpoint_path is not None:
                metadata = {**checkpoint_metadata, STOPPED: json.dumps(stopped, sort_keys=True)}
                save_checkpoint(checkpoint_path, RunState(state, client_snapshot(pool.states()), progress, metadata))
            return SimulationResult(to_cpu(state), host_states(pool.states()), progress, time.perf_counter() - started, stopped)
        except BaseException:
            if pending is not None:  # the loop stops (an error, Ctrl-C, SIGTERM): the last completed round is not lost
                save_checkpoint(checkpoint_path, pending)  # type: ignore[arg-type]  # pending is set only with a checkpoint_path
            raise
        clients = host_states(pool.states())
        return SimulationResult(to_cpu(state), clients, progress, time.perf_counter() - started)  # the run's result on the host


def client_snapshot(states: Mapping[int, State]) -> Mapping[int, State]:
    """The client states as they are now, for a checkpoint written now or later: a store's snapshot (its files by reference,
    ``client_store.py``), else a copy of the mapping (the pool replaces a client's state, never mutates it)."""
    return states.snapshot() if isinstance(states, ClientStates) else dict(states)


def host_states(states: Mapping[int, State]) -> Mapping[int, State]:
    """The client states with host tensors, for the run's result: a store's states on disk stay there (read when asked for)."""
    if isinstance(states, ClientStates):
        copy = states.snapshot()
        copy.memory.update({c: to_cpu(s) for c, s in copy.memory.items()})
        return copy
    return {c: to_cpu(s) for c, s in states.items()}


def choose_clients(loop: RoundLoop, pool: ClientPool, state: State, info: RoundInfo, step: int, fraction: float) -> tuple[list[int], dict[str, Any]]:
    """The round's clients by ``loop.sampler`` (``sampling.py``), and what the round's record adds where it asked clients for their loss:
    ``candidates``, their ``candidate_losses`` (None for one that failed, ``candidate_failures`` says why) and
    ``selection_download_bytes``, the server state sent to each candidate to compute it (Power-of-Choice's extra traffic)."""
    losses: dict[int, float] = {}
    failed: dict[int, str] = {}

    def ask(clients: list[int]) -> dict[int, float]:
        got, failures = pool.losses(state, info, step, [int(c) for c in clients])
        losses.update(got)
        failed.update(failures)
        return got

    count = clients_per_round(pool.num_clients, fraction)
    if loop.system is not None and loop.system.config.over_selection > 0:  # over-selection (Bonawitz et al. 2019): sample m (1 + x), keep m
        count = over_selected_count(count, loop.system.config.over_selection, pool.num_clients)
    draw = Draw(loop.seed, info.stage, info.round, pool.num_clients, count, loop.client_sizes, ask, fraction)
    sampled = chosen_clients(loop.sampler, draw)
    if not losses and not failed:
        return sampled, {}
    candidates = sorted({*losses, *failed})
    extra: dict[str, Any] = {
        "candidates": candidates,
        "candidate_losses": [losses.get(c) for c in candidates],
        "selection_download_bytes": payload_bytes(state) * len(candidates),
    }
    if failed:
        extra["candidate_failures"] = {str(c): failed[c] for c in sorted(failed)}
    return sampled, extra


def stop_unreached(stage: str, round_: int, step: int, sampled: list[int], failures: dict[int, str], attempts: int, on_round: RoundCallback | None) -> None:
    """Report a round that no client could be reached for (``"trained": false``) and stop the run before it."""
    reasons = sorted(set(failures.values()))
    if on_round:
        on_round(
            {
                "stage": stage,
                "round": round_,
                "step": step,
                "trained": False,
                "clients": sampled,
                "failed_clients": sorted(failures),
                "failures": {str(c): failures[c] for c in sorted(failures)},
                "attempts": attempts,
                "note": "no sampled client could be reached; the round is not counted",
            }
        )
    raise RoundNotTrained(
        f"{stage} round {round_}: none of the {len(sampled)} sampled clients could be reached "
        f"({'; '.join(reasons[:3])}{'; ...' if len(reasons) > 3 else ''}); the round is not counted and the run "
        f"stops after the last trained round (federation.wait_for_clients makes a round wait for its clients). "
        f"Resume it when they are back"
    )


class RunHooks(TypedDict, total=False):
    """:func:`run_rounds`' keywords, which :func:`simulate` passes on: where to checkpoint, the checkpoint to continue
    from, the callback after each round, and the metadata written into each checkpoint."""

    checkpoint_path: Path | None
    start: RunState | None
    on_round: RoundCallback | None
    checkpoint_metadata: dict[str, str] | None


def simulate(
    algorithm: Algorithm,
    client_data: Callable[[int], ClientData],
    num_clients: int,
    test_data: ClientData,
    loop: RoundLoop,
    *,
    worker_setup: WorkerSetup | None = None,
    client_size: Callable[[int], int] | None = None,
    on_note: Callable[[str], None] | None = None,
    **hooks: Unpack[RunHooks],
) -> SimulationResult:
    """The local runtime: ``run_rounds`` with every client simulated here (``client_data(i)`` gives client i's data);
    ``hooks`` (:class:`RunHooks`: checkpointing, resuming, the per-round callback) go to ``run_rounds`` as they are.

    ``loop.workers > 1`` trains a round's clients in that many worker processes
    (:mod:`fedprior.runtime.workers`; ``worker_setup`` and ``client_size`` go there, and
    ``on_note`` hears a line when they start and when they are ready),
    each with ``loop.threads.train`` torch threads; ``loop.concurrent_clients > 1`` runs that many
    updates at once in each process (:mod:`fedprior.runtime.concurrent`), for an algorithm with
    ``thread_safe_updates``. The numbers are those of ``workers = 1`` and ``concurrent_clients = 1``.
    """
    start = hooks.get("start")
    checkpoint_path = hooks.get("checkpoint_path")
    # the clients' states: in memory up to loop.client_state_memory bytes, on disk beyond, in the checkpoint's folder of parts
    states = ClientStates(blobs_path(checkpoint_path) if checkpoint_path is not None else None, loop.client_state_memory)
    if start is not None:
        states.adopt(start.clients)
    if loop.concurrent_clients > 1 and not algorithm.thread_safe_updates:
        raise ValueError(
            f"concurrent_clients = {loop.concurrent_clients}: algorithm '{algorithm.name}' does not declare thread-safe client updates "
            "(Algorithm.thread_safe_updates); use 1"
        )
    if loop.workers > 1:
        pool: InProcessClients = WorkerClients(
            algorithm,
            client_data,
            num_clients,
            states,
            workers=loop.workers,
            setup=worker_setup,
            start_method=loop.start_method,
            threads=loop.threads.train if loop.threads else 1,
            client_size=client_size,
            concurrent=loop.concurrent_clients,
            device=loop.device,
            announce=on_note,
        )
    else:
        pool = InProcessClients(algorithm, client_data, num_clients, states, Lanes(loop.concurrent_clients, loop.device))
    try:
        return run_rounds(algorithm, pool, test_data, loop, **hooks)
    finally:
        if isinstance(pool, WorkerClients):
            pool.close()
