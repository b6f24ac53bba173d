"""Running the sampled clients' updates: the part both runtimes share, and the in-process client pool.

A *client pool* is where the updates of a round run: :class:`InProcessClients` here,
or Flower SuperNodes (``fedprior.flower.server_app.FlowerClients``). The round loop
(``rounds.py``) talks to a pool only through :class:`ClientPool`, so sampling,
aggregation, evaluation, records and checkpoints are written once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Protocol

import torch

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, State
from fedprior.errors import FedpriorError
from fedprior.runtime.client_store import ClientStates
from fedprior.runtime.concurrent import Lanes
from fedprior.seeding import derived_seed


class ClientPool(Protocol):
    num_clients: int

    def prepare(self) -> None:
        """Called once before the first round (e.g. wait for SuperNodes)."""

    def update(self, message: Broadcast, info: RoundInfo, step: int, clients: list[int], vectorize: bool) -> tuple[list[Reply], dict[int, str]]:
        """The replies of ``clients`` (``client_id`` set; any order) and the failed ones with a reason."""

    def states(self) -> Mapping[int, State]:
        """The client states to checkpoint with the server ({} where clients keep their own; a
        :class:`~fedprior.runtime.client_store.ClientStates` store where they may be on disk)."""

    def losses(self, state: State, info: RoundInfo, step: int, clients: list[int]) -> tuple[dict[int, float], dict[int, str]]:
        """:func:`global_loss` of the server ``state`` on each of ``clients``' data, and the clients that failed with a reason
        (a sampler that ranks clients asks it: ``federation.sampler = 'power-of-choice'``)."""


LABELLED_FIELDS = (("x", "y"), ("x_labeled", "y_labeled"))
"""The client fields a global model's loss is computed on: a supervised client's examples, or a semi-supervised client's labelled ones."""


def labelled_fields(algorithm: Algorithm) -> tuple[str, str]:
    """The (inputs, labels) fields of ``algorithm``'s clients that :func:`global_loss` reads; one FedpriorError line where it has none."""
    for fields in LABELLED_FIELDS:
        if set(fields) <= set(algorithm.inputs) and not algorithm.evaluation_inputs:
            return fields
    raise FedpriorError(
        f"federation.sampler = 'power-of-choice' ranks clients by the global model's loss on their labelled examples; algorithm "
        f"'{algorithm.name}' gives its clients no labels (inputs: {', '.join(algorithm.inputs) or 'none'}); use 'uniform' or 'size-weighted'"
    )


def check_power_of_choice(algorithm: Algorithm) -> None:
    """Power-of-Choice ranks the clients by the global model's loss on their labels: an algorithm whose clients train
    (a stage not server-only) must give them labels (:func:`labelled_fields`'s one line otherwise)."""
    if any(not stage.server_only for stage in algorithm.stages):
        labelled_fields(algorithm)


def global_loss(algorithm: Algorithm, state: State, data: ClientData) -> float:
    """The loss of the global model ``state`` on a client's labelled examples, F_k(w) of Power-of-Choice (Cho, Wang and Joshi,
    "Client Selection in Federated Learning: Convergence Analysis and Power-of-Choice Selection Strategies", AISTATS 2022, Sec. 4):
    ``algorithm.evaluate``'s ``loss`` on them (the mean cross-entropy for the shipped classifiers), 0 for a client with none.
    It runs under a forked torch generator, so what evaluation draws leaves the run's numbers alone."""
    x, y = labelled_fields(algorithm)
    if data[x].shape[0] == 0:
        return 0.0
    devices = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        metrics = algorithm.evaluate(state, {"x": data[x], "y": data[y]})
    if "loss" not in metrics:
        raise FedpriorError(f"federation.sampler = 'power-of-choice': algorithm '{algorithm.name}''s evaluate gives no 'loss' to rank clients by")
    return float(metrics["loss"])  # type: ignore[arg-type]


def is_empty(data: ClientData) -> bool:
    """A client holds no examples: every field it was given has zero rows (a field-less client is not empty)."""
    return bool(data) and all(value.shape[0] == 0 for value in data.values())


