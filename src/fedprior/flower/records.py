"""fedprior's messages as Flower records, and back, without loss.

An algorithm's :class:`~fedprior.algorithms.base.Broadcast` and
:class:`~fedprior.algorithms.base.Reply` are named tensors plus small scalars; they
map one to one onto Flower's records:

==========================  =========================================================
fedprior                    Flower (``flwr.app``)
==========================  =========================================================
State / Broadcast.arrays    ArrayRecord (one Array per name; dtype and shape kept)
Broadcast.config            ConfigRecord (bool / int / float / str)
Reply.metrics               MetricRecord (floats), ``num-examples`` beside them
RoundInfo / ClientInfo      ConfigRecord (seed, stage, round, step, client ids)
losses of candidates        ConfigRecord (client ids, losses; failed ids, reasons)
==========================  =========================================================

Tensors travel as NumPy arrays (``np.save`` bytes), so every bit arrives: a float
that leaves the server is the float the client reads. A message to a node carries
the round once and the ids of the clients it hosts that were sampled; the reply
carries one ArrayRecord + MetricRecord pair per client, keyed by client id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fedprior.algorithms.base import Broadcast, Reply, RoundInfo, Scalars, State

BROADCAST_ARRAYS = "broadcast.arrays"
BROADCAST_CONFIG = "broadcast.config"
ROUND = "round"
HOSTED = "hosted"
DATA_HINT = "data-hint"
NUM_EXAMPLES = "num-examples"


def to_array_record(arrays: State) -> ArrayRecord:
    """Named tensors -> ArrayRecord (CPU copies; names, dtypes and shapes kept)."""
    return ArrayRecord({name: Array(tensor.detach().cpu().contiguous().numpy()) for name, tensor in arrays.items()})


def from_array_record(record: ArrayRecord) -> State:
    """ArrayRecord -> named tensors (writable copies, so an algorithm may update them in place)."""
    return {name: torch.from_numpy(np.array(array.numpy(), copy=True)) for name, array in record.items()}


def to_config_record(values: Scalars) -> ConfigRecord:
    return ConfigRecord({k: v for k, v in values.items()})


def from_config_record(record: ConfigRecord) -> Scalars:
    return {k: config_scalar(v) for k, v in record.items()}


def config_scalar(value: object) -> bool | int | float | str:
    """A ConfigRecord value fedprior wrote as a number, a flag or a string (what ``Scalars`` holds)."""
    if not isinstance(value, bool | int | float | str):
        raise TypeError(f"expected a number or a string in the record, got {type(value).__name__}")
    return value


def config_list(value: object) -> list:
    """A ConfigRecord value fedprior wrote as a list."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list in the record, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class RoundOrder:
    """What a node must do in a round: which of its clients train, under which RoundInfo.

    ``step`` counts rounds over all stages (1-based); a client's state is versioned by
    it, so a round that is replayed after a server restart starts from the state the
    client had before it (see :mod:`fedprior.flower.client_state`). ``run_key`` names
    the run, so two runs on the same nodes never share client state.
    """

    info: RoundInfo
    step: int
    clients: tuple[int, ...]
    run_key: str
    vectorize: bool = True


def order_to_config(order: RoundOrder) -> ConfigRecord:
    return ConfigRecord(
        {
            "seed": int(order.info.seed),
            "stage": order.info.stage,
            "round": int(order.info.round),
            "step": int(order.step),
            "clients": [int(c) for c in order.clients],
            "run-key": order.run_key,
            "vectorize": bool(order.vectorize),
        }
    )


def order_from_config(record: ConfigRecord) -> RoundOrder:
    info = RoundInfo(seed=int(config_scalar(record["seed"])), stage=str(record["stage"]), round=int(config_scalar(record["round"])))
    clients = tuple(int(c) for c in config_list(record["clients"]))
    return RoundOrder(info, int(config_scalar(record["step"])), clients, str(record["run-key"]), bool(record["vectorize"]))


def hint_record(data_dir: str) -> ConfigRecord:
    """Where a node without its own ``data-dir`` finds the clients' files (simulation: a shared disk)."""
    return ConfigRecord({"data-dir": str(data_dir or "")})


def read_hint(content: RecordDict) -> str:
    record = content.get(DATA_HINT)
    return str(record.get("data-dir", "")) if record is not None else ""


def train_content(broadcast: Broadcast, order: RoundOrder, data_hint: str = "") -> RecordDict:
    """The content of a TRAIN message: the broadcast once, the round order, the data hint."""
    return RecordDict(
        {
            BROADCAST_ARRAYS: to_array_record(broadcast.arrays),
            BROADCAST_CONFIG: to_config_record(broadcast.config),
            ROUND: order_to_config(order),
            DATA_HINT: hint_record(data_hint),
        }
    )


