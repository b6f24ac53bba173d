"""ResNet-18 (He et al., 2016): four stages of two basic blocks after a CIFAR stem (3x3, no pooling) or an ImageNet one.

The ImageNet stem (``stem = "imagenet"``: 7x7 convolution with stride 2, then a 3x3 max pool with stride 2) is
the FedBM authors' network for their 128x128 medical images (their code's ``models_dict/resnet.py`` ``ResNet18``,
chosen by ``--local_model='ResNet18'`` in every command of its README): it works on a quarter of the side from
the first block on. The CIFAR stem keeps the full resolution, which at 128x128 costs about 15x the FLOPs per
image (counted in ``tests/models/test_resnet.py``); it suits 32x32 images.

FedBM trains it on every client (the FedBM paper,
"FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. IV-A, "ResNet-18 as the backbone");
MFCL's server trains it as the discriminator on the sensor module's representations
(the MFCL paper's Sec. 4, "adapted to the representation's shape": ``in_channels`` = the
representation's channels). ``width`` scales every stage (64 is the standard network;
a smaller one suits the embedded CPU settings), ``norm`` picks the normalization
(:mod:`fedprior.models.norm`).

Like every classification network in fedprior it splits into ``embed`` (images ->
(N, feature_dim) features) and ``head`` (a linear classifier), with
``forward(x) = head(embed(x))``: body/head methods (FedREP, FedROD, FedBM's fixed
classifier) train or replace the two parts separately. ``num_classes = 0`` leaves the
head out (an encoder).
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.models.norm import norm2d


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int, norm: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = norm2d(norm, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = norm2d(norm, out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), norm2d(norm, out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18: stem -> 4 stages x 2 BasicBlocks (width, 2w, 4w, 8w; strides 1, 2, 2, 2) -> global average pool.

    ``stem``: ``"cifar"`` (conv 3x3, stride 1) or ``"imagenet"`` (conv 7x7, stride 2, then max pool 3x3, stride 2).
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 64, norm: str = "bn", stem: str = "cifar") -> None:
        super().__init__()
        if stem == "cifar":
            self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), norm2d(norm, width), nn.ReLU())
        elif stem == "imagenet":
            self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 7, 2, 3, bias=False), norm2d(norm, width), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        else:
            raise ValueError(f"ResNet18: unknown stem '{stem}'; accepted: cifar, imagenet")
        blocks: list[nn.Module] = []
        channels = width
        for stage, stride in enumerate((1, 2, 2, 2)):
            out = width * 2**stage
            blocks += [BasicBlock(channels, out, stride, norm), BasicBlock(out, out, 1, norm)]
            channels = out
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feature_dim = channels
        self.head: nn.Module = nn.Linear(channels, num_classes) if num_classes > 0 else nn.Identity()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Images (N, C, H, W) -> features (N, feature_dim)."""
        return self.pool(self.blocks(self.stem(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))
