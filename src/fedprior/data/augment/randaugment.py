"""RandAugment per image, as FixMatch defines it and as the FedDB authors' code runs it, on ``(N, C, H, W)`` in [0, 1].

``fixmatch`` -- FixMatch's strong augmentation (Sohn et al., 2020, Sec. 2.3 and its
RandAugment variant): each image draws ``n = 2`` operations uniformly (with replacement,
as ``np.random.choice`` in google-research/fixmatch ``libml/augment.py`` and
``random.choices`` in kekmodel/FixMatch-pytorch) from FixMatch's list of 14, and each
operation draws its magnitude uniformly over its range, per image (FixMatch's RandAugment
samples a random magnitude instead of RandAugment's fixed one; the paper's appendix
table could not be read here, the ranges below are those of the public code); then
Cutout, a gray square of half the side (google-research ``cutout_numpy(size=16)`` on 32-pixel images: centre
``(i, j)`` uniform over the pixels, rows ``i - s//2 .. i + s//2 - 1`` clipped by the
border, pixels set to the mid-gray 0.5). The list and its ranges, as kekmodel's
``fixmatch_augment_pool`` (commented "FixMatch paper") encodes them:

    identity; autocontrast; equalize; brightness, color, contrast, sharpness: factor
    U[0.05, 0.95]; posterize: bits in {4, ..., 8}; rotate: U[-30, 30] degrees;
    shear_x, shear_y: U[-0.3, 0.3]; solarize: threshold U[0, 1];
    translate_x, translate_y: U[-0.3, 0.3] of the side.

Every drawn operation is applied. (Both public FixMatch codes differ in small ways:
google-research's ``AugmentPoolRAMC`` applies each operation with probability 0.5 at a
level in 1..9 out of 10, with enhancement factors 0.1 + 1.8 level/10; kekmodel's
``RandAugmentMC`` applies each with probability 0.5 at ``v`` in 1..m-1 on the ranges
above. Geometric operations use PIL's default nearest resampling in both; kekmodel fills
the uncovered corners black, as here, google-research's RGBA round trip fills them gray.)

``feddb-code`` -- the FedDB authors' code (github.com/GuogangZhu/FedDB,
``src/datasets/randaugment.py``, SemiFL's; read for this module): ``RandAugment(n=2,
m=10)`` draws ``n`` operations with replacement (``torch.randint``) from a pool of 15 and
applies each with probability 0.5 (``rand + U(0.2, 0.8) >= 1``), always at the fixed
magnitude ``m`` (``v = m/10`` of each maximum), with bilinear resampling for shear and
translate (rotate calls ``img.rotate(v)``: PIL's default, nearest):

    autocontrast; brightness, color, contrast, sharpness: factor 1.8 m/10 + 0.1
    (1.9 at m = 10); CutoutConst: a gray (127) square of 40 m/10 pixels, corner
    ``int(max(0, c - s/2))`` with ``c`` uniform over [0, side), PIL's rectangle
    (both corners inclusive) clipped by the border; equalize; invert; posterize to
    4 m/10 bits; rotate by +-30 m/10 degrees; shear_x, shear_y by +-0.3 m/10;
    solarize at threshold 256 - 256 m/10 (0 at m = 10: every pixel inverted);
    translate_x, translate_y by +-100 m/10 pixels (at m = 10 the image leaves the frame).

There is no Cutout after the operations (it is one of them). The code's pixel sizes are
for its 32-pixel images; here they are scaled to the side (40/32 and 100/32 of it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fedprior.data.augment import pil_ops as ops

Sampler = Callable[..., torch.Tensor]
"""``sample(N, device, generator=None)``: one value per image (``(N,)``, or ``(N, k)`` for an op with several),
drawn on ``device`` from ``generator`` (torch's global generator when None)."""
Apply = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Matrix = Callable[[torch.Tensor, int, int], torch.Tensor]


@dataclass(frozen=True)
class Op:
    """One RandAugment operation, with ``v = sample(N, device, generator)`` one value per image.

    A pixel operation has ``apply(x, v)``; a geometric one has ``matrix(v, H, W)``, PIL's
    affine matrix (:func:`fedprior.data.augment.pil_ops.affine`), so that every geometric
    operation of a round is one resampling of the batch (one per ``resample`` mode,
    ``"nearest"`` or ``"bilinear"``).
    """

    name: str
    sample: Sampler
    apply: Apply | None = None
    matrix: Matrix | None = None
    resample: str = "nearest"


def _uniform(low: float, high: float) -> Sampler:
    return lambda n, device, generator=None: low + (high - low) * torch.rand(n, device=device, generator=generator)


def _integers(low: int, high: int) -> Sampler:
    """Integers ``low..high``, both included."""
    return lambda n, device, generator=None: torch.randint(low, high + 1, (n,), device=device, generator=generator)


def _signed(value: float) -> Sampler:
    """``+value`` or ``-value`` with probability 1/2 each (the codes' random sign)."""
    return lambda n, device, generator=None: value * (1.0 - 2.0 * (torch.rand(n, device=device, generator=generator) < 0.5).float())


def _fixed(value: float) -> Sampler:
    return lambda n, device, generator=None: torch.full((n,), float(value), device=device)


def _cutout_square(side: float) -> Sampler:
    """The FedDB code's CutoutConst: ``(N, 3)`` = the side as a fraction of the width, and the centre's two uniforms."""
    return lambda n, device, generator=None: torch.cat(
        [torch.full((n, 1), float(side), device=device), torch.rand(n, 2, device=device, generator=generator)], dim=1
    )


def _of_width(matrix: Matrix) -> Matrix:
    """``matrix`` with ``v`` given as a fraction of the image width."""
    return lambda v, h, w: matrix(v * w, h, w)


def _of_height(matrix: Matrix) -> Matrix:
    return lambda v, h, w: matrix(v * h, h, w)


def fixmatch_ops() -> list[Op]:
    """FixMatch's RandAugment list with its magnitude ranges (kekmodel's ``fixmatch_augment_pool``)."""
    factor = _uniform(0.05, 0.95)
    none = _fixed(0)
    return [
        Op("autocontrast", none, ops.autocontrast),
        Op("brightness", factor, ops.brightness),
        Op("color", factor, ops.color),
        Op("contrast", factor, ops.contrast),
        Op("equalize", none, ops.equalize),
        Op("identity", none, ops.identity),
        Op("posterize", _integers(4, 8), ops.posterize),
        Op("rotate", _uniform(-30.0, 30.0), matrix=ops.rotate_matrix),
        Op("sharpness", factor, ops.sharpness),
        Op("shear_x", _uniform(-0.3, 0.3), matrix=ops.shear_x_matrix),
        Op("shear_y", _uniform(-0.3, 0.3), matrix=ops.shear_y_matrix),
        Op("solarize", _uniform(0.0, 1.0), ops.solarize),
        Op("translate_x", _uniform(-0.3, 0.3), matrix=_of_width(ops.translate_x_matrix)),
        Op("translate_y", _uniform(-0.3, 0.3), matrix=_of_height(ops.translate_y_matrix)),
    ]


def cutout_fixmatch(x: torch.Tensor, side: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """google-research ``cutout_numpy``: a ``side`` square (``2 (side // 2)`` pixels) of gray 0.5 at a uniform pixel centre, cut by the border."""
    n, _, h, w = x.shape
    i = torch.randint(0, h, (n,), device=x.device, generator=generator)
    j = torch.randint(0, w, (n,), device=x.device, generator=generator)
    half = side // 2
    return ops.fill_box(x, (i - half).clamp_min(0), (i + half).clamp_max(h), (j - half).clamp_min(0), (j + half).clamp_max(w), 0.5)


def cutout_feddb_code(x: torch.Tensor, v: torch.Tensor, centre: torch.Tensor | None = None) -> torch.Tensor:
    """The FedDB code's CutoutConst: a ``v``-pixel square of gray 127, PIL's inclusive rectangle from ``int(max(0, c - v/2))``.

    ``centre`` (N, 2): the uniforms in [0, 1) that place the centre ``c`` (x, then y) over [0, side); drawn from
    torch's global generator when None.
    """
    n, _, h, w = x.shape
    side = v.to(torch.float32)
    u = torch.rand(n, 2, device=x.device) if centre is None else centre.to(device=x.device, dtype=torch.float32)
    cx = u[:, 0] * w
    cy = u[:, 1] * h
    x0 = (cx - side / 2).clamp_min(0).floor()
    y0 = (cy - side / 2).clamp_min(0).floor()
    x1 = (x0 + side).clamp_max(w).floor()
    y1 = (y0 + side).clamp_max(h).floor()
    return ops.fill_box(x, y0.long(), y1.long() + 1, x0.long(), x1.long() + 1, 127.0 / 255.0)


def feddb_code_ops(m: float = 10.0) -> list[Op]:
    """The FedDB code's ``rand_augment_pool`` at its fixed magnitude ``m`` (0..10), pixel sizes scaled from 32-pixel images."""
    level = m / 10.0
    factor = _fixed(1.8 * level + 0.1)
    none = _fixed(0)
    return [
        Op("autocontrast", none, ops.autocontrast),
        Op("brightness", factor, ops.brightness),
        Op("color", factor, ops.color),
        Op("contrast", factor, ops.contrast),
        Op("cutout", _cutout_square(40.0 * level / 32.0), lambda x, v: cutout_feddb_code(x, v[:, 0] * x.shape[-1], v[:, 1:])),
        Op("equalize", none, ops.equalize),
        Op("invert", none, ops.invert),
        Op("posterize", _fixed(int(4 * level)), ops.posterize),
        Op("rotate", _signed(30.0 * level), matrix=ops.rotate_matrix),  # img.rotate(v): PIL's default, nearest
        Op("sharpness", factor, ops.sharpness),
        Op("shear_x", _signed(0.3 * level), matrix=ops.shear_x_matrix, resample="bilinear"),
        Op("shear_y", _signed(0.3 * level), matrix=ops.shear_y_matrix, resample="bilinear"),
        Op("solarize", _fixed((256 - int(256 * level)) / 255.0), ops.solarize),
        Op("translate_x", _signed(100.0 * level / 32.0), matrix=_of_width(ops.translate_x_matrix), resample="bilinear"),
        Op("translate_y", _signed(100.0 * level / 32.0), matrix=_of_height(ops.translate_y_matrix), resample="bilinear"),
    ]


def rand_augment(x: torch.Tensor, pool: list[Op], n: int, probability: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` rounds; in each, every image draws one operation of ``pool`` and its magnitude, applied with ``probability``.

    Every pixel operation is computed on the whole batch and kept where an image drew it,
    the geometric ones as one resampling per mode with each image's matrix
    (``torch.where``, no boolean indexing, so no host sync on a GPU); every draw (the
    operation, whether it applies, its magnitude) is made on x's device from ``generator``
    (a generator there: :func:`fedprior.data.augment.device_generator`; torch's global
    generator when None).
    """
    count, _, height, width = x.shape
    modes = sorted({op.resample for op in pool if op.matrix is not None})
    for _ in range(n):
        choice = torch.randint(0, len(pool), (count,), device=x.device, generator=generator)
        applied = torch.rand(count, device=x.device, generator=generator) < probability
        out = x
        matrix = {mode: ops.identity_matrix(count, x.device) for mode in modes}
        moved = {mode: torch.zeros(count, dtype=torch.bool, device=x.device) for mode in modes}
        for index, op in enumerate(pool):
            v = op.sample(count, x.device, generator)
            chosen = (choice == index) & applied
            if op.matrix is not None:
                matrix[op.resample] = torch.where(chosen.view(-1, 1, 1), op.matrix(v, height, width), matrix[op.resample])
                moved[op.resample] = moved[op.resample] | chosen
            elif op.apply is not None:
                out = torch.where(chosen.view(-1, 1, 1, 1), op.apply(x, v).clamp(0.0, 1.0), out)
        for mode in modes:
            out = torch.where(moved[mode].view(-1, 1, 1, 1), ops.affine(x, matrix[mode], mode), out)
        x = out
    return x
