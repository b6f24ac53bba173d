"""The Flower ClientApp that runs any fedprior algorithm's client side.

A SuperNode hosts one or more fedprior clients (a site holding several clients'
data; in Flower's simulation, one virtual node per client). Its ClientApp answers
two kinds of message from :mod:`fedprior.flower.server_app`:

- QUERY: which fedprior client ids do you host? In simulation that is the node's
  ``partition-id`` (from its node config); on a real SuperNode, the ids listed in its
  data folder (``node.json``, written by :mod:`fedprior.flower.export`).
- TRAIN: the round's broadcast, the RoundInfo and the ids of this node's sampled
  clients. Each of them runs ``algorithm.client_update`` (or, for several at once,
  ``client_update_many``) on its own data with ``ClientInfo(seed, stage, round,
  client_id)``, so its generator draws exactly what the in-process runtime draws;
  its state comes from and goes back to the node's Context
  (:mod:`fedprior.flower.client_state`). The reply carries each client's tensors,
  example count and metrics; a client that raises is reported by id and reason
  while the node's other clients still reply. In a SecAgg+ round (the server's
  ``secagg``) the reply is instead the node's one vector, the example-weighted mean of
  its clients' updates (under client-side DP the sum of their clipped updates and of
  their bits), which Flower's ``secaggplus_mod`` quantizes and masks
  (:mod:`fedprior.flower.secagg`).
- EVALUATE: the server state and the ids of this node's candidates of a round whose sampler ranks
  clients (``federation.sampler = 'power-of-choice'``): each candidate's
  :func:`~fedprior.runtime.clients.global_loss`, the function the in-process runtime calls, so
  both choose the same clients.

Where a node finds its files, first match wins: node config ``data-dir`` (a real
SuperNode: ``flower-supernode --node-config 'data-dir="/path/node-0"'``), the folder
the server names in its messages (simulation, where server and nodes share a disk),
the ``data_dir`` given to :func:`client_app`, run config ``data-dir``. Client states are
kept under node config ``state-dir``, else ``<data dir>/state``.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedprior.algorithms.base import Reply
from fedprior.errors import FedpriorError
from fedprior.flower.client_state import ClientStateStore
from fedprior.flower.export import NodeData, node_data
from fedprior.flower.records import hosted_content, losses_content, read_hint, read_loss_content, read_train_content, reply_content
from fedprior.flower.secagg import is_secure, node_sum_vector, node_vector, secagg_mod, secagg_options, sums_clipped_updates
from fedprior.runtime.clients import global_loss, update_clients

PARTITION_ID = "partition-id"
NUM_PARTITIONS = "num-partitions"
DATA_DIR = "data-dir"
STATE_DIR = "state-dir"

log = logging.getLogger("fedprior.flower")


def resolve_data_dir(context: Context, hint: str = "", default: str | None = None) -> Path:
    """The node's data folder: node config ``data-dir``, else the server's hint, the factory's default, run config ``data-dir``."""
    for source in (context.node_config.get(DATA_DIR), hint, default, context.run_config.get(DATA_DIR)):
        if source:
            return Path(str(source))
    raise FedpriorError(
        "this SuperNode has no data folder: start it with --node-config 'data-dir=\"/path/to/node-k\"' "
        "(written by `fedprior flower export`), or set run config data-dir"
    )


def hosted_clients(context: Context, node: NodeData) -> range | list[int]:
    """The fedprior client ids this node hosts: in simulation, virtual node k of K (its ``partition-id`` and
    ``num-partitions``) hosts the clients c with c mod K = k of the task's N, a ``range`` (one client where K = N:
    its partition-id), never listed; on a real SuperNode, those its ``node.json`` lists."""
    if PARTITION_ID in context.node_config:
        k = int(context.node_config[PARTITION_ID])
        nodes = int(context.node_config.get(NUM_PARTITIONS, node.task.num_clients))
        return range(k, node.task.num_clients, nodes)
    return node.hosted if isinstance(node.hosted, range) else [int(c) for c in node.hosted]