def read_train_content(content: RecordDict) -> tuple[Broadcast, RoundOrder]:
    broadcast = Broadcast(from_array_record(content.array_records[BROADCAST_ARRAYS]), from_config_record(content.config_records[BROADCAST_CONFIG]))
    return broadcast, order_from_config(content.config_records[ROUND])


def _reply_keys(client_id: int) -> tuple[str, str]:
    return f"reply.{client_id}.arrays", f"reply.{client_id}.metrics"


def reply_content(replies: dict[int, Reply], failures: dict[int, str] | None = None) -> RecordDict:
    """The content of a TRAIN reply: per client its tensors and metrics; clients that raised, with the reason."""
    content = RecordDict()
    for client_id, reply in replies.items():
        arrays_key, metrics_key = _reply_keys(client_id)
        content[arrays_key] = to_array_record(reply.arrays)
        content[metrics_key] = MetricRecord({**{k: float(v) for k, v in reply.metrics.items()}, NUM_EXAMPLES: int(reply.num_examples)})
    content["clients"] = ConfigRecord(
        {
            "replied": [int(c) for c in replies],
            "failed": [int(c) for c in (failures or {})],
            "reasons": [str(r) for r in (failures or {}).values()],
        }
    )
    return content


def read_reply_content(content: RecordDict) -> tuple[list[Reply], dict[int, str]]:
    """(replies with their client ids, {client id: reason} of the clients that raised) of a TRAIN reply."""
    listing = content.config_records["clients"]
    replies = []
    for client_id in (int(c) for c in config_list(listing["replied"])):
        arrays_key, metrics_key = _reply_keys(client_id)
        metrics = {k: config_scalar(v) for k, v in content.metric_records[metrics_key].items()}
        num_examples = int(metrics.pop(NUM_EXAMPLES))
        replies.append(Reply(from_array_record(content.array_records[arrays_key]), num_examples, {k: float(v) for k, v in metrics.items()}, client_id))
    failures = {int(c): str(r) for c, r in zip(config_list(listing["failed"]), config_list(listing["reasons"]), strict=True)}
    return replies, failures


SERVER_STATE = "server.state"


def loss_content(state: State, order: RoundOrder, data_hint: str = "") -> RecordDict:
    """The content of an EVALUATE message asking candidates for the global model's loss (Power-of-Choice):
    the server state once, the round order naming the candidates, the data hint."""
    return RecordDict({SERVER_STATE: to_array_record(state), ROUND: order_to_config(order), DATA_HINT: hint_record(data_hint)})


def read_loss_content(content: RecordDict) -> tuple[State, RoundOrder]:
    return from_array_record(content.array_records[SERVER_STATE]), order_from_config(content.config_records[ROUND])


def losses_content(losses: dict[int, float], failures: dict[int, str]) -> RecordDict:
    """The content of an EVALUATE reply: each candidate's loss (a float64 as computed), and the candidates that failed, with the reason."""
    return RecordDict(
        {
            "losses": ConfigRecord(
                {
                    "clients": [int(c) for c in losses],
                    "losses": [float(v) for v in losses.values()],
                    "failed": [int(c) for c in failures],
                    "reasons": [str(r) for r in failures.values()],
                }
            )
        }
    )


def read_losses_content(content: RecordDict) -> tuple[dict[int, float], dict[int, str]]:
    record = content.config_records["losses"]
    losses = {int(c): float(v) for c, v in zip(config_list(record["clients"]), config_list(record["losses"]), strict=True)}
    return losses, {int(c): str(r) for c, r in zip(config_list(record["failed"]), config_list(record["reasons"]), strict=True)}


def hosted_content(client_ids: range | list[int]) -> RecordDict:
    """The content of a QUERY reply: the fedprior client ids a node hosts, a ``range`` as its three numbers
    (a virtual node of a large population hosts every K-th client: its ids are never listed)."""
    if isinstance(client_ids, range):
        return RecordDict({HOSTED: ConfigRecord({"range": [client_ids.start, client_ids.stop, client_ids.step]})})
    return RecordDict({HOSTED: ConfigRecord({"clients": [int(c) for c in client_ids]})})


def read_hosted_content(content: RecordDict) -> range | list[int]:
    record = content.config_records[HOSTED]
    if "range" in record:
        start, stop, step = (int(v) for v in config_list(record["range"]))
        return range(start, stop, step)
    return [int(c) for c in config_list(record["clients"])]
