"""FedSimCLR: SimCLR trained end to end by FedAvg, the contrastive baseline of the MFCL paper's Tables 2, 3, 7 and 8.

Equations (Chen et al., ICML 2020, SimCLR; the MFCL paper), and where each is computed: SimCLR's Eq. 1, the
NT-Xent loss (the MFCL paper's Eq. 5), :func:`~fedprior.algorithms.pieces.contrastive.nt_xent`, called by ``loss`` inside
:func:`fedsimclr`; the two augmented views, :func:`~fedprior.data.augment.simclr.simclr_views`; the MFCL paper's Eq. 3-4,
Peer Normalization (``norm = "pn"``), :class:`~fedprior.models.peer_norm.PeerNorm`; the MFCL paper's Eq. 1, the
client-size-weighted average, :meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average` (the loop:
:func:`~fedprior.algorithms.engines.self_supervised.two_view_fedavg`); the MFCL paper's Sec. 3, linear evaluation,
:func:`~fedprior.algorithms.engines.self_supervised.linear_evaluate`.
Where it departs from the MFCL paper's baseline: Luo et al.'s classifier calibration is not added (see :func:`fedsimclr`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import torch
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Runtime, Task
from fedprior.algorithms.engines.self_supervised import two_view_fedavg
from fedprior.algorithms.pieces.contrastive import nt_xent
from fedprior.algorithms.pieces.hyperparameters import (
    ClientLr,
    NormGroupChannels,
    ProjectionDim,
    SelfSupervisedFields,
    Temperature,
    Width,
    check_group_channels,
    with_fields,
)
from fedprior.errors import ConfigError
from fedprior.models.contrastive_net import ContrastiveNet

StemNorm = Annotated[
    Literal["bn", "gn", "pn", "pn-eq3"],
    Field(description="normalization after the first two convolutions: bn (SimCLR), gn, pn (Table 7's FedSimCLR with PN) or pn-eq3 (PN with Eq. 3 as printed)"),
]


@with_fields("protocol", SelfSupervisedFields)
def fedsimclr(
    task: Task,
    runtime: Runtime,
    *,
    norm: StemNorm = "bn",
    norm_group_channels: NormGroupChannels = 2,
    width: Width = 64,
    projection_dim: ProjectionDim = 128,
    lr: ClientLr = 1e-3,
    temperature: Temperature = 0.5,
    protocol: SelfSupervisedFields,
) -> Algorithm:
    """FedSimCLR: every client minimizes NT-Xent (SimCLR) on two views of its images; FedAvg averages the ResNet-18.

    SimCLR (Chen et al., ICML 2020) combined with FedAvg, as the MFCL paper's Sec. 3 builds its
    baseline (credited to Luo et al., 2021): a ResNet-18 with the projection head of
    Table 6, trained on each client with NT-Xent (the MFCL paper's Eq. 5) over its mini-batches of
    K images (2K views), Adam; the server takes the client-size-weighted mean (Eq. 1).
    Luo et al.'s classifier calibration re-fits the classifier on class-balanced virtual
    features; the linear evaluation here already fits it centrally on class-balanced
    labelled features, so nothing is added. ``norm = "pn"`` is Table 7's FedSimCLR with
    PN ("after the first two Conv2D layers ... PN is used in lieu of BN"), ``"gn"`` its GN
    column, in groups of ``norm_group_channels`` (Lambda, Sec. 2.2) channels: ``width`` / Lambda
    groups. Scored like MFCL, by linear evaluation (``linear_eval``, the MFCL paper's Sec. 3).
    """
    if len(task.input_shape) != 3:
        raise ConfigError(f"algorithm.name: fedsimclr trains on images (C, H, W); the data gives {task.input_shape}")
    check_group_channels("width", width, norm, norm_group_channels)

    def loss(model: nn.Module, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
        h = model(torch.cat([view1, view2]))  # view-major, so PN pools each image's two views
        return nt_xent(h[: view1.shape[0]], h[view1.shape[0] :], temperature)

    return two_view_fedavg(
        "fedsimclr",
        task,
        lambda: ContrastiveNet(task.input_shape[0], width, projection_dim, norm, norm_group_channels),
        loss,
        runtime,
        lr=lr,
        protocol=protocol,
    )
