"""Catching divergence: a client update or a global model with NaN or infinite numbers.

A learning rate far too large (``algorithm.lr=1e30``) turns the weights into inf and
then NaN; the run would otherwise go on, evaluate a NaN model at chance accuracy every
round and finish as if nothing happened. The round loop screens every reply (tensors
and metrics) before aggregating, and the new global state and its test metrics after:

- a non-finite client update either stops the run (``run.non_finite = "stop"``, the
  default: a :class:`DivergedError` naming the round, the client and the tensor; the
  last checkpoint, of the round before, stays resumable) or is left out of that round's
  aggregation and counted among the failed clients (``"drop"``);
- a non-finite global model always stops the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from fedprior.algorithms.base import Reply, State
from fedprior.algorithms.pieces.server_optimizers import PREFIX as SERVER_OPTIMIZER
from fedprior.errors import FedpriorError

NonFinite = Literal["stop", "drop"]


class DivergedError(FedpriorError):
    """Training produced NaN or infinite numbers."""


def non_finite_names(arrays: Mapping[str, torch.Tensor], metrics: Mapping[str, Any] | None = None) -> list[str]:
    """Names of the floating tensors and numeric metrics in ``arrays``/``metrics`` holding NaN or inf.

    The tensors' flags are read once per device they are on (one host sync for a reply on an accelerator, not one per tensor).
    """
    by_device: dict[torch.device, list[str]] = {}
    for name, value in arrays.items():
        if value.is_floating_point():
            by_device.setdefault(value.device, []).append(name)
    finite: dict[str, bool] = {}
    for names in by_device.values():
        finite.update(zip(names, torch.stack([torch.isfinite(arrays[n]).all() for n in names]).tolist(), strict=True))
    bad = [name for name in arrays if name in finite and not finite[name]]
    for name, value in (metrics or {}).items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            bad.append(name)
    return bad


def lower(state: State) -> str:
    """What to lower: ``algorithm.lr``, and ``algorithm.server_lr`` where a server optimizer steps the model (its slots are in ``state``)."""
    if any(key.startswith(SERVER_OPTIMIZER) for key in state):
        return "lower algorithm.lr or algorithm.server_lr (the server optimizer's step)"
    return "lower algorithm.lr"


def _where(stage: str, round_: int) -> str:
    return f"round {round_}" + ("" if stage == "federated" else f" of stage '{stage}'")


def screen_replies(replies: Sequence[Reply], stage: str, round_: int, mode: NonFinite, state: State) -> tuple[list[Reply], dict[int, str]]:
    """(the finite replies, {client: reason} of the dropped ones); raises DivergedError when ``mode`` is 'stop' (``state``: the server's, which
    says what to lower)."""
    kept, dropped = [], {}
    for reply in replies:
        bad = non_finite_names(reply.arrays, reply.metrics)
        if not bad:
            kept.append(reply)
            continue
        if mode == "stop":
            raise DivergedError(
                f"training diverged in {_where(stage, round_)}: client {reply.client_id} returned non-finite values "
                f"({', '.join(bad[:3])}); {lower(state)} (or set run.non_finite = 'drop' to leave such clients out); "
                "the checkpoint of the round before is kept"
            )
        dropped[reply.client_id] = f"non-finite update ({', '.join(bad[:3])})"
    return kept, dropped


def check_global(state: State, metrics: Mapping[str, Any], stage: str, round_: int) -> None:
    """Raise DivergedError if the aggregated state or its test metrics are not finite."""
    bad = non_finite_names(state, {k: v for k, v in metrics.items() if k == "loss"})
    if bad:
        raise DivergedError(
            f"training diverged in {_where(stage, round_)}: the global model holds non-finite values ({', '.join(bad[:3])}); "
            f"{lower(state)}; the checkpoint of the round before is kept"
        )
