"""Image shifts that make the domains of a feature-shift federation (``partition.domains``): rotations and styles.

Both work on ``uint8 (N, C, H, W)`` images and return them in that form, batch by batch, with kornia's image operations:

- :func:`rotated`: image i turned counterclockwise by ``angles[domains[i]]`` degrees (multiples of 90 exactly, by
  ``torch.rot90``; other angles bilinearly, by ``kornia.geometry.transform.rotate``, corners filled with 0): the
  rotated MNIST / CIFAR-10 of Ghosh et al., "An Efficient Framework for Clustered Federated Learning", NeurIPS 2020, Sec. 6;
- :func:`styled`: image i in the style ``styles[domains[i]]``: ``original``; ``low-contrast`` (contrast around the image's
  mean scaled by :data:`CONTRAST`, ``kornia.enhance.adjust_contrast_with_mean_subtraction``); ``blur`` (Gaussian, sigma
  :data:`BLUR_SIGMA`, ``kornia.filters.gaussian_blur2d``); ``noise`` (additive Gaussian noise of sd :data:`NOISE_SD` of the
  range, from a fixed seed); ``inverted`` (``kornia.enhance.invert``).

A shift is a fixed function of the images (the noise's seed included), so every run of a config sees the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

CONTRAST = 0.35
BLUR_SIGMA = 1.0
NOISE_SD = 0.25
NOISE_SEED = 0
CHUNK = 8192


def _by_domain(images: np.ndarray, domains: np.ndarray, shift: Callable[[torch.Tensor, int, torch.Generator], torch.Tensor]) -> np.ndarray:
    """``shift(x, d, generator)`` on the images of each domain d, as floats in [0, 1], in chunks; the result as uint8."""
    out = images.copy()
    generator = torch.Generator().manual_seed(NOISE_SEED)
    for d in np.unique(domains):
        rows = np.flatnonzero(domains == d)
        for start in range(0, rows.size, CHUNK):
            chunk = rows[start : start + CHUNK]
            x = torch.from_numpy(images[chunk]).float() / 255.0
            y = shift(x, int(d), generator).clamp(0.0, 1.0)
            out[chunk] = (y * 255.0).round().to(torch.uint8).numpy()
    return out


def rotated(images: np.ndarray, domains: np.ndarray, angles: Sequence[float]) -> np.ndarray:
    """Each image turned counterclockwise by its domain's angle in degrees (square images for the multiples of 90)."""

    def turn(x: torch.Tensor, d: int, _: torch.Generator) -> torch.Tensor:
        angle = float(angles[d]) % 360.0
        if angle % 90.0 == 0.0:
            return torch.rot90(x, int(angle // 90), dims=(2, 3))
        from kornia.geometry.transform import rotate

        return rotate(x, torch.full((x.shape[0],), angle), mode="bilinear", padding_mode="zeros", align_corners=True)

    return _by_domain(images, domains, turn)


def styled(images: np.ndarray, domains: np.ndarray, styles: Sequence[str]) -> np.ndarray:
    """Each image in its domain's style (:data:`fedprior.partition.domains.STYLES` names them)."""
    from kornia.enhance import adjust_contrast_with_mean_subtraction, invert
    from kornia.filters import gaussian_blur2d

    def style(x: torch.Tensor, d: int, generator: torch.Generator) -> torch.Tensor:
        name = styles[d]
        if name == "original":
            return x
        if name == "low-contrast":
            return adjust_contrast_with_mean_subtraction(x, CONTRAST)
        if name == "blur":
            size = 2 * int(np.ceil(2 * BLUR_SIGMA)) + 1
            return gaussian_blur2d(x, (size, size), (BLUR_SIGMA, BLUR_SIGMA))
        if name == "noise":
            return x + NOISE_SD * torch.randn(x.shape, generator=generator)
        if name == "inverted":
            return invert(x)
        raise ValueError(f"unknown style {name!r}")

    return _by_domain(images, domains, style)
