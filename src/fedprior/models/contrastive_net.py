"""A backbone with a projection head: the network the end-to-end self-supervised baselines federate.

FedSimCLR, FedSwAV and Orchestra (the MFCL paper's Tables 2, 3, 7) train a ResNet-18 end to end
on the clients; here it is :class:`~fedprior.models.resnet.ResNet18` (``width`` scales
it; 64 is the standard network) with Table 6's projection head on top, the head MFCL's
server uses, so every method is scored by a linear classifier on the same kind of
features. ``stem_norm`` replaces the BatchNorm after the network's first two
convolutions (the stem's and the first block's first) by GN or PN: "After the first two
Conv2D layers in FedSimCLR, the PN is used in lieu of BN" (the MFCL paper's Appendix D.3, Table 7),
in groups of ``group_channels`` channels (Lambda, Sec. 2.2; ``width`` / Lambda groups).
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.models.norm import norm2d
from fedprior.models.projection import ProjectionHead
from fedprior.models.resnet import ResNet18


class ContrastiveNet(nn.Module):
    """``backbone`` (ResNet-18, images -> (N, feature_dim)) and ``projector`` (Table 6); forward = projector(backbone)."""

    def __init__(self, in_channels: int, width: int = 64, projection_dim: int = 128, stem_norm: str = "bn", group_channels: int = 2) -> None:
        super().__init__()
        self.backbone = ResNet18(in_channels, num_classes=0, width=width, norm="bn")
        if stem_norm != "bn":
            self.backbone.stem[1] = norm2d(stem_norm, width, group_channels=group_channels)
            self.backbone.blocks[0].bn1 = norm2d(stem_norm, width, group_channels=group_channels)
        self.projector = ProjectionHead(self.backbone.feature_dim, projection_dim)

    @property
    def feature_dim(self) -> int:
        return self.backbone.feature_dim

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.embed(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projector(self.backbone.embed(x))
