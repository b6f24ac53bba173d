"""The server side of fedprior on Flower: the in-process round loop, over Flower's Grid.

:func:`federate` is the in-process runtime's round loop
(:func:`fedprior.runtime.simulation.run_rounds`) with :class:`FlowerClients` as its
client pool: per round the loop samples the same client ids, the pool sends each
node hosting sampled clients one TRAIN message (the broadcast, the RoundInfo, those
client ids) and collects the replies, and the loop sorts them by client id (float
sums depend on order) and calls the algorithm's own ``aggregate`` (custom
aggregation and server-side training included) and ``evaluate``. So with the same
config and seed it gives the in-process runtime's numbers. :func:`federate_experiment`
calls it with what a built experiment holds; every way of reaching the SuperNodes
(:mod:`fedprior.flower.runtime`, :mod:`fedprior.flower.simulation`, :mod:`fedprior.flower.local`)
goes through it.

Faults: a reply that carries an error (the ClientApp raised, the node went away)
or that has not come when ``round_timeout`` runs out fails its clients; they are
listed in the round's metrics (``failed_clients``, ``failures``) and the round
aggregates the replies that came. A round where every sampled client failed keeps
the previous state and says so (``aggregated: false``).

Checkpoints (the loop's): after every round and after the initial evaluation the
server state and progress are written atomically to the run directory; client states
stay on their nodes. Given a loaded checkpoint as ``start``, training continues
after its last round.

A sampler that ranks clients by their loss (``federation.sampler = 'power-of-choice'``) asks
through :meth:`FlowerClients.losses`: one EVALUATE message with the server state per node
hosting candidates, answered by :func:`fedprior.runtime.clients.global_loss` on the node, the
function the in-process pool calls, so the same clients are chosen.

Which node hosts which client is asked, not assumed: before the first round and
whenever new nodes appear (a restarted SuperNode), the server sends them a QUERY
and maps the client ids they answer to their node ids.

The ServerApp that ``flwr run`` loads, which builds experiments from configs, is one
layer up: :mod:`fedprior.experiments.flower_app` (so this runtime never imports the
experiments that use it). Its run config keys and the file it leaves for
``fedprior flower local`` are defined here, where both sides read them.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flwr.app import Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fedprior.algorithms.base import Algorithm, ClientData, Reply, RoundInfo, State
from fedprior.errors import FedpriorError
from fedprior.flower.records import (
    DATA_HINT,
    RoundOrder,
    hint_record,
    loss_content,
    read_hosted_content,
    read_losses_content,
    read_reply_content,
    train_content,
)
from fedprior.flower.secagg import SecAggOptions, require_secure_summable, secure_round
from fedprior.runtime.checkpoint import RunState
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import SimulationResult, run_rounds

log = logging.getLogger("fedprior.flower")


@dataclass
class Settings:
    """How the server talks to the nodes.

    - ``round_timeout``: seconds to wait for a round's replies; the missing ones fail;
    - ``min_nodes``: nodes to wait for before the first round (``node_wait`` seconds at most);
    - ``data_hint``: a folder holding every client's data, for nodes without their own
      ``data-dir`` (Flower's simulation, where server and nodes share a disk);
    - ``run_key``: names the run on the nodes (their client states are kept per run);
    - ``poll``: seconds between two looks for replies;
    - ``secagg``: aggregate each round under Flower's SecAgg+ (:mod:`fedprior.flower.secagg`), with these options;
    - ``query_timeout``: seconds to wait for a new node to say which clients it hosts (600, whatever ``round_timeout`` is: a round
      deadline, ``system.deadline``, may be seconds). A node's first answer includes its start (on Flower's simulation a Ray actor importing torch and fedprior: about
      30 s on a quiet 2-core machine, past 120 s at a load of 12, where a shorter wait failed the node's clients in round 1).
    """

    round_timeout: float = 600.0
    min_nodes: int = 1
    node_wait: float = 120.0
    data_hint: str = ""
    run_key: str = "fedprior"
    poll: float = 0.05
    query_timeout: float = 600.0
    secagg: SecAggOptions | None = None


def exchange(grid: Grid, messages: list[Message], timeout: float, poll: float) -> tuple[dict[int, Message], float]:
    """Push ``messages`` and pull their replies until all came or ``timeout`` ran out.

    Returns (reply by position in ``messages``, seconds waited). Replies are matched
    by ``reply_to_message_id``, which also holds for the errors the SuperLink makes
    for a node that went away.
    """
    if not messages:
        return {}, 0.0
    started = time.monotonic()
    ids = list(grid.push_messages(messages))
    position = {mid: i for i, mid in enumerate(ids) if mid}
    waiting = set(position)
    replies: dict[int, Message] = {}
    while waiting and time.monotonic() - started < timeout:
        for reply in grid.pull_messages(list(waiting)):
            mid = reply.metadata.reply_to_message_id
            if mid in waiting:
                replies[position[mid]] = reply
                waiting.discard(mid)
        if waiting:
            time.sleep(poll)
    return replies, time.monotonic() - started


def error_reason(reply: Message) -> str:
    error = reply.error
    return f"Flower error {error.code}: {error.reason}"


class NodeDirectory:
    """Which node hosts which fedprior client, kept current as nodes come and go."""

    def __init__(self, grid: Grid, settings: Settings) -> None:
        self.grid, self.settings = grid, settings
        self.hosts: dict[int, int] = {}
        self.ranges: dict[int, range] = {}  # node -> the clients it hosts, where it said so as a range (virtual nodes of a large population)
        self.nodes: set[int] = set()

    def host(self, client_id: int) -> int | None:
        """The node hosting ``client_id`` (None: no connected node): a listed client's, else the first range holding it."""
        if client_id in self.hosts:
            return self.hosts[client_id]
        return next((node for node, clients in sorted(self.ranges.items()) if client_id in clients), None)

    def wait_for_nodes(self) -> None:
        deadline = time.monotonic() + self.settings.node_wait
        while len(list(self.grid.get_node_ids())) < self.settings.min_nodes:
            if time.monotonic() > deadline:
                found = len(list(self.grid.get_node_ids()))
                raise FedpriorError(f"only {found} of {self.settings.min_nodes} SuperNodes connected within {self.settings.node_wait:.0f} s")
            time.sleep(0.5)

    def refresh(self) -> None:
        """Forget nodes that left; ask new nodes which clients they host."""
        live = set(self.grid.get_node_ids())
        for node in self.nodes - live:
            log.warning("node %d is gone; its clients fail until a node hosting them joins", node)
        self.hosts = {c: n for c, n in self.hosts.items() if n in live}
        self.ranges = {n: r for n, r in self.ranges.items() if n in live}
        self.nodes &= live
        new = sorted(live - self.nodes)
        if not new:
            return
        content = RecordDict({DATA_HINT: hint_record(self.settings.data_hint)})
        ttl = self.settings.query_timeout + 30.0
        messages = [Message(content=content, dst_node_id=n, message_type=MessageType.QUERY, ttl=ttl) for n in new]
        replies, _ = exchange(self.grid, messages, self.settings.query_timeout, self.settings.poll)
        for i, node in enumerate(new):
            reply = replies.get(i)
            if reply is None or reply.has_error():
                log.warning(
                    "node %d did not say which clients it hosts (%s); asking again next round", node, error_reason(reply) if reply is not None else "no reply"
                )
                continue
            hosted = read_hosted_content(reply.content)
            if isinstance(hosted, range):
                self.ranges[node] = hosted
            else:
                for client_id in hosted:
                    self.hosts[client_id] = node
            self.nodes.add(node)


class FlowerClients:
    """The client pool of the round loop on Flower: one TRAIN message per node hosting sampled clients.

    Client states stay on the nodes (their Context and disk), so none are checkpointed here.
    """

    def __init__(self, grid: Grid, num_clients: int, settings: Settings) -> None:
        self.grid, self.num_clients, self.settings = grid, num_clients, settings
        self.directory = NodeDirectory(grid, settings)

    def prepare(self) -> None:
        self.directory.wait_for_nodes()

    def states(self) -> dict:
        return {}

    def hosts(self, clients: list[int]) -> tuple[dict[int, list[int]], dict[int, str]]:
        """``clients`` by the node hosting them (the directory refreshed first), and those no connected node hosts."""
        self.directory.refresh()
        failures: dict[int, str] = {}
        by_node: dict[int, list[int]] = {}
        for c in clients:
            node = self.directory.host(c)
            if node is None:
                failures[c] = "no connected node hosts this client"
            else:
                by_node.setdefault(node, []).append(c)
        return by_node, failures

    def losses(self, state: State, info: RoundInfo, step: int, clients: list[int]) -> tuple[dict[int, float], dict[int, str]]:
        """The candidates' losses of the global model: one EVALUATE message with the server state per node hosting some."""
        settings = self.settings
        by_node, failures = self.hosts(clients)
        nodes = sorted(by_node)
        messages = [
            Message(
                content=loss_content(state, RoundOrder(info, step, tuple(by_node[n]), settings.run_key), settings.data_hint),
                dst_node_id=n,
                message_type=MessageType.EVALUATE,
                group_id=f"{info.stage}/{info.round}/candidates",
                ttl=settings.round_timeout + 30.0,
            )
            for n in nodes
        ]
        answers, _ = exchange(self.grid, messages, settings.round_timeout, settings.poll)
        losses: dict[int, float] = {}
        for i, node in enumerate(nodes):
            answer = answers.get(i)
            if answer is None or answer.has_error():
                reason = error_reason(answer) if answer is not None else f"no reply within {settings.round_timeout:g} s"
                failures.update({c: reason for c in by_node[node]})
                continue
            got, failed = read_losses_content(answer.content)
            losses.update({c: v for c, v in got.items() if c in by_node[node]})
            failures.update(failed)
        warn_failures(info, failures, len(clients), "candidates could not give their loss")
        return losses, failures

    def update(self, message, info: RoundInfo, step: int, clients: list[int], vectorize: bool) -> tuple[list[Reply], dict[int, str]]:
        settings = self.settings
        by_node, failures = self.hosts(clients)
        if settings.secagg is not None:
            return self.secure_update(message, info, step, by_node, failures, vectorize)
        nodes = sorted(by_node)
        messages = [
            Message(
                content=train_content(message, RoundOrder(info, step, tuple(by_node[n]), settings.run_key, vectorize), settings.data_hint),
                dst_node_id=n,
                message_type=MessageType.TRAIN,
                group_id=f"{info.stage}/{info.round}",
                ttl=settings.round_timeout + 30.0,  # a late node does not train for a round that is over
            )
            for n in nodes
        ]
        answers, _ = exchange(self.grid, messages, settings.round_timeout, settings.poll)
        replies: list[Reply] = []
        for i, node in enumerate(nodes):
            answer = answers.get(i)
            if answer is None:
                failures.update({c: f"no reply within {settings.round_timeout:g} s" for c in by_node[node]})
            elif answer.has_error():
                failures.update({c: error_reason(answer) for c in by_node[node]})
            else:
                got, failed = read_reply_content(answer.content)
                replies.extend(r for r in got if r.client_id in by_node[node])
                failures.update(failed)
                missing = set(by_node[node]) - {r.client_id for r in got} - set(failed)
                failures.update({c: "the node's reply left this client out" for c in missing})
        warn_failures(info, failures, len(clients))
        return replies, failures

    def secure_update(
        self, message, info: RoundInfo, step: int, by_node: dict[int, list[int]], failures: dict[int, str], vectorize: bool
    ) -> tuple[list[Reply], dict[int, str]]:
        """The round under SecAgg+: one Reply, the aggregate of every answering node (client id ``SECURE_AGGREGATE``)."""
        settings = self.settings
        assert settings.secagg is not None
        clients = len(failures) + sum(len(c) for c in by_node.values())
        if len(by_node) < 2:
            reason = f"SecAgg+ needs the round's clients on at least 2 SuperNodes; they are all on node {', '.join(map(str, by_node)) or 'none'}"
            failures.update({c: reason for hosted in by_node.values() for c in hosted})
            warn_failures(info, failures, clients)
            return [], failures
        contents = {
            n: train_content(message, RoundOrder(info, step, tuple(hosted), settings.run_key, vectorize), settings.data_hint) for n, hosted in by_node.items()
        }
        outcome = secure_round(self.grid, message, contents, by_node, settings.secagg, step, settings.round_timeout)
        failures.update(outcome.failures)
        warn_failures(info, failures, clients)
        return ([outcome.reply] if outcome.reply is not None else []), failures


def warn_failures(info: RoundInfo, failures: dict[int, str], clients: int, what: str = "clients failed") -> None:
    if failures:
        log.warning(
            "%s round %d: %d of %d %s: %s",
            info.stage,
            info.round,
            len(failures),
            clients,
            what,
            "; ".join(f"{c}: {r}" for c, r in sorted(failures.items())),
        )


def federate(
    grid: Grid,
    algorithm: Algorithm,
    test_data: ClientData,
    loop: RoundLoop,
    *,
    num_clients: int,
    checkpoint_path: Path | None = None,
    start: RunState | None = None,
    on_round: Callable[[dict[str, Any]], None] | None = None,
    settings: Settings | None = None,
    checkpoint_metadata: dict[str, str] | None = None,
) -> SimulationResult:
    """Run ``algorithm`` with its clients on the grid's SuperNodes: the round loop of the in-process runtime, as ``loop`` says."""
    if settings is not None and settings.secagg is not None:
        require_secure_summable(algorithm)
        if not settings.secagg.max_weight:
            raise ValueError("settings.secagg.max_weight: set it to the federation's example count (federate_experiment does)")
    return run_rounds(
        algorithm,
        FlowerClients(grid, num_clients, settings or Settings()),
        test_data,
        loop,
        checkpoint_path=checkpoint_path,
        start=start,
        on_round=on_round,
        checkpoint_metadata=checkpoint_metadata,
    )


def federate_experiment(
    grid, experiment, run, start: RunState | None, on_round: Callable[[dict[str, Any]], None] | None, settings, checkpoint_metadata: dict[str, str] | None
) -> SimulationResult:
    """The round loop of ``experiment`` on the grid's SuperNodes, with the round-loop settings its config gives
    (``experiment.round_loop()``, the value the in-process runner passes to ``simulate``); checkpoints go to ``run.checkpoint``.
    Under SecAgg+ with no ``max_weight`` of its own, a node weighs at most the federation's example count. ``system.deadline``,
    where set, is the round timeout (``Settings.round_timeout``, wall-clock seconds: on Flower the clients' real time counts,
    not a simulated one): a node whose reply has not come by then fails its clients for the round, and the round aggregates
    the others (docs/system-heterogeneity.md)."""
    deadline = experiment.config.system.deadline
    if deadline is not None:
        settings = replace(settings if settings is not None else Settings(), round_timeout=float(deadline))
    if settings is not None and settings.secagg is not None:  # a robust rule or privacy.dp under SecAgg+: refused naming it
        from fedprior.algorithms.pieces.private_aggregation import check_private_aggregation

        check_private_aggregation(experiment.config.algorithm.robust_rule(), experiment.config.privacy.dp, secagg=True)
    if settings is not None and settings.secagg is not None and not settings.secagg.max_weight:
        total = sum(experiment.client_size(c) for c in range(experiment.task.num_clients))
        settings = replace(settings, secagg=replace(settings.secagg, max_weight=float(total)))
    return federate(
        grid,
        experiment.algorithm,
        experiment.test,
        experiment.round_loop(),
        num_clients=experiment.task.num_clients,
        checkpoint_path=run.checkpoint,
        start=start,
        on_round=on_round,
        settings=settings,
        checkpoint_metadata=checkpoint_metadata,
    )


def run_key(run) -> str:
    """A name for the run on the nodes: the run directory's name and a hash of its absolute path."""
    digest = hashlib.sha256(str(run.path.resolve()).encode()).hexdigest()[:12]
    return f"{run.path.name}-{digest}"


# -- what the ServerApp (fedprior.experiments.flower_app) reads and leaves ------------------------

SERVER_DONE = "server-done.json"
"""In serve mode, the file (under ``<run dir>/flower``) through which the ServerApp tells ``flower local`` it is done."""

RUN_CONFIG_DEFAULTS: dict[str, Any] = {
    "preset": "fedavg-cnn",
    "overrides": "",
    "run-dir": "",
    "runs-dir": "runs",
    "mode": "standalone",
    "runtime": "flower-sim",
    "round-timeout": 600.0,
    "min-nodes": 1,
    "node-wait": 120.0,
    "run-key": "",
    "export-data": True,
    "secagg": False,
    "secagg-shares": 3.0,
    "secagg-threshold": 2.0,
    "secagg-clipping-range": 8.0,
    "secagg-quantization-range": 2**22,
    "secagg-modulus-range": 2**32,
    "secagg-max-weight": 0.0,
}
"""The run config keys the ServerApp reads, with their defaults (pyproject.toml's [tool.flwr.app.config])."""


def settings_from_run_config(run_config: dict[str, Any], **defaults: Any) -> Settings:
    s = Settings(**defaults)
    for key, attr, cast in (
        ("round-timeout", "round_timeout", float),
        ("min-nodes", "min_nodes", int),
        ("node-wait", "node_wait", float),
        ("run-key", "run_key", str),
    ):
        if run_config.get(key) not in (None, ""):
            setattr(s, attr, cast(run_config[key]))
    if str(run_config.get("secagg", False)).lower() in ("true", "1"):
        s.secagg = secagg_from_run_config(run_config)
    return s


SECAGG_KEYS = {
    "secagg-shares": ("shares", float),
    "secagg-threshold": ("threshold", float),
    "secagg-clipping-range": ("clipping_range", float),
    "secagg-quantization-range": ("quantization_range", int),
    "secagg-modulus-range": ("modulus_range", int),
    "secagg-max-weight": ("max_weight", float),
}
"""Run config keys of SecAgg+'s options (:class:`~fedprior.flower.secagg.SecAggOptions`) and their fields."""


def secagg_from_run_config(run_config: dict[str, Any]) -> SecAggOptions:
    given = {attr: cast(run_config[key]) for key, (attr, cast) in SECAGG_KEYS.items() if run_config.get(key) not in (None, "")}
    return SecAggOptions(**given).check()


def secagg_run_config(options: SecAggOptions) -> dict[str, Any]:
    """The run config that turns SecAgg+ on with ``options`` (what ``fedprior flower local --secagg`` submits)."""
    return {"secagg": True, **{key: cast(getattr(options, attr)) for key, (attr, cast) in SECAGG_KEYS.items()}}
