"""Evaluating personalized methods on a global test set: the mean over clients of their own models.

FedREP keeps a head per client, FedProto a whole model per client: there is no single
global model to test. fedprior reports the mean, over the clients of the latest round,
of each client's personalized model on the test set (accuracy, loss, macro-F1, ... and
the per-class accuracies, each averaged). Those clients upload the personalized part
under ``eval.<client>.`` for this measurement only (a head: K x (D + 1) numbers; FedProto:
the whole model); the round loop counts those bytes as upload, so these methods' upload
is overstated by them. The FedETF code FedBM's tables come from tests the server's
never-updated head and model instead (hence FedREP's and FedProto's very low numbers there).

With ``partition.local_test_fraction > 0`` each client also has a local test split, and
:func:`with_local_tests` adds per-client metrics to every evaluation, as FL-bench and PFLlib
report personalized methods: each client's own model (``Algorithm.evaluate_client``; the
global model for an algorithm without one) on its own split, and their mean, sd and worst 10%
(:func:`client_spread`), and beside them the accuracy pooled over the clients' local test images
(:func:`pooled_accuracy`: each client weighted by its split's size, what FL-bench and PFLlib print as their average).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, Reply, RoundInfo, State

EVAL = "eval."
UPLOAD_PERSONAL = "upload_personal"
"""A broadcast's config flag (set by :func:`with_local_tests`): upload the personal part under ``eval.<client>.`` this round,
for a method that otherwise keeps it (FedROD's P-head)."""


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


def client_spread(accuracies: Sequence[float]) -> dict[str, float]:
    """Mean, sd and worst 10% of per-client accuracies: ``client_accuracy_mean``, ``client_accuracy_sd`` (the population sd,
    NumPy's ``std`` with ddof 0: the spread of these clients, as PFLlib reports it) and ``client_accuracy_worst10``, the mean of
    the lowest ``ceil(n / 10)`` accuracies (the worst decile of the ``n`` clients, at least one client)."""
    values = np.sort(np.asarray(accuracies, dtype=float))
    worst = values[: math.ceil(values.size / 10)]
    return {"client_accuracy_mean": float(values.mean()), "client_accuracy_sd": float(values.std()), "client_accuracy_worst10": float(worst.mean())}


def pooled_accuracy(accuracies: Sequence[float], sizes: Sequence[int]) -> dict[str, float]:
    """``client_accuracy_pooled``: the accuracy over all the clients' local test images pooled, sum_c n_c acc_c / sum_c n_c
    (the sample-weighted mean FL-bench and PFLlib report: their per-client correct counts over their per-client test sizes
    summed), beside :func:`client_spread`'s ``client_accuracy_mean``, where each client counts once whatever its size."""
    n = np.asarray(sizes, dtype=float)
    return {"client_accuracy_pooled": float(np.dot(np.asarray(accuracies, dtype=float), n) / n.sum())}


def per_client_metrics(algorithm: Algorithm, state: State, local_tests: Sequence[ClientData]) -> dict[str, float | list[float]]:
    """Each client's accuracy on its local test split (``local_tests[c]``, client ``c``'s; an empty one is skipped), with :func:`client_spread`
    and :func:`pooled_accuracy`.

    A personalized method (``algorithm.evaluate_client``) is scored on the clients whose personal parts the state holds
    (``eval.<client>.``: the latest round's clients), each with its own model; before any round, and for an algorithm
    without ``evaluate_client``, every client is scored with ``evaluate`` (the global model). ``client_ids`` says which.
    """
    clients = stored_clients(state) if algorithm.evaluate_client is not None else []
    if clients:
        personal = algorithm.evaluate_client
        assert personal is not None
        scores = {c: personal(state, c, local_tests[c]) for c in clients if local_tests[c]["y"].numel()}
    else:
        shared = without_eval(state)
        scores = {c: algorithm.evaluate(shared, data) for c, data in enumerate(local_tests) if data["y"].numel()}
    accuracies = [float(cast(float, m["accuracy"])) for m in scores.values()]  # every evaluate gives a float accuracy
    sizes = [int(local_tests[c]["y"].numel()) for c in scores]
    return {"client_ids": list(scores), "client_accuracy": accuracies, **client_spread(accuracies), **pooled_accuracy(accuracies, sizes)}


def with_local_tests(algorithm: Algorithm, local_tests: Sequence[ClientData]) -> Algorithm:
    """``algorithm`` whose evaluation adds :func:`per_client_metrics` on the clients' local test splits and whose broadcast asks
    for the personal parts (:data:`UPLOAD_PERSONAL`). Those uploads are not a mean of the replies: ``mean_aggregate`` is False
    for a personalized method."""

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        return {**algorithm.evaluate(state, data), **per_client_metrics(algorithm, state, local_tests)}

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        message = algorithm.broadcast(state, info)
        return Broadcast(message.arrays, {**message.config, UPLOAD_PERSONAL: True})

    mean = algorithm.mean_aggregate and algorithm.evaluate_client is None
    return algorithm.with_(evaluate=evaluate, broadcast=broadcast, mean_aggregate=mean)
