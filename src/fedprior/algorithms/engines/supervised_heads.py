"""Supervised linear heads on frozen features: FedAvg and FedNTD clients, many at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch
import torch.nn.functional as F

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.linear_heads import (
    BIAS,
    WEIGHT,
    HeadObjective,
    HeadTraining,
    Sgd,
    broadcast_head,
    check_features,
    head_evaluation,
    masked_mean,
    random_head,
    text_head,
)
from fedprior.algorithms.pieces.hyperparameters import LocalSgd
from fedprior.algorithms.pieces.tensors import to_device, weighted_mean

HeadInit = Literal["random", "text"]


class CrossEntropyObjective:
    """Mean cross-entropy of each client's mini-batch on its labels."""

    def __init__(self, labels: torch.Tensor) -> None:
        self.labels = labels

    def start_epoch(self, run: HeadTraining, epoch: int) -> None:
        pass

    def loss(self, run, step, logits, rows, mask) -> torch.Tensor:
        ce = F.cross_entropy(logits.flatten(0, 1), self.labels[rows].flatten(), reduction="none")
        return masked_mean(ce.view_as(rows).to(logits.dtype), mask).sum()

    def add_gradients(self, run: HeadTraining, step: int, weight_grad: torch.Tensor, bias_grad: torch.Tensor) -> None:
        pass


def not_true_distillation(logits: torch.Tensor, global_logits: torch.Tensor, labels: torch.Tensor, tau: float) -> torch.Tensor:
    """Per-row KL(q~_global || q~_local) over the not-true classes at temperature tau (FedNTD, Lee et al. 2022, Eq. 5).

    q~_c = exp(z_c / tau) / sum_{c' != y} exp(z_c' / tau) for c != y; as in the authors'
    code (algorithms/fedntd/criterion.py) there is no tau^2 factor.
    """
    keep = ~F.one_hot(labels, logits.shape[-1]).bool()
    k = logits.shape[-1] - 1
    local = F.log_softmax(logits[keep].view(-1, k) / tau, dim=-1)
    target = F.softmax(global_logits[keep].view(-1, k) / tau, dim=-1)
    return (target * (target.clamp_min(1e-12).log() - local)).sum(-1).view(labels.shape)


class NotTrueDistillationObjective(CrossEntropyObjective):
    """FedNTD: L = CE + beta * L_NTD, the global head's not-true predictions as teacher."""

    def __init__(self, labels: torch.Tensor, global_weight: torch.Tensor, global_bias: torch.Tensor, tau: float, beta: float) -> None:
        super().__init__(labels)
        self.global_weight, self.global_bias, self.tau, self.beta = global_weight, global_bias, tau, beta

    def loss(self, run, step, logits, rows, mask) -> torch.Tensor:
        with torch.no_grad():
            teacher = run.x[rows] @ self.global_weight.T + self.global_bias
        ntd = not_true_distillation(logits, teacher, self.labels[rows], self.tau)
        return super().loss(run, step, logits, rows, mask) + self.beta * masked_mean(ntd, mask).sum()


ObjectiveFactory = Callable[[Broadcast, torch.Tensor], HeadObjective]
"""``objective(broadcast, labels)``; the broadcast's tensors and the labels are on the run's device."""


HEAD_SGD = ("lr", "momentum", "weight_decay")
"""The fields of :class:`~fedprior.algorithms.pieces.hyperparameters.LocalSgd` a head of its own (fedntd, linear-probe) takes."""


def supervised_head_algorithm(
    name: str,
    task: Task,
    runtime: Runtime,
    settings: LocalSgd,
    *,
    init: HeadInit,
    objective: ObjectiveFactory = lambda message, labels: CrossEntropyObjective(labels),
) -> Algorithm:
    """A FedAvg-style algorithm on a linear head: ``runtime.local_epochs`` of local SGD on (x, y) with ``settings``' lr, momentum and
    weight decay, example-weighted averaging, on ``runtime.device``."""
    local_epochs, batch_size, device = runtime.local_epochs, runtime.batch_size, runtime.device
    sgd = Sgd(settings.lr, settings.momentum, settings.weight_decay)
    check_features(task)
    if init == "text":
        text_head(task)  # fail early when there are no text features

    def initial(info: RoundInfo) -> State:
        weight, bias = text_head(task) if init == "text" else random_head(task, info)
        return {WEIGHT: weight, BIAS: bias}

    def client_update_many(message: Broadcast, states: Sequence[State], datas: Sequence[ClientData], infos: Sequence[ClientInfo]) -> list[tuple[Reply, State]]:
        run = HeadTraining(message.arrays[WEIGHT], message.arrays[BIAS], [d["x"] for d in datas], [i.generator() for i in infos], batch_size, sgd, device)
        on_device = Broadcast(to_device(message.arrays, device), message.config)
        run.run(local_epochs, objective(on_device, torch.cat([d["y"] for d in datas]).to(device)))
        return [(reply, state) for reply, state in zip(run.replies(), states, strict=True)]

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        return client_update_many(message, [state], [data], [info])[0]

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        return weighted_mean([{WEIGHT: r.arrays[WEIGHT], BIAS: r.arrays[BIAS]} for r in replies], [r.num_examples for r in replies])

    return Algorithm(
        name=name,
        inputs=("x", "y"),
        init=initial,
        broadcast=broadcast_head,
        client_update=client_update,
        aggregate=aggregate,
        evaluate=head_evaluation(device),
        client_update_many=client_update_many,
        mean_aggregate=True,
    )
