"""FedNTD (Lee et al., NeurIPS 2022): FedAvg whose clients distill the global model's not-true predictions.

Equations (Lee et al. 2022): Eq. 5, the not-true distillation,
:func:`~fedprior.algorithms.engines.supervised_heads.not_true_distillation`; Eq. 6, CE + beta times it,
:class:`~fedprior.algorithms.engines.supervised_heads.NotTrueDistillationObjective`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fedprior.algorithms.base import Algorithm, Runtime, Task
from fedprior.algorithms.engines.linear_heads import BIAS, WEIGHT
from fedprior.algorithms.engines.supervised_heads import HEAD_SGD, NotTrueDistillationObjective, supervised_head_algorithm
from fedprior.algorithms.pieces.hyperparameters import HeadInitField, LocalSgd, with_fields

Tau = Annotated[float, Field(gt=0, description="temperature tau of the not-true softmax (authors' default 1)")]
NtdBeta = Annotated[float, Field(ge=0, description="weight beta of the not-true distillation loss (authors' default 1)")]


@with_fields("sgd", LocalSgd, HEAD_SGD, lr=0.01, momentum=0.9, weight_decay=1e-5)
def fedntd(task: Task, runtime: Runtime, *, init: HeadInitField = "text", sgd: LocalSgd, tau: Tau = 1.0, beta: NtdBeta = 1.0) -> Algorithm:
    """FedNTD on a linear head: local loss CE + beta * KL over not-true classes (Lee et al. 2022, Eq. 5-6).

    "Preservation of the Global Knowledge by Not-True Distillation in Federated
    Learning": L = L_CE(q_local, y) + beta * sum_{c != y} q~^tau_c(global) log(q~^tau_c(global) / q~^tau_c(local)),
    q~^tau the softmax at temperature tau over the logits of the classes other than the
    label. The teacher is the head received this round. Defaults follow the authors'
    config (tau 1, beta 1; SGD lr 0.01, momentum 0.9, wd 1e-5, as FST-CBDG's paper uses).
    """
    return supervised_head_algorithm(
        "fedntd",
        task,
        runtime,
        sgd,
        init=init,
        objective=lambda message, labels: NotTrueDistillationObjective(labels, message.arrays[WEIGHT], message.arrays[BIAS], tau, beta),
    )
