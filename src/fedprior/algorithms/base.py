"""The algorithm interface: pure functions the runtimes drive.

An algorithm is built by a factory (``fedavg(task, runtime, lr=...)``) that captures its
hyperparameters and returns an :class:`Algorithm`: a bundle of pure functions, in
the manner of optax's ``init / update``. It never knows which runtime drives it,
opens no sockets and reads no global state. Everything that crosses the network is
a :class:`Broadcast` (server -> client) or a :class:`Reply` (client -> server): named
tensors plus small scalar metadata, which map one to one onto Flower's
ArrayRecord / ConfigRecord / MetricRecord. State is explicit and flat, a mapping of
names to tensors, so the runtime can checkpoint it, replay it, and keep a client's
state in a Flower node's Context.

What the runtimes provide, so that all four methods fit:

- per-client persistent state: ``client_update`` receives the state it returned the
  last time this client was sampled (``{}`` the first time);
- extra uploads beside weights: a Reply carries any named tensors;
- custom aggregation and server-side training: ``aggregate`` is server code and may
  train (it gets a seeded generator through :class:`RoundInfo`);
- more than one stage: ``stages`` lists them, each with its own round count and
  participation, and every function learns the stage from its RoundInfo; a stage may be
  server work alone (``Stage.server_only``);
- frozen parts never sent: whatever both sides can rebuild from the :class:`Task`
  (text features, a fixed classifier) lives in the factory's closure, not in a Broadcast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import torch

from fedprior.errors import ConfigError
from fedprior.seeding import torch_generator
from fedprior.task import Task as Task  # re-exported: the Python API documents it here

Arrays = dict[str, torch.Tensor]
"""Named tensors: model parameters, control variates, statistics."""

Scalars = dict[str, bool | int | float | str]
"""Small metadata beside the tensors (a Flower ConfigRecord / MetricRecord)."""

State = dict[str, torch.Tensor]
"""Server or client state: flat, named tensors (scalars as 0-d tensors)."""

ClientData = dict[str, torch.Tensor]
"""A client's local data by field, e.g. ``{"x": ..., "y": ...}``; only the fields an algorithm declares."""


