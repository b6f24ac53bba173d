"""Random crop with zero padding and random horizontal/vertical flips: FedBM's augmentation of generated images.

The FedBM authors' code (``generator_driver.py``) passes every synthetic image through
RandomCrop(side, padding=4), RandomHorizontalFlip and RandomVerticalFlip (then
normalizes it), both when the server trains the generator and when a client adds
synthetic images to its batches; real images are not augmented. torchvision's transforms
applied to a batch tensor draw ONE crop and ONE flip for the whole batch, so the code
augments per batch (``same_on_batch=True``); ``False`` draws them per image.

The same distribution as kornia's ``RandomCrop((H, W), padding=p)``,
``RandomHorizontalFlip()`` and ``RandomVerticalFlip()`` in that order: the image zero-padded by ``p`` on every side, cropped back to H x W at
an offset uniform in ``0..2p`` on each axis (output pixel ``(i, j)`` reads padded pixel
``(i + dy, j + dx)``), then mirrored left-right and upside-down, each with probability
1/2. Here every parameter is drawn on the images' device from ``generator`` (a generator
there: :func:`fedprior.data.augment.device_generator`; torch's global generator on that
device when None), and the crops and flips are two ``gather``s over the padded batch:
no Python loop over images, no host sync, shapes that do not depend on the draws.
Differentiable in the images (the generator is trained through it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def crop_flip(
    images: torch.Tensor, padding: int = 4, vertical: bool = True, same_on_batch: bool = False, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A randomly cropped (from the zero-padded image) and flipped view of every image of (N, C, H, W).

    ``same_on_batch``: one crop offset and one flip decision for all N images (the authors' code), else one per image;
    ``vertical``: the vertical flip too. Draws, in this order, from ``generator`` (on the images' device): the row
    offsets, the column offsets, the left-right flips, the upside-down flips (one value each, or one per image).
    """
    n, c, h, w = images.shape
    device = images.device
    draws = 1 if same_on_batch else n
    dy = torch.randint(0, 2 * padding + 1, (draws,), device=device, generator=generator)
    dx = torch.randint(0, 2 * padding + 1, (draws,), device=device, generator=generator)
    mirrored = torch.rand(draws, device=device, generator=generator) < 0.5
    rows = dy.view(-1, 1) + torch.arange(h, device=device).view(1, h)
    cols = dx.view(-1, 1) + torch.arange(w, device=device).view(1, w)
    cols = torch.where(mirrored.view(-1, 1), cols.flip(1), cols)  # the window read right to left: its mirror image
    if vertical:
        upside_down = torch.rand(draws, device=device, generator=generator) < 0.5
        rows = torch.where(upside_down.view(-1, 1), rows.flip(1), rows)
    padded = F.pad(images, (padding, padding, padding, padding)) if padding else images
    out = padded.gather(2, rows.view(-1, 1, h, 1).expand(n, c, h, w + 2 * padding))
    return out.gather(3, cols.view(-1, 1, 1, w).expand(n, c, h, w))
