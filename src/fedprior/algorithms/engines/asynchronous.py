"""The server of asynchronous aggregation (FedBuff, FedAsync) around FedAvg's clients: one round of the run = one server step.

The clients are FedAvg's (:func:`~fedprior.algorithms.engines.supervised.local_sgd_update`, local SGD from the model they
downloaded); only the server differs. Its state holds, beside the model (``model.*``), the event queue of
:mod:`~fedprior.algorithms.pieces.async_schedule` (``async.*``: the simulated time, the model version, each client in
flight with the version it downloaded, its arrival time and dispatch number) and the updates computed but not yet
arrived (``async.update.<dispatch number>.*``). A round then runs as the runtime's round loop runs every round:

1. ``dispatch(state, info)`` (:attr:`~fedprior.algorithms.base.Algorithm.dispatch`): the clients that download the
   current model, version v = round - 1 (those dispatched on it after the last step, and those that replace a client
   arriving before the next step; the events do not depend on what the clients compute, so they are known first);
2. the runtime broadcasts version v to them and collects their replies, as for any algorithm;
3. ``aggregate``: each reply is kept as the client's update (FedBuff: Delta = x_client - x_v; FedAsync: x_client)
   until it arrives; the step's K arrivals are applied (:class:`ServerRule`) and the queue moves to version v + 1.

So ``metrics.jsonl``, ``federation.evaluate_every``, checkpoints and resume work as for any algorithm: the updates in
flight are part of the checkpointed state, and a run killed between two steps resumes with the same numbers. The
round's record says where the clock stands (its ``round_metrics``: ``simulated_time``, the step's staleness); its
``clients`` are those that trained in the round (their updates may arrive steps later), its traffic theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from fedprior.algorithms.base import Algorithm, Arrays, ClientUpdate, Reply, RoundInfo, Runtime, State
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.pieces.async_schedule import Clock, Duration, InFlight, Schedule, equal_durations, staleness_weight
from fedprior.algorithms.pieces.tensors import MODEL, model_arrays, payload_bytes

PREFIX = "async."
UPDATE = PREFIX + "update."
EXAMPLES = PREFIX + "examples."
STATS = PREFIX + "stat."
QUEUE = ("finish", "order", "client", "version")
"""The in-flight table's columns, one tensor each (``async.flight.<column>``)."""


@dataclass(frozen=True)
class ServerRule:
    """How a step applies its arrivals, each an update with its example count and staleness tau = v - (its version).

    - ``buffered`` (FedBuff, Nguyen et al., AISTATS 2022, Algorithm 1): x_{v+1} = x_v + eta_g sum_i c_i s(tau_i) Delta_i,
      Delta_i = x_i - x_{tau_i} the client's change of the model it downloaded (the paper writes the client's
      y_0 - y_Q and the step x - eta_g Delta-bar, the same direction), c_i = 1 / (updates in the buffer) as the paper's
      Delta-bar / K, or n_i / sum n (``weighting = 'examples'``, FedAvg's weights);
    - ``mixing`` (FedAsync, Xie, Koyejo and Gupta 2019, Algorithm 1): x_t = (1 - alpha_t) x_{t-1} + alpha_t x_new with
      alpha_t = alpha s(t - tau), x_new the client's model, one arrival at a time.

    s is :func:`~fedprior.algorithms.pieces.async_schedule.staleness_weight` (``staleness``, ``a``, ``b``). Integer tensors
    (BatchNorm's step counts) take the value of the first arrival, as FedAvg's mean does.
    """

    kind: Literal["buffered", "mixing"]
    staleness: str = "constant"
    a: float = 0.5
    b: float = 4.0
    server_lr: float = 1.0
    alpha: float = 1.0
    weighting: Literal["uniform", "examples"] = "uniform"

    def kept(self, reply: Arrays, model: Arrays) -> Arrays:
        """What is held of a reply until it arrives: its change of ``model`` (buffered) or the model itself (mixing)."""
        if self.kind == "mixing":
            return {k: v.detach().clone() for k, v in reply.items()}
        return {k: (v - model[k].to(v.device)) if v.is_floating_point() else v.clone() for k, v in reply.items()}

    def apply(self, model: Arrays, arrivals: Sequence[tuple[Arrays, int, int]]) -> Arrays:
        """The next model from ``model`` and the step's arrivals ``(kept update, examples, staleness)`` in arrival order."""
        if not arrivals:
            return dict(model)
        weights = staleness_weight([tau for _, _, tau in arrivals], self.staleness, self.a, self.b)
        floating = [k for k, v in model.items() if v.is_floating_point()]
        integers = {k: arrivals[0][0][k].to(model[k].device) for k in model if k not in floating}
        if self.kind == "mixing":
            current = {k: model[k].to(torch.float64) for k in floating}
            for (update, _, _), s in zip(arrivals, weights, strict=True):
                alpha = self.alpha * s
                current = {k: (1 - alpha) * current[k] + alpha * update[k].to(current[k].device, torch.float64) for k in floating}
            return {**{k: current[k].to(model[k].dtype) for k in floating}, **integers}
        shares = [1.0 / len(arrivals)] * len(arrivals) if self.weighting == "uniform" else [n / sum(n for _, n, _ in arrivals) for _, n, _ in arrivals]
        total = {k: model[k].to(torch.float64) for k in floating}
        for (update, _, _), share, s in zip(arrivals, shares, weights, strict=True):
            for k in floating:
                total[k] += (self.server_lr * share * s) * update[k].to(total[k].device, torch.float64)
        return {**{k: total[k].to(model[k].dtype) for k in floating}, **integers}