def train_clients(node: NodeData, store: ClientStateStore, broadcast, order) -> tuple[dict[int, Reply], dict[int, str]]:
    """Run the sampled clients' updates; returns (replies by client id, failures by client id)."""
    algorithm = node.algorithm
    replies: dict[int, Reply] = {}
    failures: dict[int, str] = {}

    def one(client_ids: list[int]) -> None:
        states = [store.load(c, order.step) for c in client_ids]
        datas = [node.client_data(c) for c in client_ids]
        infos = [order.info.for_client(c) for c in client_ids]
        results = update_clients(algorithm, broadcast, states, datas, infos, order.vectorize)
        for client_id, (reply, new_state) in zip(client_ids, results, strict=True):
            store.save(client_id, order.step, new_state)
            replies[client_id] = reply

    clients = list(order.clients)
    if order.vectorize and algorithm.client_update_many is not None and len(clients) > 1:
        try:
            one(clients)
            return replies, failures
        except Exception:  # isolate the client that fails, below
            log.warning("vectorized update of clients %s failed; retrying them one by one", clients, exc_info=True)
            replies.clear()
    for client_id in clients:
        try:
            one([client_id])
        except Exception as error:  # a failing client must not take its node's other clients down
            log.error("client %d failed:\n%s", client_id, traceback.format_exc())
            failures[client_id] = f"{type(error).__name__}: {error}"
    return replies, failures


def client_app(data_dir: str | Path | None = None, mods: list | None = None) -> ClientApp:
    """A ClientApp serving fedprior's messages (``mods``: Flower mods, e.g. to inject faults in tests).

    Its first mod is :func:`~fedprior.flower.secagg.secagg_mod`: Flower's SecAgg+ client on the protocol's
    messages (a server run with ``secagg``), nothing on the others.
    """
    app = ClientApp(mods=[secagg_mod, *(mods or [])])
    default = str(data_dir) if data_dir is not None else None

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        node = node_data(resolve_data_dir(context, read_hint(msg.content), default))
        return Message(hosted_content(hosted_clients(context, node)), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        directory = resolve_data_dir(context, read_hint(msg.content), default)
        node = node_data(directory)
        broadcast, order = read_train_content(msg.content)
        hosted = hosted_clients(context, node)  # a range: membership without a list
        unknown = {c: f"client {c} is not hosted on this node" for c in order.clients if c not in hosted}
        state_dir = context.node_config.get(STATE_DIR) or directory / "state"
        store = ClientStateStore(context, Path(str(state_dir)), order.run_key)
        mine = type(order)(order.info, order.step, tuple(c for c in order.clients if c in hosted), order.run_key, order.vectorize)
        replies, failures = train_clients(node, store, broadcast, mine)
        if is_secure(msg.content):  # a SecAgg+ round: the node's masked vector, made by secagg_mod from this reply
            vector = node_sum_vector if sums_clipped_updates(broadcast) else node_vector  # client-side DP: the sum of clipped updates
            return Message(vector(broadcast, replies, {**unknown, **failures}, secagg_options(context)), reply_to=msg)
        return Message(reply_content(replies, {**unknown, **failures}), reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        node = node_data(resolve_data_dir(context, read_hint(msg.content), default))
        state, order = read_loss_content(msg.content)
        hosted = hosted_clients(context, node)  # a range: membership without a list
        losses: dict[int, float] = {}
        failures = {c: f"client {c} is not hosted on this node" for c in order.clients if c not in hosted}
        for client_id in (c for c in order.clients if c in hosted):
            try:
                losses[client_id] = global_loss(node.algorithm, state, node.client_data(client_id))
            except Exception as error:  # one candidate's failure leaves the node's others their answer
                log.error("client %d could not compute its loss:\n%s", client_id, traceback.format_exc())
                failures[client_id] = f"{type(error).__name__}: {error}"
        return Message(losses_content(losses, failures), reply_to=msg)

    return app


app = client_app()
"""The ClientApp that ``flwr run`` and SuperNodes load (``fedprior.flower.client_app:app``)."""
