"""FedDB (Zhu et al., "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated
Semi-Supervised Learning", IJCAI 2024; the FedDB paper): APP-U, debiased pseudo-labeling (DPL) and debiased model
aggregation (DMA).

Algorithm 3 of the paper, on the shared semi-supervised client and server
(:mod:`fedprior.algorithms.engines.semi_supervised`):

- each sampled client labels the weak view of its unlabeled images with the received
  model, estimates the prior bias by APP-U (Eq. 8) and keeps the images whose *debiased*
  prediction (Eq. 14) reaches tau = 0.95 (DPL, Algorithm 1);
- it trains E = 5 full-batch steps of L_s + lambda L_u (Eq. 2, 4, 6), updating APP-U
  by a moving average with gamma each epoch (Algorithm 3, lines 14 and 20; computed on
  every unlabeled image as the paper writes, or on the pseudo-labeled ones as the code
  does: ``appu_subset``), and sends its model and APP-U;
- the server finds weights beta making the weighted APP-U uniform (DMA, Algorithm 2,
  Eq. 15-16: ``dma_steps`` = E_aggr = 100 steps, ``dma_lr`` = 1.0, softmax after each
  step, the paper's norm or the code's MSE, with a plain step or the code's SGD, as ``dma_loss``; ``dma_solver = simplex``
  solves Eq. 16 exactly instead) and aggregates w = sum_m beta_m w_m (Eq. 17).

Switches for Table 4's ablation: ``dpl = false`` labels with the plain prediction
(Eq. 3), ``dma = false`` averages uniformly (Eq. 7); with both off this is FixMatch.
The code's server momentum (0.5) is ``server_momentum``; the paper has none.

Every line of Algorithms 1-3, when it runs and where it departs from the paper or the authors' code:
docs/feddb.md, "The algorithm, line by line".

Equations (the FedDB paper), and where each is computed:

- Eq. 2-6, the local loss L_s + lambda L_u: :class:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised`
  (``_train``; the backward pass of Eq. 6: :func:`~fedprior.algorithms.engines.semi_supervised.plain_backward`);
- Eq. 3-4 and Algorithm 1, hard pseudo-labels: :func:`~fedprior.algorithms.pieces.pseudo_labels.hard_labels`
  (the rule: :func:`~fedprior.algorithms.engines.semi_supervised.default_pseudo_labels`);
- Eq. 8, APP-U: :func:`~fedprior.algorithms.pieces.pseudo_labels.app_u`; Algorithm 3 line 20, its moving
  average: :func:`~fedprior.algorithms.pieces.pseudo_labels.moving_average`;
- Eq. 14, the debiased prediction (DPL): :func:`~fedprior.algorithms.pieces.pseudo_labels.debias`;
- Eq. 15-16 and Algorithm 2, DMA: :func:`~fedprior.algorithms.pieces.dma.dma_weights`
  (:func:`~fedprior.algorithms.pieces.dma.algorithm2`, :func:`~fedprior.algorithms.pieces.dma.uniform_distance`,
  :func:`~fedprior.algorithms.pieces.dma.simplex_optimum`), called by :func:`dma_aggregation_weights`;
- Eq. 7 and 17, the weighted aggregation: :meth:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised.aggregate`
  (Eq. 7's uniform beta: :func:`~fedprior.algorithms.engines.semi_supervised.uniform_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Reply, RoundInfo, Runtime, State, Task, runtime_options
from fedprior.algorithms.engines.semi_supervised import APPU, Method, semi_supervised_algorithm, uniform_weights
from fedprior.algorithms.pieces.dma import DmaLoss, DmaSolver, dma_weights
from fedprior.algorithms.pieces.hyperparameters import Dpl, SemiSupervisedFields, with_fields

Dma = Annotated[bool, Field(description="debiased model aggregation (DMA, Algorithm 2); false = uniform averaging (Eq. 7)")]
DmaSteps = Annotated[int, Field(ge=1, description="E_aggr, gradient steps of DMA (the FedDB paper, Sec. 5.1: 100)")]
DmaLr = Annotated[float, Field(gt=0, description="eta_aggr, DMA's step size (the FedDB paper, Sec. 5.1: 1.0)")]
DmaLossField = Annotated[
    DmaLoss,
    Field(
        description="DMA's objective and step: 'norm' (Eq. 16, the paper), 'mse' (the code's loss, plain gradient step) or 'mse-code' (the code's loss and its SGD: momentum 0.9, Nesterov, weight decay 0.9, re-created every step)"
    ),
]
DmaSolverField = Annotated[DmaSolver, Field(description="'algorithm2' (the paper's softmax-projected gradient steps) or 'simplex' (Eq. 16 solved exactly)")]


def dma_aggregation_weights(steps: int, lr: float, loss: DmaLoss, solver: DmaSolver):
    """The server's weights: DMA on the APP-Us the clients of the round sent (Eq. 15-16)."""

    def weights(state: State, replies: Sequence[Reply], info: RoundInfo) -> torch.Tensor:
        appus = torch.stack([r.arrays[APPU] for r in replies])
        return dma_weights(appus, solver=solver, steps=steps, lr=lr, loss=loss)

    return weights


@runtime_options("precision", "compile")
@with_fields("shared", SemiSupervisedFields)
def feddb(
    task: Task,
    runtime: Runtime,
    *,
    dpl: Dpl = True,
    dma: Dma = True,
    dma_steps: DmaSteps = 100,
    dma_lr: DmaLr = 1.0,
    dma_loss: DmaLossField = "norm",
    dma_solver: DmaSolverField = "algorithm2",
    shared: SemiSupervisedFields,
) -> Algorithm:
    """FedDB (Zhu et al. 2024): APP-U, debiased pseudo-labeling (DPL) and debiased model aggregation (DMA)."""
    weights = dma_aggregation_weights(dma_steps, dma_lr, dma_loss, dma_solver) if dma else uniform_weights
    return semi_supervised_algorithm("feddb", task, shared, runtime, method=Method(weights=weights), dpl=dpl)
