"""The image tower of the ``locked-text`` stand-in: a small CNN ending in a linear projection.

It is aligned, CLIP-style, to a frozen text encoder (see
:mod:`fedprior.encoders.locked_text`); the output is the projection into the text
space (384-d for MiniLM), not normalized. One architecture serves 1x8x8 digits,
1x28x28 Fashion-MNIST and 3x32x32 images:

    [conv3x3 -> BN -> ReLU] x2 (``width``, then ``2 * width`` channels), each followed by a
    2x2 max pool when the side is still >= 16 -> adaptive average pool to 4x4
    -> linear (``hidden``) -> ReLU -> linear projection (``out_dim``)

With the defaults (width 32, hidden 256) that is about 0.4M parameters, whatever the
image size (the adaptive pool fixes the size of the flattened map).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class ImageTower(nn.Module):
    """Images (N, C, H, W) -> (N, out_dim) embeddings (not normalized).

    ``forward`` takes images already scaled to [-1, 1]; :meth:`preprocess` turns uint8
    pixels into that. Call :meth:`reset_parameters` with a generator for a
    deterministic initialization that does not touch torch's global random state.
    """

    def __init__(self, in_channels: int, image_size: int, out_dim: int, width: int = 32, hidden: int = 256) -> None:
        super().__init__()
        if in_channels < 1 or image_size < 4 or out_dim < 1:
            raise ValueError(f"ImageTower needs in_channels >= 1, image_size >= 4, out_dim >= 1; got {in_channels}, {image_size}, {out_dim}")
        self.in_channels = in_channels
        self.image_size = image_size
        self.out_dim = out_dim
        layers: list[nn.Module] = []
        side, channels = image_size, in_channels
        for out_channels in (width, 2 * width):
            layers += [nn.Conv2d(channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU()]
            if side >= 16:
                layers.append(nn.MaxPool2d(2))
                side //= 2
            channels = out_channels
        layers.append(nn.AdaptiveAvgPool2d(4))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(channels * 16, hidden), nn.ReLU())
        self.projection = nn.Linear(hidden, out_dim)

    @staticmethod
    def preprocess(images: torch.Tensor) -> torch.Tensor:
        """uint8 pixels -> float in [-1, 1]."""
        return images.float().div(127.5).sub(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.head(self.features(x)))

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator) -> None:
        """He-uniform weights (PyTorch's default scheme) drawn from ``generator``; BN at identity."""
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:
                    fan_in = module.weight[0].numel()
                    bound = 1.0 / math.sqrt(fan_in)
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
            elif isinstance(module, nn.BatchNorm2d):
                module.reset_parameters()
