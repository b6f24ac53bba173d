"""Small hand-made data the tests train on."""

from __future__ import annotations

import torch


def toy_images(n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Separable toy data: class k lights up the k-th band of an 8x8 image."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = 0.3 * torch.randn(n, 1, 8, 8, generator=g)
    for k in range(3):
        x[y == k, :, 2 * k : 2 * k + 2, :] += 1.5
    return {"x": x, "y": y}