@dataclass(frozen=True)
class Broadcast:
    """What the server sends the sampled clients in a round."""

    arrays: Arrays
    config: Scalars = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What a client sends back: tensors, its example count (aggregation weight) and metrics."""

    arrays: Arrays
    num_examples: int
    metrics: dict[str, float] = field(default_factory=dict)
    client_id: int = -1


@dataclass(frozen=True)
class Stage:
    """One phase of training: ``rounds``/``fraction`` of None take ``federation.rounds``/``federation.fraction``.

    ``server_only``: no client takes part (nothing is sampled or broadcast); each round
    is server work alone, ``aggregate(state, [], info)`` (e.g. MFCL's discriminator
    training, one epoch per round, so it shows progress and is checkpointed like any round).
    """

    name: str
    rounds: int | None = None
    fraction: float | None = None
    evaluate: bool = True
    server_only: bool = False


@dataclass(frozen=True)
class Runtime:
    """What the run hands every algorithm's factory beside its hyperparameters, as one value: ``factory(task, runtime, *, ...)``.

    ``local_epochs`` and ``batch_size`` are ``[federation]``'s (they mean the same for every algorithm: an algorithm
    with batches of its own, such as the semi-supervised ones, reads ``local_epochs`` only); ``device`` is ``run.device``
    resolved, where the factory builds its models and computes (its States and Replies stay on the CPU); ``precision``
    and ``compile`` are ``run.precision`` (``'fp32'`` or ``'bf16'``: :mod:`fedprior.algorithms.pieces.precision`) and
    ``run.compile``. The registry asks a factory for ``'bf16'`` or ``compile = True`` only where it declares them with
    :func:`runtime_options` (a ConfigError otherwise, before any data loads).
    """

    local_epochs: int
    batch_size: int
    device: torch.device = torch.device("cpu")
    precision: Literal["fp32", "bf16"] = "fp32"
    compile: bool = False
    client_duration: Callable[[int, int, int], float] | None = None
    """Simulated seconds from client ``c``'s download of model version ``v`` (``b`` bytes each way) to the arrival of its
    update, ``client_duration(c, v, b)``, for the algorithms that run on a simulated clock (``fedbuff``, ``fedasync``:
    :mod:`~fedprior.algorithms.pieces.async_schedule`): the ``[system]`` section's device model
    (``experiments.client_side.runtime_of``); None: every client takes 1.0."""


RUNTIME_OPTIONS = ("precision", "compile")
"""What a factory may declare it carries out (:func:`runtime_options`): ``run.precision = 'bf16'`` and ``run.compile = true``."""


def runtime_options(*options: Literal["precision", "compile"]) -> Callable[[Callable], Callable]:
    """Declare which of :data:`RUNTIME_OPTIONS` a factory carries out: ``@runtime_options("precision", "compile")``.

    ``precision``: its loops run forward passes under ``autocast(runtime.device, runtime.precision)``; ``compile``: it
    compiles the network its clients train (``GlobalModel(compile=...)``). A factory that declares neither is given
    ``'fp32'`` and ``False`` only (the registry refuses the others with a ConfigError naming the algorithms that accept them).
    """
    unknown = [o for o in options if o not in RUNTIME_OPTIONS]
    if unknown:
        raise ValueError(f"runtime_options: unknown option(s) {unknown}; accepted: {', '.join(RUNTIME_OPTIONS)}")

    def mark(factory: Callable) -> Callable:
        factory.runtime_options = frozenset(options)  # type: ignore[attr-defined]
        return factory

    return mark


@dataclass(frozen=True)
class RoundInfo:
    """Where the run stands: the run seed, the stage and the 1-based round within it."""

    seed: int
    stage: str
    round: int
    step_budgets: tuple[tuple[int, int], ...] = field(default=(), kw_only=True)
    """(client id, local steps) of the clients that may take at most that many mini-batch steps this round (partial work under
    a deadline, ``fedprior.runtime.system_round``); a client not listed does its full local work. Keyword-only, so that
    ``ClientInfo(seed, stage, round, client_id)`` keeps its positional form."""

    def generator(self, *keys: str | int) -> torch.Generator:
        """A generator for server-side randomness in this round (e.g. server training)."""
        return torch_generator(self.seed, "server", self.stage, self.round, *keys)

    def for_client(self, client_id: int) -> ClientInfo:
        if self.step_budgets:
            steps = dict(self.step_budgets).get(client_id)
            return ClientInfo(seed=self.seed, stage=self.stage, round=self.round, client_id=client_id, local_steps=steps)
        return ClientInfo(seed=self.seed, stage=self.stage, round=self.round, client_id=client_id)


@dataclass(frozen=True)
class ClientInfo(RoundInfo):
    """RoundInfo of one client's update; its generator is that client's own stream for the round.

    ``local_steps``: the most mini-batch steps the update may take this round (None: its full local work), for an algorithm
    that declares :attr:`Algorithm.local_step_budget`: the variable local work of FedProx (Li et al., "Federated Optimization
    in Heterogeneous Networks", MLSys 2020, Sec. 3, gamma-inexact solutions), given by a round deadline (``system.partial_work``).
    """

    client_id: int = -1
    local_steps: int | None = None

    def generator(self, *keys: str | int) -> torch.Generator:
        return torch_generator(self.seed, "client", self.stage, self.round, self.client_id, *keys)


ClientUpdate = Callable[[Broadcast, State, ClientData, ClientInfo], tuple[Reply, State]]
ClientUpdateMany = Callable[[Broadcast, Sequence[State], Sequence[ClientData], Sequence[ClientInfo]], list[tuple[Reply, State]]]


@dataclass(frozen=True)
class Algorithm:
    """A federated algorithm as pure functions (see the module docstring).

    - ``init(info) -> State``: the server's initial state (``info.generator()`` seeds it);
    - ``broadcast(state, info) -> Broadcast``: what the sampled clients receive;
    - ``client_update(broadcast, client_state, data, info) -> (Reply, client_state)``;
    - ``aggregate(state, replies, info) -> State``: the next server state (may train);
    - ``evaluate(state, data) -> metrics``: test metrics of the global model, at least ``accuracy``
      (``metrics.logit_metrics`` gives accuracy, loss, macro_f1 and class_accuracy, a list);
    - ``client_update_many``: optional; many clients at once, equal to mapping ``client_update``;
    - ``inputs``: the client data fields it reads; a client is given those and nothing else,
      so an unsupervised algorithm never sees a label;
    - ``diagnostics``: fields a client is also given *for reporting only* (e.g. ``y_unlabeled``, to
      measure pseudo-label accuracy); no training step may depend on them (semi_supervised.py,
      tested by training with shuffled values);
    - ``stages``: its phases, in order;
    - ``evaluation_inputs``: fields beside the test set's ``x`` and ``y`` that ``evaluate`` reads from
      its data; ``("x_train", "y_train")`` is the labelled training pool (every image the clients hold,
      with its label), which the runtime adds to the evaluation data (``experiments.build``): the
      self-supervised methods' linear evaluation trains its dense layer on it (the MFCL paper's Sec. 3).
      No client ever receives it;
    - ``validate(state) -> metrics``: optional; the global model's metrics on a validation split,
      keys prefixed ``validation_`` (``run.model_selection = 'validation'``, set by the runtime:
      ``experiments.client_side.with_validation``). The round loop records them beside the test metrics;
    - ``thread_safe_updates``: ``client_update`` may run for several clients at once, in threads
      (``run.concurrent_clients``, ``fedprior.runtime.concurrent``): it draws only from its ``ClientInfo``
      generators, never from torch's global generator (which threads share: no dropout, no
      ``data.augment.seeded`` or kornia augmentation; a model built and then overwritten may draw), and
      what it keeps between calls is kept per lane (``GlobalModel.receive``'s models are). False (the
      default): its updates run one at a time, each under a reseeded global generator. ``with_`` keeps
      the flag: a variant whose new ``client_update`` is not thread-safe sets it back to False;
    - ``batch_shapes``: ``"fixed"`` (the default) where the client updates train on mini-batches of one size
      (the last of an epoch aside), ``"varying"`` where their batch shapes change from client to client and
      round to round (full-batch steps on a client's data, or on the subset whose pseudo-labels pass a
      threshold). On CUDA, ``run.cudnn_benchmark = 'auto'`` lets cuDNN autotune only ``"fixed"`` shapes
      (:func:`fedprior.runtime.device.cudnn_autotune`): it re-times its algorithms for every new shape;
    - ``mean_aggregate``: ``aggregate`` reads the replies only through their example-weighted mean (each float
      array's mean with weights ``num_examples``, as one Reply whose ``num_examples`` is their total):
      ``aggregate(state, replies, info) == aggregate(state, [mean], info)``, as FedAvg's does (McMahan et al.,
      AISTATS 2017, Algorithm 1). Secure aggregation, which gives the server that mean and never one reply
      (``fedprior.flower.secagg``), runs such algorithms only. ``with_`` that replaces ``aggregate`` sets it back
      to False unless it says otherwise (a server optimizer on the mean keeps it: ``with_server_optimizer``).
      Client-level DP (``privacy.dp``, :mod:`~fedprior.algorithms.pieces.differential_privacy`) runs such algorithms
      only too, where their replies are the clients' models: it hands ``aggregate`` the noised mean of clipped updates;
    - ``secure_sum``: ``aggregate`` also accepts, instead of the replies, one Reply holding their sum: the sum of the
      clients' clipped updates w_k - w_t and of their bits (client-side DP-FedAvg, ``privacy.dp = 'client'``: the clients
      clip, SecAgg+ sums, the server adds the noise; :func:`~fedprior.algorithms.pieces.differential_privacy.secure_sum_reply`).
      SecAgg+ runs such an algorithm by summing those (``fedprior.flower.secagg``). ``with_`` that replaces ``aggregate``
      sets it back to False unless it says otherwise;
    - ``evaluate_client(state, client, data) -> metrics``: optional, for a personalized method; client ``client``'s own model
      (the server state's ``eval.<client>.`` entries, :mod:`~fedprior.algorithms.pieces.personal`, and what is shared) scored on
      ``data``, its local test split (``partition.local_test_fraction``). The runtime asks it for the clients whose entries the
      state holds; an algorithm without it has each client's split scored by ``evaluate``, the global model;
    - ``round_metrics(state) -> metrics``: optional; numbers the server reports after every round's aggregation
      (client-level DP's epsilon, noise std and clip norm), recorded in the round's record (log line, metrics.jsonl,
      TensorBoard, MLflow) by every runtime;
    - ``local_step_budget``: ``client_update`` takes at most ``info.local_steps`` mini-batch steps where that is set (stopping in
      the middle of an epoch), so a straggler can do the work that fits before a round deadline (``system.partial_work``);
      False (the default): the runtime refuses partial work for it;
    - ``aggregates_no_reply``: ``aggregate`` runs in a round in which no client trained (none sampled, as Poisson sampling
      allows, or none holding data), with no reply; False (the default): such a round keeps the state. Client-level DP
      sets it: DP-FedAvg releases the noised mean of no updates there, a release like any other;
    - ``dispatch(state, info) -> client ids``: optional; the algorithm chooses the round's clients itself, in place of
      ``federation.sampler``'s draw (which it then must be ``'uniform'``, unread): asynchronous aggregation, whose clients are
      those that download the current model on its simulated clock (:mod:`~fedprior.algorithms.engines.asynchronous`).
      Its ``aggregate`` runs every round, replies or not (a step may apply updates computed in earlier rounds).
    """

    name: str
    inputs: tuple[str, ...]
    init: Callable[[RoundInfo], State]
    broadcast: Callable[[State, RoundInfo], Broadcast]
    client_update: ClientUpdate
    aggregate: Callable[[State, Sequence[Reply], RoundInfo], State]
    evaluate: Callable[[State, ClientData], dict[str, float | list[float]]]
    client_update_many: ClientUpdateMany | None = None
    stages: tuple[Stage, ...] = (Stage("federated"),)
    diagnostics: tuple[str, ...] = ()
    evaluation_inputs: tuple[str, ...] = ()
    validate: Callable[[State], dict[str, float]] | None = None
    thread_safe_updates: bool = False
    batch_shapes: Literal["fixed", "varying"] = "fixed"
    mean_aggregate: bool = False
    secure_sum: bool = False
    round_metrics: Callable[[State], Mapping[str, float | str]] | None = None
    evaluate_client: Callable[[State, int, ClientData], dict[str, float | list[float]]] | None = None
    aggregates_no_reply: bool = False
    local_step_budget: bool = False
    dispatch: Callable[[State, RoundInfo], Sequence[int]] | None = None

    def with_(self, **changes) -> Algorithm:
        """A copy with some functions replaced (how variants are composed); a new ``aggregate`` is not a mean unless ``mean_aggregate`` says so."""
        if "aggregate" in changes:
            changes.setdefault("mean_aggregate", False)
            changes.setdefault("secure_sum", False)
        return replace(self, **changes)

    @classmethod
    def evaluation_only(
        cls, name: str, init: Callable[[RoundInfo], State], evaluate: Callable[[State, ClientData], dict[str, float | list[float]]], **fields
    ) -> Algorithm:
        """An algorithm with no rounds and no clients: ``init`` builds its model, ``evaluate`` scores it (a baseline or a control)."""

        def unused(*args):
            raise RuntimeError(f"{name} has no rounds")

        return cls(
            name=name,
            inputs=(),
            init=init,
            broadcast=lambda state, info: Broadcast({}),
            client_update=unused,
            aggregate=unused,
            evaluate=evaluate,
            stages=(),
            **fields,
        )


MEAN_AGGREGATING = ("fedavg", "fedprox", "moon", "fedntd", "fedavgm", "fedadagrad", "fedadam", "fedyogi")
"""Shipped algorithms whose ``aggregate`` reads its replies only through their example-weighted mean
(:attr:`Algorithm.mean_aggregate`): what DP-FedAvg and SecAgg+ accept, named when they refuse another."""


def client_fields(algorithm: Algorithm) -> tuple[str, ...]:
    """The data fields a client of ``algorithm`` is given: those it trains on and those it only reports diagnostics from."""
    return (*algorithm.inputs, *algorithm.diagnostics)


def require_mean_aggregate(algorithm: Algorithm, option: str, reason: str) -> None:
    """ConfigError ``'{option}: algorithm NAME {reason}; accepted: ...'`` unless ``algorithm.mean_aggregate``."""
    if not algorithm.mean_aggregate:
        raise ConfigError(
            f"{option}: algorithm '{algorithm.name}' {reason}; accepted: {', '.join(MEAN_AGGREGATING)} and other algorithms whose "
            "aggregate is the mean of their clients' replies (Algorithm.mean_aggregate; docs/privacy-robustness.md)"
        )
