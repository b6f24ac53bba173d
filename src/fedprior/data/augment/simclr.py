"""SimCLR's augmented views (Chen et al., 2020, Appendix A), with kornia, for MFCL and the contrastive baselines.

MFCL's clients build "two different augmented versions" of every sample (the MFCL paper's
Sec. 2.1, A(x) in Eq. 2) with SimCLR's recipe (the paper follows Chen et al. for the
contrastive part): a random resized crop (scale 0.08-1, aspect 3/4-4/3) back to the
image's size, a horizontal flip with probability 1/2, colour jitter (brightness,
contrast, saturation 0.8 s, hue 0.2 s) with probability 0.8 and grayscale with
probability 0.2, at SimCLR's CIFAR strength s = 0.5 (Appendix B.9); Gaussian blur is
left out, as SimCLR does for CIFAR. Single-channel images get brightness and contrast
jitter only (saturation, hue and grayscale mean nothing there).

Images are in [0, 1] (kornia's colour ops clip to it). The views of a whole client are
drawn in a few large calls (kornia's cost is mostly per call), all inside
:func:`~fedprior.data.augment.seeded` with the caller's seed, so the same seed gives the
same views anywhere (all ``views`` of a batch are drawn in one call, view-major).
"""

from __future__ import annotations

from functools import lru_cache

import kornia.augmentation as K
import torch
from torch import nn

from fedprior.data.augment import seeded


@lru_cache(maxsize=16)
def simclr_pipeline(channels: int, height: int, width: int, min_scale: float = 0.08, strength: float = 0.5) -> nn.Sequential:
    """The random transformation of one view for images of ``channels`` x ``height`` x ``width``."""
    s = strength
    ops: list[nn.Module] = [K.RandomResizedCrop((height, width), scale=(min_scale, 1.0)), K.RandomHorizontalFlip()]
    if channels == 3:
        ops += [K.ColorJitter(0.8 * s, 0.8 * s, 0.8 * s, 0.2 * s, p=0.8), K.RandomGrayscale(p=0.2)]
    else:
        ops += [K.ColorJitter(0.8 * s, 0.8 * s, 0.0, 0.0, p=0.8)]
    return nn.Sequential(*ops)


@torch.no_grad()
def simclr_views(images: torch.Tensor, seed: int, views: int = 2, *, min_scale: float = 0.08, strength: float = 0.5, chunk: int = 4096) -> list[torch.Tensor]:
    """``views`` independently augmented copies of ``images`` (N, C, H, W) in [0, 1], drawn from ``seed``."""
    if images.shape[0] == 0:
        return [images.clone() for _ in range(views)]
    _, c, h, w = images.shape
    pipeline = simclr_pipeline(c, h, w, min_scale, strength)
    n = images.shape[0]
    stacked = images.repeat(views, 1, 1, 1)  # one call draws every view: kornia's cost is mostly per call
    with seeded(seed, images.device):
        out = torch.cat([pipeline(stacked[i : i + chunk]) for i in range(0, stacked.shape[0], chunk)])
    return list(out.split(n))
