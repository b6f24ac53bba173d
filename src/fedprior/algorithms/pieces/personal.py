"""Evaluating personalized methods on a global test set: the mean over clients of their own models.

FedREP keeps a head per client, FedProto a whole model per client: there is no single
global model to test. fedprior reports the mean, over the clients of the latest round,
of each client's personalized model on the test set (accuracy, loss, macro-F1, ... and
the per-class accuracies, each averaged). Those clients upload the personalized part
under ``eval.<client>.`` for this measurement only (a head: K x (D + 1) numbers; FedProto:
the whole model); the round loop counts those bytes as upload, so these methods' upload
is overstated by them. The FedETF code FedBM's tables come from tests the server's
never-updated head and model instead (hence FedREP's and FedProto's very low numbers there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from fedprior.algorithms.base import Reply, State

EVAL = "eval."


def eval_entries(replies: Sequence[Reply]) -> State:
    """``eval.<client>.<name>`` tensors of this round's replies (they replace the previous round's)."""
    return {k: v for r in replies for k, v in r.arrays.items() if k.startswith(EVAL)}


def stored_clients(state: State) -> list[int]:
    return sorted({int(k.split(".")[1]) for k in state if k.startswith(EVAL)})


def client_arrays(state: State, client: int) -> dict[str, torch.Tensor]:
    prefix = f"{EVAL}{client}."
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


def mean_metrics(per_client: list[dict[str, float | list[float]]]) -> dict[str, float | list[float]]:
    """Key by key mean of several clients' metrics (lists element-wise)."""
    out: dict[str, float | list[float]] = {}
    for key, first in per_client[0].items():
        values = np.array([m[key] for m in per_client], dtype=float)
        out[key] = [round(float(v), 6) for v in values.mean(0)] if isinstance(first, list) else float(values.mean())
    return out


def without_eval(state: State) -> State:
    return {k: v for k, v in state.items() if not k.startswith(EVAL)}


def personal_evaluation(state: State, evaluate_one: Callable[[dict[str, torch.Tensor]], dict]) -> list[dict]:
    """``evaluate_one(arrays)`` for every stored client's personalized arrays."""
    return [evaluate_one(client_arrays(state, c)) for c in stored_clients(state)]
