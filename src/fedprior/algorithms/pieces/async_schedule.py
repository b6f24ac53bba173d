"""The simulated clock of asynchronous aggregation: which client trains on which model version, and when its update arrives.

FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous Aggregation", AISTATS 2022, Algorithm 1) keeps
C clients training at once (the concurrency); each downloads the server's current model, trains, and sends its update
when it finishes; the server collects the updates in a buffer and, once it holds K of them, steps its model (one new
version); a client that finished is replaced by a newly sampled one, which downloads the model current then. FedAsync
(Xie, Koyejo and Gupta, "Asynchronous Federated Optimization", 2019, Algorithm 1) is the case K = 1.

This module is that event queue and nothing else: no tensor, no model. Its state between two server steps is a
:class:`Clock` (the simulated time, the model version, the clients in flight with the version they downloaded, the time
their update arrives and their dispatch number); :meth:`Schedule.advance` runs the events up to the next server step. The events
depend only on the run seed, the durations and the hyperparameters, never on what the clients compute, so the runtime
can ask first which clients train on the current model in a round (:attr:`Step.trained`), train them, and then apply the
step's arrivals (``engines/asynchronous.py``). A round of the run is one server step.

Rules the papers leave to the implementation, fixed here:

- **Durations**: a :class:`Duration` gives the simulated seconds client ``c`` takes from its download of version ``v``
  to its upload; :func:`equal_durations` (every client 1.0) is the default. A system model (device speeds and
  bandwidths) plugs in as such a callable (``Runtime.client_duration``).
- **Ties**: events are ordered by (arrival time, dispatch number). Replacements owed at an instant are dispatched once
  every arrival of that instant has been taken, or at a server step, whichever comes first, so clients replaced at the
  instant of a step download the new model. With K = C and equal durations every step is then a synchronous round:
  FedAvg's (tests/algorithms/test_fedbuff.py).
- **Sampling**: a replacement is drawn uniformly (by rejection: nothing of size N is built) from the clients neither in flight nor already dispatched on the current
  version (a client trains at most once on a version), from the stream ``("async-dispatch", n)`` of the run seed, n the
  dispatch number of the first client of the draw; a draw of several clients gives them dispatch numbers in the order
  of their ids. Where no client is eligible the replacement waits for the next instant or step (only with C near N).
- **A client that fails** (or holds no data) still arrives at its time and counts towards the K, without an update: the
  schedule cannot depend on what the clients compute.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fedprior.errors import ConfigError
from fedprior.seeding import numpy_rng


class Duration(Protocol):
    """Simulated seconds from client ``client_id``'s download of model ``version`` to the arrival of its update."""

    def __call__(self, client_id: int, version: int, /) -> float: ...


def equal_durations(client_id: int, version: int) -> float:
    """Every client takes 1.0 simulated second (the default, without a system model)."""
    return 1.0


@dataclass(frozen=True, order=True)
class InFlight:
    """A client training: its update arrives at ``finish``; ``order`` (its dispatch number) breaks ties of ``finish``."""

    finish: float
    order: int
    client: int
    version: int
    """The model version it downloaded (and trains on)."""


@dataclass(frozen=True)
class Clock:
    """The event queue between two server steps: simulated ``time``, the model ``version``, the clients in flight
    (sorted by arrival), and ``dispatched``, the number of dispatches so far (the next one's number)."""

    time: float
    version: int
    dispatched: int
    flight: tuple[InFlight, ...]


@dataclass(frozen=True)
class Step:
    """One server step: the updates it applies (``arrivals``, in arrival order, each with its staleness
    ``version - arrival.version``), the clients that train on the model of ``version`` (``trained``: dispatched on it
    before the step or during it, in dispatch order), and the queue after it (``after``: version + 1)."""

    version: int
    arrivals: tuple[InFlight, ...]
    trained: tuple[InFlight, ...]
    after: Clock


