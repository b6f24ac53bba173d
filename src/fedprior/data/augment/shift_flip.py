"""FixMatch's weak view on a whole batch: a random horizontal flip and a random translation, per image, on the device.

FixMatch's code (and ``kornia.augmentation.RandomCrop(padding=p, padding_mode="reflect")``,
which fedprior used before) translates an image by cropping its reflect-padded copy at a
random offset: output pixel ``(i, j)`` reads padded pixel ``(i + dy, j + dx)`` with ``dy``,
``dx`` uniform in ``0..2p``, a shift of up to ``p`` pixels each way. Here every image of
the batch draws its offsets and its flip from a generator on the batch's device, and the
crops are read with two ``gather``s over the padded batch: no Python loop over images,
no host sync, shapes that do not depend on the draws.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def shift_flip(x: torch.Tensor, pad: int, flip: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each image of ``x`` (N, C, H, W) mirrored left-right with probability 1/2 (if ``flip``) and cropped from its
    ``pad``-pixel reflect padding at an offset uniform in ``0..2 pad`` on each axis (``generator`` on x's device)."""
    n, c, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    dy = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    rows = dy.view(n, 1) + torch.arange(h, device=x.device).view(1, h)
    cols = dx.view(n, 1) + torch.arange(w, device=x.device).view(1, w)
    if flip:
        mirrored = torch.rand(n, device=x.device, generator=generator) < 0.5
        cols = torch.where(mirrored.view(n, 1), cols.flip(1), cols)  # the window read right to left: its mirror image
    out = padded.gather(2, rows.view(n, 1, h, 1).expand(n, c, h, w + 2 * pad))
    return out.gather(3, cols.view(n, 1, 1, w).expand(n, c, h, w))
