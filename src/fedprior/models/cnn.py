"""A small CNN for the supervised baselines on 28x28 / 32x32 images (FedAvg, McMahan et al. 2017, scaled down).

Two 3x3 convolutions (16 and 32 channels) with max pooling, then a 64-unit hidden layer:
about 105k parameters on Fashion-MNIST, small enough that SCAFFOLD's per-client
control variates for 100 clients fit in memory and in a checkpoint.
"""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, in_channels: int, image_size: int, num_classes: int, width: int = 16, hidden: int = 64) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        side = image_size // 4
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(2 * width * side * side, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    @property
    def head(self) -> nn.Module:
        return self.classifier[-1]

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Images -> the hidden layer's (N, hidden) features, before the last linear layer (``head``)."""
        return self.classifier[:-1](self.features(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
