"""FedBM's conditional generator G(z) (CGDE: the FedBM paper,
"FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. III-C, Eq. 9), in the architecture of the authors' code.

The authors' generator (github.com/CUHK-AIM-Group/FedBM, ``models_dict/generator.py``)
maps a condition z (a concept embedding, 512-d there) to a 3 x 128 x 128 image:

    Linear(z_dim -> 2*ngf * s0 * s0) -> reshape (2*ngf, s0, s0)
    -> conv3x3 -> BN -> LeakyReLU(0.2)
    -> n x [upsample x2 -> conv3x3 -> BN -> LeakyReLU(0.2)]
    -> conv3x3 to the image channels -> sigmoid

with ngf = 64, s0 = 8 and n = 4 (8 -> 128). The last two upsampling blocks have ngf
channels, the others 2*ngf. Here the same network is sized for any square image:
n is the smallest number of doublings with ``side / 2^n <= 8`` and ``side`` divisible by
``2^n`` (128 -> n = 4, s0 = 8, as the code; 28 -> n = 2, s0 = 7; 32 -> n = 2, s0 = 8),
so the output needs no resizing. The output is in [0, 1] (sigmoid): the caller maps it to
the classifier's input space (the code normalizes with ImageNet's mean and std; fedprior
with the training set's per-channel mean and std).
"""

from __future__ import annotations

import torch
from torch import nn


def upsampling_plan(side: int, max_start: int = 8) -> tuple[int, int]:
    """(doublings n, start side s0) with s0 * 2^n = side and s0 <= max_start (or as small as divisibility allows)."""
    if side < 1:
        raise ValueError(f"image side must be positive, got {side}")
    n = 0
    while side % (2 ** (n + 1)) == 0 and side // 2**n > max_start:
        n += 1
    return n, side // 2**n


class ConditionalGenerator(nn.Module):
    """z (N, z_dim) -> images (N, channels, side, side) in [0, 1]."""

    def __init__(self, z_dim: int, channels: int, side: int, width: int = 64) -> None:
        super().__init__()
        self.z_dim, self.channels, self.side = z_dim, channels, side
        self.doublings, self.start = upsampling_plan(side)
        wide = 2 * width
        self.project = nn.Linear(z_dim, wide * self.start**2)
        layers: list[nn.Module] = [nn.Conv2d(wide, wide, 3, 1, 1, bias=False), nn.BatchNorm2d(wide), nn.LeakyReLU(0.2)]
        current = wide
        for i in range(self.doublings):
            out = wide if i < self.doublings - 2 else width
            layers += [nn.Upsample(scale_factor=2), nn.Conv2d(current, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out), nn.LeakyReLU(0.2)]
            current = out
        layers += [nn.Conv2d(current, channels, 3, 1, 1), nn.Sigmoid()]
        self.blocks = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = self.project(z).view(z.shape[0], -1, self.start, self.start)
        return self.blocks(out)