@contextmanager
def global_rng(infos: Sequence[ClientInfo]) -> Iterator[None]:
    """torch's global generator seeded from the clients' stream for the block, and restored after.

    Algorithms draw from their ClientInfo generators; this covers what cannot take a
    generator (dropout, a library's own draws), so that such draws too are the same
    in whichever process, worker or Flower node, and in whatever order, the update runs.
    """
    first = infos[0]
    devices = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(derived_seed(first.seed, "client-global", first.stage, first.round, *(i.client_id for i in infos)))
        yield


def update_clients(
    algorithm: Algorithm,
    message: Broadcast,
    states: Sequence[State],
    datas: Sequence[ClientData],
    infos: Sequence[ClientInfo],
    vectorize: bool,
    lanes: Lanes | None = None,
) -> list[tuple[Reply, State]]:
    """Each client's (reply, new state), in the order given.

    The clients train together when the algorithm can (``client_update_many``) and
    ``vectorize`` is on; else up to ``lanes.count`` at once in threads where the algorithm's
    updates allow it (``run.concurrent_clients``, :mod:`fedprior.runtime.concurrent`), one by
    one otherwise: the numbers are the same. A client with no examples (a Dirichlet
    partition can leave one empty) is not trained: it replies with no tensors and
    ``num_examples = 0``, keeps its state, and is left out of the aggregation. Each update
    runs under :func:`global_rng`; concurrent updates, which must not draw from torch's
    global generator (``Algorithm.thread_safe_updates``), run under one for them all, so
    that what they leave in it (a rebuilt model's init) is undone as after serial ones.
    """
    results: list[tuple[Reply, State] | None] = [None] * len(datas)
    active = [i for i, data in enumerate(datas) if not is_empty(data)]
    for i in set(range(len(datas))) - set(active):
        results[i] = (Reply({}, 0, {}, infos[i].client_id), states[i])
    if active:
        pick = lambda items: [items[i] for i in active]  # noqa: E731
        if vectorize and algorithm.client_update_many is not None:
            with global_rng(pick(infos)):
                out = algorithm.client_update_many(message, pick(states), pick(datas), pick(infos))
        elif lanes is not None and lanes.count > 1 and len(active) > 1 and algorithm.thread_safe_updates:
            with global_rng(pick(infos)):
                out = lanes.run([functools.partial(algorithm.client_update, message, states[i], datas[i], infos[i]) for i in active])
        else:
            out = []
            for i in active:
                with global_rng([infos[i]]):
                    out.append(algorithm.client_update(message, states[i], datas[i], infos[i]))
        for i, (reply, state) in zip(active, out, strict=True):
            results[i] = (Reply(reply.arrays, reply.num_examples, reply.metrics, infos[i].client_id), state)
    return results  # type: ignore[return-value]


class InProcessClients:
    """Every client simulated in this process; their states kept here (and checkpointed with the server).

    ``states``: a :class:`~fedprior.runtime.client_store.ClientStates` store is used as it is (in memory up to a size,
    on disk beyond: what :func:`~fedprior.runtime.simulation.simulate` gives), any other mapping is copied into a dict.
    ``lanes``: up to ``lanes.count`` updates of a round at once (``run.concurrent_clients``; None: one at a time).
    """

    def __init__(
        self,
        algorithm: Algorithm,
        client_data: Callable[[int], ClientData],
        num_clients: int,
        states: Mapping[int, State] | None = None,
        lanes: Lanes | None = None,
    ) -> None:
        self.algorithm, self.client_data, self.num_clients, self.lanes = algorithm, client_data, num_clients, lanes
        self._states: MutableMapping[int, State] = states if isinstance(states, ClientStates) else dict(states or {})

    def prepare(self) -> None:
        pass

    def update(self, message: Broadcast, info: RoundInfo, step: int, clients: list[int], vectorize: bool) -> tuple[list[Reply], dict[int, str]]:
        results = update_clients(
            self.algorithm,
            message,
            [self._states.get(c, {}) for c in clients],
            [self.client_data(c) for c in clients],
            [info.for_client(c) for c in clients],
            vectorize,
            self.lanes,
        )
        for client_id, (_, state) in zip(clients, results, strict=True):
            if state:
                self._states[client_id] = state
        return [reply for reply, _ in results], {}

    def states(self) -> Mapping[int, State]:
        return self._states

    def losses(self, state: State, info: RoundInfo, step: int, clients: list[int]) -> tuple[dict[int, float], dict[int, str]]:
        return {c: global_loss(self.algorithm, state, self.client_data(c)) for c in clients}, {}
