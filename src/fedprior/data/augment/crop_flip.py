"""Random crop with zero padding and random horizontal/vertical flips: FedBM's augmentation of generated images.

The FedBM authors' code (``generator_driver.py``) passes every synthetic image through
RandomCrop(side, padding=4), RandomHorizontalFlip and RandomVerticalFlip (then
normalizes it), both when the server trains the generator and when a client adds
synthetic images to its batches; real images are not augmented. Differentiable (the
generator is trained through it); call it inside :func:`fedprior.data.augment.seeded`.
"""

from __future__ import annotations

import torch
from torch import nn


def crop_flip(images: torch.Tensor, padding: int = 4, vertical: bool = True) -> torch.Tensor:
    """A randomly cropped (from the zero-padded image) and flipped view of every image of (N, C, H, W)."""
    import kornia.augmentation as K

    height, width = images.shape[-2:]
    ops: list[nn.Module] = [K.RandomCrop((height, width), padding=padding), K.RandomHorizontalFlip()]
    if vertical:
        ops.append(K.RandomVerticalFlip())
    return nn.Sequential(*ops)(images)
