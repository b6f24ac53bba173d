"""FedSwAV: SwAV trained end to end by FedAvg, the clustering baseline of the MFCL paper's Tables 2 and 3.

Equations (Caron et al., NeurIPS 2020, SwAV; the MFCL paper), and where each is computed: Eq. 1-2, the swapped
prediction, :func:`~fedprior.algorithms.pieces.contrastive.swapped_prediction`; Sec. 3.1, the equal-partition
codes by Sinkhorn-Knopp, :func:`~fedprior.algorithms.pieces.contrastive.sinkhorn`; the prototype scores of the
normalized projections, ``loss`` inside :func:`fedswav` (the prototypes: :class:`SwavNet`); the MFCL paper's Eq. 1, the
client-size-weighted average, :meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`; the MFCL paper's Sec. 3,
linear evaluation, :func:`~fedprior.algorithms.engines.self_supervised.linear_evaluate`.
Where it departs from SwAV: no multi-crop, no feature queue, the prototypes not frozen in the first epoch.
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Runtime, Task
from fedprior.algorithms.engines.self_supervised import two_view_fedavg
from fedprior.algorithms.pieces.contrastive import sinkhorn, swapped_prediction
from fedprior.algorithms.pieces.hyperparameters import ClientLr, ProjectionDim, SelfSupervisedFields, Width, with_fields
from fedprior.errors import ConfigError
from fedprior.models.contrastive_net import ContrastiveNet

Prototypes = Annotated[int, Field(ge=2, description="number of prototypes K (SwAV uses 3000 on ImageNet; a few times the classes suits small batches)")]
SwavTemperature = Annotated[float, Field(gt=0, description="temperature tau of the swapped prediction (SwAV: 0.1)")]
Epsilon = Annotated[float, Field(gt=0, description="entropy weight epsilon of the Sinkhorn codes (SwAV: 0.05)")]
SinkhornIterations = Annotated[int, Field(ge=1, description="Sinkhorn-Knopp iterations (SwAV: 3)")]


class SwavNet(nn.Module):
    """A ContrastiveNet whose normalized projection is scored against ``prototypes`` (K x D, rows kept unit-norm)."""

    def __init__(self, net: ContrastiveNet, prototypes: int) -> None:
        super().__init__()
        self.net = net
        self.prototypes = nn.Linear(net.projector.out_dim, prototypes, bias=False)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.embed(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@with_fields("protocol", SelfSupervisedFields)
def fedswav(
    task: Task,
    runtime: Runtime,
    *,
    width: Width = 64,
    projection_dim: ProjectionDim = 128,
    prototypes: Prototypes = 100,
    lr: ClientLr = 1e-3,
    temperature: SwavTemperature = 0.1,
    epsilon: Epsilon = 0.05,
    sinkhorn_iterations: SinkhornIterations = 3,
    protocol: SelfSupervisedFields,
) -> Algorithm:
    """FedSwAV: every client trains SwAV's swapped prediction on two views; FedAvg averages backbone, head and prototypes.

    SwAV (Caron et al., NeurIPS 2020): the normalized projections z of the two views are
    scored against unit-norm prototypes C (s = z C^T); Sinkhorn-Knopp turns each view's
    scores into equal-partition codes q over the mini-batch (Sec. 3.1, epsilon, 3
    iterations); each view predicts the other's code, L = -1/2 [q2 log softmax(s1 / tau) +
    q1 log softmax(s2 / tau)] (Eq. 1-2); the prototypes are renormalized before each step.
    Combined with FedAvg as the MFCL paper's Sec. 3 does (credited to Luo et al., 2021). Left out
    from SwAV: multi-crop, the feature queue and freezing the prototypes in the first
    epoch. Same ResNet-18 and Table 6 head as FedSimCLR; scored by linear evaluation.
    """
    if len(task.input_shape) != 3:
        raise ConfigError(f"algorithm.name: fedswav trains on images (C, H, W); the data gives {task.input_shape}")

    def loss(model: nn.Module, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
        assert isinstance(model, SwavNet)  # two_view_fedavg trains the network build() gives
        with torch.no_grad():
            model.prototypes.weight.copy_(F.normalize(model.prototypes.weight, dim=1))
        z = F.normalize(model(torch.cat([view1, view2])), dim=1)
        scores = model.prototypes(z)
        s1, s2 = scores[: view1.shape[0]], scores[view1.shape[0] :]
        q1, q2 = sinkhorn(s1.detach(), epsilon, sinkhorn_iterations), sinkhorn(s2.detach(), epsilon, sinkhorn_iterations)
        return swapped_prediction(s1, s2, q1, q2, temperature)

    return two_view_fedavg(
        "fedswav",
        task,
        lambda: SwavNet(ContrastiveNet(task.input_shape[0], width, projection_dim), prototypes),
        loss,
        runtime,
        lr=lr,
        protocol=protocol,
    )