def encode_clock(clock: Clock) -> State:
    """The queue as state tensors (``async.time``, ``async.version``, ``async.dispatched``, ``async.flight.<column>``)."""
    columns = {
        "finish": torch.tensor([e.finish for e in clock.flight], dtype=torch.float64),
        **{c: torch.tensor([getattr(e, c) for e in clock.flight], dtype=torch.int64) for c in QUEUE[1:]},
    }
    return {
        PREFIX + "time": torch.tensor(clock.time, dtype=torch.float64),
        PREFIX + "version": torch.tensor(clock.version, dtype=torch.int64),
        PREFIX + "dispatched": torch.tensor(clock.dispatched, dtype=torch.int64),
        **{f"{PREFIX}flight.{c}": v for c, v in columns.items()},
    }


def decode_clock(state: State) -> Clock:
    """The queue of a state written by :func:`encode_clock` (checkpointed, or moved between processes)."""
    rows = zip(*(state[f"{PREFIX}flight.{c}"].tolist() for c in QUEUE), strict=True)
    flight = tuple(sorted(InFlight(float(f), int(o), int(c), int(v)) for f, o, c, v in rows))
    return Clock(float(state[PREFIX + "time"]), int(state[PREFIX + "version"]), int(state[PREFIX + "dispatched"]), flight)


def held_updates(state: State) -> dict[int, tuple[Arrays, int]]:
    """The updates computed and not yet arrived, by dispatch number: (arrays with their ``model.`` names, examples)."""
    held: dict[int, tuple[Arrays, int]] = {}
    for name, value in state.items():
        if name.startswith(EXAMPLES):
            order = int(name[len(EXAMPLES) :])
            prefix = f"{UPDATE}{order}."
            held[order] = ({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}, int(value))
    return held


def encode_held(held: dict[int, tuple[Arrays, int]]) -> State:
    out: State = {}
    for order in sorted(held):
        arrays, examples = held[order]
        out.update({f"{UPDATE}{order}.{k}": v for k, v in arrays.items()})
        out[f"{EXAMPLES}{order}"] = torch.tensor(examples, dtype=torch.int64)
    return out


def model_of(state: State) -> Arrays:
    return {k: v for k, v in state.items() if k.startswith(MODEL)}


def clock_durations(runtime: Runtime, net: GlobalModel) -> Duration:
    """The schedule's durations: the run's device model (``runtime.client_duration``, the ``[system]`` section) with the
    model's bytes down and up (its parameters and buffers as broadcast), else :func:`~fedprior.algorithms.pieces.async_schedule.equal_durations`.
    The model is built under a forked generator: asking leaves torch's global generator as it was."""
    duration = runtime.client_duration
    if duration is None:
        return equal_durations
    with torch.random.fork_rng(devices=[]):
        model_bytes = payload_bytes(model_arrays(net.build()))

    def seconds(client_id: int, version: int) -> float:
        return duration(client_id, version, model_bytes)

    return seconds


def asynchronous_algorithm(name: str, net: GlobalModel, client_update: ClientUpdate, schedule: Schedule, rule: ServerRule) -> Algorithm:
    """``net``'s supervised algorithm with ``client_update`` on its clients and the asynchronous server (the module docstring)."""

    def init(info: RoundInfo) -> State:
        return {**net.init(info), **encode_clock(schedule.start(info.seed))}

    def dispatch(state: State, info: RoundInfo) -> list[int]:
        return [e.client for e in schedule.advance(decode_clock(state), info.seed).trained]

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        step = schedule.advance(decode_clock(state), info.seed)
        model = model_of(state)
        held = held_updates(state)
        answered = {r.client_id: r for r in replies}
        for entry in step.trained:
            reply = answered.get(entry.client)
            if reply is not None:
                held[entry.order] = (rule.kept(model_of(reply.arrays), model), reply.num_examples)
        arrived = [(held.pop(e.order), step.version - e.version) for e in step.arrivals if e.order in held]
        staleness = [step.version - e.version for e in step.arrivals]
        waiting = {e.order for e in step.after.flight}
        stats = {
            "buffer_staleness_mean": sum(staleness) / len(staleness),
            "buffer_staleness_max": max(staleness),
            "buffer_without_update": len(step.arrivals) - len(arrived),
        }
        return {
            **rule.apply(model, [(arrays, examples, tau) for (arrays, examples), tau in arrived]),
            **encode_clock(step.after),
            **encode_held({o: u for o, u in held.items() if o in waiting}),
            **{STATS + k: torch.tensor(float(v), dtype=torch.float64) for k, v in stats.items()},
        }

    def round_metrics(state: State) -> dict[str, float | str]:
        """Where the clock stands after the step: ``simulated_time`` (seconds), the clients in flight,
        the step's mean and largest staleness and its arrivals without an update (failed clients)."""
        metrics: dict[str, float | str] = {
            "simulated_time": float(state[PREFIX + "time"]),
            "clients_in_flight": int(state[f"{PREFIX}flight.client"].numel()),
        }
        metrics.update({k[len(STATS) :]: float(v) for k, v in state.items() if k.startswith(STATS)})
        return metrics

    return net.algorithm(name, client_update, init=init, aggregate=aggregate, dispatch=dispatch, round_metrics=round_metrics, thread_safe_updates=True)
