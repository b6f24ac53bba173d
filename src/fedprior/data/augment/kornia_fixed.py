"""fedprior's former strong view (``strong_augment = "kornia-fixed"``), on the whole batch with parameters drawn on the device.

What the recipe is (kept for comparisons; the strong view now is :mod:`fedprior.data.augment.fixmatch`),
on images in [0, 1]:

1. kornia's weak view, ``RandomHorizontalFlip(p=0.5)`` then ``RandomCrop(padding=p,
   padding_mode="reflect")``: a flip with probability 1/2 and a crop of the reflect-padded
   image at an offset uniform in ``0..2p`` on each axis. Flipping first and cropping at
   ``dx`` is cropping at ``2p - dx`` and flipping after, and both offsets are uniform, so
   this is :func:`fedprior.data.augment.shift_flip.shift_flip` (FixMatch's weak view).
2. kornia's ``RandAugment`` list (``default_policy``, 15 operations) at the fixed
   magnitude ``M`` of kornia's 0..30 scale (``min(3 m, 29)``): each image draws ``n``
   distinct operations uniformly and applies them in the order drawn, each output clamped
   to [0, 1]. Every operation is kornia's own augmentation module with probability 1,
   applied with the parameters kornia's ``RandAugment.forward_parameters`` gives it
   (kornia 0.9), with ``t = M / 30``:

   - ``auto_contrast``, ``equalize``, ``invert``: no parameter;
   - ``brightness``, ``contrast``, ``color`` (saturation), ``sharpness``: factor
     ``0.1 + 1.8 t`` (kornia's brightness *adds* ``factor - 1``);
   - ``solarize``: threshold ``t``; ``solarize_add``: adds ``0.43 t`` and solarizes at a
     threshold uniform in [0, 1] per image (``RandomSolarize(thresholds=0.5)`` draws it
     from 0.5 +- 0.5);
   - ``posterize``: ``floor(8 - 4 t)`` bits;
   - ``rotate``: ``30 t`` degrees, ``shear_x``/``shear_y``: ``180 * 0.3 t`` (kornia's
     ``ShearX`` scales its magnitude by 180 before ``RandomShear`` reads it in degrees),
     ``translate_x``/``translate_y``: ``0.1 t`` of the width/height in pixels; each with a
     sign drawn per image (+ or - with probability 1/2); bilinear, zeros outside,
     ``align_corners=True``.
3. kornia's ``RandomErasing(scale=(c^2, c^2), ratio=(1, 1), value=0.5)``: a gray square of
   ``round(c sqrt(H W))`` pixels (at most the side) at a position uniform over those
   inside the image.

How it is computed: every parameter (the flip and the offsets, the operations of each
image, the signs, the thresholds, the square's corner) is drawn on the images' device from
one generator there; each operation runs on the whole batch (kornia's module called with
those parameters: its ``compute_transformation`` and ``apply_transform``, the methods its
own ``forward`` calls) and is kept where an image drew it (``torch.where``). No loop over
images, no ``nonzero``, nothing read back, so no host sync. kornia's own ``forward`` draws the
parameters on the CPU from torch's global generator and selects the images of each operation
with ``nonzero``: its views have the same distribution, other random numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from fedprior.data.augment.pil_ops import fill_box

Params = Callable[[torch.Tensor, float, torch.Generator | None], dict[str, torch.Tensor]]
"""``params(x, t, generator)``: kornia's parameters of the operation for every image of ``x`` at ``t = M / 30``."""


@dataclass(frozen=True)
class KorniaOp:
    """One operation of kornia's RandAugment list: its kornia module (probability 1) and how its parameters are made."""

    name: str
    module: nn.Module
    params: Params


