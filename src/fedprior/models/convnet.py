"""A small convolutional classifier for the embedded CPU settings, with a choice of normalization.

Where a paper trains a WRN-28-2 or a ResNet-18 on CIFAR on a GPU, the embedded
(offline, 2-core) settings train this on Fashion-MNIST instead: ``depth`` blocks of
[conv3x3 -> norm -> ReLU -> 2x2 max pool] with ``width, 2*width, ...`` channels, a
global average pool, and a linear head. ``norm`` is any of :data:`fedprior.models.norm.NORMS`
(``bn-batch`` is BatchNorm without running statistics, as the FedDB authors' code).

It splits into ``embed`` (images -> (N, feature_dim)) and ``head`` like every
classification network in fedprior (see :mod:`fedprior.models.resnet`).
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.models.norm import norm2d


class ConvNet(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, width: int = 32, depth: int = 3, norm: str = "bn") -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = in_channels
        for i in range(depth):
            out = width * 2**i
            layers += [nn.Conv2d(channels, out, 3, padding=1, bias=norm == "none"), norm2d(norm, out), nn.ReLU(), nn.MaxPool2d(2)]
            channels = out
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feature_dim = channels
        self.head: nn.Module = nn.Linear(channels, num_classes) if num_classes > 0 else nn.Identity()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Images (N, C, H, W) -> features (N, feature_dim)."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))
