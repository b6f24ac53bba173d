"""Random crop with zero padding and random horizontal/vertical flips: FedBM's augmentation of generated images.

The FedBM authors' code (``generator_driver.py``) passes every synthetic image through
RandomCrop(side, padding=4), RandomHorizontalFlip and RandomVerticalFlip (then
normalizes it), both when the server trains the generator and when a client adds
synthetic images to its batches; real images are not augmented. torchvision's transforms
applied to a batch tensor draw ONE crop and ONE flip for the whole batch, so the code
augments per batch (``same_on_batch=True``); ``False`` draws them per image. Differentiable (the
generator is trained through it); call it inside :func:`fedprior.data.augment.seeded`.
"""

from __future__ import annotations

import torch
from torch import nn


def crop_flip(images: torch.Tensor, padding: int = 4, vertical: bool = True, same_on_batch: bool = False) -> torch.Tensor:
    """A randomly cropped (from the zero-padded image) and flipped view of every image of (N, C, H, W).

    ``same_on_batch``: one crop offset and one flip decision for all N images (the authors' code), else one per image.
    """
    import kornia.augmentation as K

    height, width = images.shape[-2:]
    ops: list[nn.Module] = [
        K.RandomCrop((height, width), padding=padding, same_on_batch=same_on_batch),
        K.RandomHorizontalFlip(same_on_batch=same_on_batch),
    ]
    if vertical:
        ops.append(K.RandomVerticalFlip(same_on_batch=same_on_batch))
    return nn.Sequential(*ops)(images)