def _sign(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """+1 or -1 per image, each with probability 1/2 (kornia's random sign of a symmetric magnitude)."""
    return 1.0 - 2.0 * (torch.rand(x.shape[0], device=x.device, generator=generator) < 0.5).to(x.dtype)


def _full(x: torch.Tensor, value: float) -> torch.Tensor:
    return torch.full((x.shape[0],), value, device=x.device, dtype=x.dtype)


def _none(x: torch.Tensor, t: float, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
    return {}


def _factor(key: str) -> Params:
    """Brightness, contrast, saturation, sharpness: the factor ``0.1 + 1.8 t``."""
    return lambda x, t, generator: {key: _full(x, 0.1 + 1.8 * t)}


def _signed(key: str, scale: Callable[[torch.Tensor, float], float], other: str | None = None) -> Params:
    """A symmetric operation: ``scale(x, t)`` with a random sign per image under ``key`` (``other``, the other axis: 0)."""

    def params(x: torch.Tensor, t: float, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
        out = {key: scale(x, t) * _sign(x, generator)}
        if other is not None:
            out[other] = _full(x, 0.0)
        return out

    return params


def _shear(key: str, other: str) -> Params:
    """``RandomShear``'s parameters: the angle (degrees) on one axis, 0 on the other, about kornia's centre ``(W/2 - 0.5, H/2 - 0.5)``."""
    signed = _signed(key, lambda x, t: 180.0 * 0.3 * t, other)

    def params(x: torch.Tensor, t: float, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
        h, w = x.shape[-2:]
        centre = torch.empty(x.shape[0], 2, device=x.device, dtype=x.dtype)  # filled on the device: no copy from the host
        centre[:, 0], centre[:, 1] = w / 2.0 - 0.5, h / 2.0 - 0.5
        return {**signed(x, t, generator), "center": centre}

    return params


def _bits(x: torch.Tensor, t: float, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
    """Posterize: kornia runs its range backwards, ``8 - 4 t`` bits, truncated to an integer."""
    return {"bits_factor": torch.full((x.shape[0],), int((1 - t) * 4.0 + 4.0), device=x.device)}


def _solarize_add(x: torch.Tensor, t: float, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
    threshold = torch.rand(x.shape[0], device=x.device, generator=generator).to(x.dtype)
    return {"thresholds": threshold, "additions": _full(x, 0.43 * t)}


def kornia_ops() -> list[KorniaOp]:
    """kornia's RandAugment list (``default_policy``, in its order) as modules with probability 1 and parameter makers."""
    import kornia.augmentation as K

    return [
        KorniaOp("auto_contrast", K.RandomAutoContrast(p=1.0), _none),
        KorniaOp("equalize", K.RandomEqualize(p=1.0), _none),
        KorniaOp("invert", K.RandomInvert(p=1.0), _none),
        KorniaOp("rotate", K.RandomRotation((0.0, 30.0), p=1.0), _signed("degrees", lambda x, t: 30.0 * t)),
        KorniaOp("posterize", K.RandomPosterize((4.0, 8.0), p=1.0), _bits),
        KorniaOp("solarize", K.RandomSolarize((0.0, 1.0), additions=0.0, p=1.0), lambda x, t, g: {"thresholds": _full(x, t), "additions": _full(x, 0.0)}),
        KorniaOp("solarize_add", K.RandomSolarize(thresholds=0.5, additions=(0.0, 0.43), p=1.0), _solarize_add),
        KorniaOp("color", K.RandomSaturation((0.1, 1.9), p=1.0), _factor("saturation_factor")),
        KorniaOp("contrast", K.RandomContrast((0.1, 1.9), p=1.0), _factor("contrast_factor")),
        KorniaOp("brightness", K.RandomBrightness((0.1, 1.9), p=1.0), _factor("brightness_factor")),
        KorniaOp("sharpness", K.RandomSharpness((0.1, 1.9), p=1.0), _factor("sharpness")),
        KorniaOp("shear_x", K.RandomShear((0.0, 0.3), p=1.0, align_corners=True), _shear("shear_x", "shear_y")),
        KorniaOp("shear_y", K.RandomShear((0.0, 0.0, 0.0, 0.3), p=1.0, align_corners=True), _shear("shear_y", "shear_x")),
        KorniaOp(
            "translate_x", K.RandomTranslate((0.0, 0.1), p=1.0, align_corners=True), _signed("translate_x", lambda x, t: 0.1 * t * x.shape[-1], "translate_y")
        ),
        KorniaOp(
            "translate_y",
            K.RandomTranslate(None, (0.0, 0.1), p=1.0, align_corners=True),
            _signed("translate_y", lambda x, t: 0.1 * t * x.shape[-2], "translate_x"),
        ),
    ]


def apply_op(op: KorniaOp, x: torch.Tensor, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """kornia's module of ``op`` on the whole batch with ``params`` (one value per image): what its ``forward`` does
    with probability 1 and these parameters, without its draws and without the checks that read values back."""
    from kornia.augmentation import GeometricAugmentationBase2D

    module: Any = op.module  # a kornia augmentation (its methods are not nn.Module's)
    flags = getattr(module, "flags", {})
    transform = module.compute_transformation(x, params, flags) if isinstance(module, GeometricAugmentationBase2D) else None
    return module.apply_transform(x, params, flags, transform)


def rand_augment(x: torch.Tensor, ops: list[KorniaOp], n: int, magnitude: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """kornia's RandAugment per image at ``magnitude`` (kornia's 0..30 scale): ``n`` distinct operations per image, in the
    order drawn, each output clamped to [0, 1]; every draw on x's device from ``generator``. Three-channel images."""
    t = magnitude / 30.0
    choice = torch.argsort(torch.rand(x.shape[0], len(ops), device=x.device, generator=generator), dim=1)[:, :n]
    for position in range(n):
        out = x
        for index, op in enumerate(ops):
            chosen = (choice[:, position] == index).view(-1, 1, 1, 1)
            out = torch.where(chosen, apply_op(op, x, op.params(x, t, generator)).clamp(0.0, 1.0), out)
        x = out
    return x


def erase(x: torch.Tensor, side: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """kornia's ``RandomErasing(scale=(side^2, side^2), ratio=(1, 1), value=0.5)``: a gray square per image at a uniform position."""
    h, w = x.shape[-2:]
    edge = round(math.sqrt(side * side * h * w))  # kornia: round(sqrt(area * ratio)), clamped to 1..side
    box_h, box_w = min(max(edge, 1), h), min(max(edge, 1), w)
    top = torch.randint(0, h - box_h + 1, (x.shape[0],), device=x.device, generator=generator)
    left = torch.randint(0, w - box_w + 1, (x.shape[0],), device=x.device, generator=generator)
    return fill_box(x, top, top + box_h, left, left + box_w, 0.5)