@dataclass(frozen=True)
class Schedule:
    """The hyperparameters of the queue: K (``buffer_size``), C (``concurrency``), N clients, the durations; each call
    takes the run seed (the replacements' draws)."""

    buffer_size: int
    concurrency: int
    num_clients: int
    duration: Duration = equal_durations

    def __post_init__(self) -> None:
        check_sizes(self.buffer_size, self.concurrency, self.num_clients)

    def start(self, seed: int) -> Clock:
        """Version 0 at time 0, with C clients dispatched on it."""
        flight: list[InFlight] = []
        dispatched = self._dispatch(seed, flight, set(), 0.0, 0, 0, self.concurrency)
        return Clock(0.0, 0, dispatched, tuple(flight))

    def advance(self, clock: Clock, seed: int) -> Step:
        """Run the events from ``clock`` to the next server step (the K-th arrival)."""
        version, time, dispatched = clock.version, clock.time, clock.dispatched
        flight = list(clock.flight)  # sorted by (finish, order)
        on_version = {e.client for e in flight if e.version == version}
        arrivals: list[InFlight] = []
        owed = 0
        while len(arrivals) < self.buffer_size:
            if not flight:  # cannot happen with K <= C <= N (each step starts with C in flight)
                raise RuntimeError("asynchronous schedule: no client in flight before the buffer is full")
            arrival = flight.pop(0)
            time = arrival.finish
            arrivals.append(arrival)
            owed += 1
            instant_over = not flight or flight[0].finish > time
            if len(arrivals) < self.buffer_size and instant_over:
                placed = self._dispatch(seed, flight, on_version, time, version, dispatched, owed)
                owed -= placed - dispatched
                dispatched = placed
        dispatched = self._dispatch(seed, flight, set(), time, version + 1, dispatched, owed)  # after the step: on the new model
        on_it = {e.order: e for e in (*clock.flight, *arrivals, *flight) if e.version == version}
        trained = tuple(on_it[order] for order in sorted(on_it))
        return Step(version, tuple(arrivals), trained, Clock(time, version + 1, dispatched, tuple(flight)))

    def _dispatch(self, seed: int, flight: list[InFlight], on_version: set[int], time: float, version: int, dispatched: int, count: int) -> int:
        """Dispatch up to ``count`` clients on ``version`` at ``time`` into ``flight`` (kept sorted); ``on_version`` (updated)
        holds the clients already dispatched on it. Returns the next dispatch number."""
        excluded = {e.client for e in flight} | on_version
        count = min(count, self.num_clients - len(excluded))
        if count <= 0:
            return dispatched
        rng = numpy_rng(seed, "async-dispatch", dispatched)
        picked: set[int] = set()
        while len(picked) < count:  # uniform over the eligible clients by rejection: O(count) draws where C << N, no list of N
            client = int(rng.integers(self.num_clients))
            if client not in excluded:
                picked.add(client)
        chosen = sorted(picked)
        for offset, client in enumerate(chosen):
            finish = time + float(self.duration(client, version))
            if not finish >= time:  # negative or NaN
                raise ValueError(f"asynchronous schedule: client {client}'s duration on version {version} is {finish - time}, not a non-negative number")
            bisect.insort(flight, InFlight(finish, dispatched + offset, client, version))
            on_version.add(client)
        return dispatched + count


def staleness_weight(staleness: int | Sequence[int], function: str, a: float, b: float) -> list[float]:
    """s(t - tau) of FedAsync (Xie et al. 2019, Sec. 5's staleness functions; FedBuff's experiments scale updates by
    1 / sqrt(1 + staleness), the polynomial with a = 1/2): 'constant' 1; 'polynomial' (t - tau + 1)^(-a);
    'hinge' 1 where t - tau <= b, else 1 / (a (t - tau - b) + 1)."""
    values = [staleness] if isinstance(staleness, int) else list(staleness)
    if function == "constant":
        return [1.0 for _ in values]
    if function == "polynomial":
        return [float((s + 1) ** -a) for s in values]
    if function == "hinge":
        return [1.0 if s <= b else 1.0 / (a * (s - b) + 1.0) for s in values]
    raise ConfigError(f"algorithm.staleness: unknown function {function!r}; accepted: constant, polynomial, hinge")


ASYNCHRONOUS = ("fedbuff", "fedasync")
"""The shipped algorithms that schedule their own clients on the simulated clock (checked against ``[federation]``)."""


def check_sizes(buffer_size: int, concurrency: int, num_clients: int | None = None) -> None:
    """K <= C (every step starts with C in flight, of which K arrive) and C <= N: a one-line ConfigError otherwise."""
    if buffer_size > concurrency:
        raise ConfigError(
            f"algorithm.buffer_size: {buffer_size} updates a step need at least as many clients in flight; accepted: 1 to algorithm.concurrency ({concurrency})"
        )
    if num_clients is not None and concurrency > num_clients:
        raise ConfigError(f"algorithm.concurrency: {concurrency} clients in flight of {num_clients}; accepted: 1 to federation.num_clients ({num_clients})")


def check_federation(algorithm: str, values: dict, num_clients: int, sampler: str) -> None:
    """What an asynchronous algorithm asks of ``[federation]``, checked with the config: C <= ``federation.num_clients``,
    and its own sampling (``federation.sampler = 'uniform'``, the default; ``federation.fraction`` is not read)."""
    if algorithm not in ASYNCHRONOUS:
        return
    check_sizes(int(values.get("buffer_size", 1)), int(values["concurrency"]), num_clients)
    if sampler != "uniform":
        raise ConfigError(
            f"federation.sampler: algorithm '{algorithm}' samples its own clients, uniformly among those not in flight, as each one "
            f"finishes (docs/system-heterogeneity.md); accepted: uniform"
        )
