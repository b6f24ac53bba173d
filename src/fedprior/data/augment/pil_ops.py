"""RandAugment's image operations with PIL's semantics, batched on ``(N, C, H, W)`` tensors in [0, 1].

FixMatch (Sohn et al., 2020) and the FedDB/SemiFL code run RandAugment (Cubuk et al.,
2020) on PIL images; these are the same operations on tensors, one parameter per image
(a ``(N,)`` tensor ``v``), so that a batch is augmented in one call per operation.
What each operation does is PIL's (``ImageEnhance``, ``ImageOps``, ``Image.transform``):

- ``brightness``, ``contrast``, ``color``, ``sharpness``: ``ImageEnhance``'s blend
  ``degenerate + v (x - degenerate)``, clamped to [0, 1], with the degenerate image
  black (brightness: ``v x``), the gray of the image's mean luminance rounded to an
  8-bit level (contrast), the image's luminance (color; the identity on one channel),
  PIL's SMOOTH filter ``[[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13`` with border pixels
  kept (sharpness). kornia's ``adjust_brightness`` adds instead of multiplying and its
  ``adjust_contrast`` does not blend with the mean, so brightness, contrast and color are
  our own lines; sharpness is ``kornia.enhance.sharpness``, which is PIL's.
- ``posterize`` (keep ``v`` high bits), ``solarize`` (invert pixels ``>= v``),
  ``equalize``: ``kornia.enhance.posterize``/``solarize``/``equalize``, which are PIL's on
  the 8-bit level ``floor(255 x)``; ``autocontrast`` (each channel stretched from its
  min..max to 0..1, unchanged if constant) and ``invert`` are our own lines.
- ``rotate`` (``v`` degrees counter-clockwise about the centre), ``shear_x``/``shear_y``
  (PIL's affine ``(1, v, 0, 0, 1, 0)`` / ``(1, 0, 0, v, 1, 0)``: about the top-left
  corner), ``translate_x``/``translate_y`` (``v`` pixels; output pixel ``(x, y)`` reads
  input ``(x + v, y)``): PIL's ``Image.transform`` convention, our own sampler (kornia's
  ``warp_affine`` uses another pixel-centre convention). Each output pixel centre
  ``(x + 0.5, y + 0.5)`` is mapped to input coordinates; one that falls outside the image
  is black (PIL's fill for RGB and L images); ``nearest`` (PIL's default, used by FixMatch's
  code) reads the input pixel ``floor`` of the coordinate, ``bilinear`` (the FedDB code's
  shear and translate) interpolates pixel centres with the border repeated, as PIL does.

Colour operations work on float pixels, without PIL's rounding to 8 bits after each
operation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LUMA = (0.299, 0.587, 0.114)
"""PIL's ``convert("L")`` weights (ITU-R 601-2)."""


def _per_image(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return v.to(device=x.device, dtype=x.dtype).view(-1, 1, 1, 1)


def _blend(degenerate: torch.Tensor, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PIL's ``Image.blend(degenerate, x, v)``, clamped to [0, 1]."""
    return (degenerate + _per_image(v, x) * (x - degenerate)).clamp(0.0, 1.0)


def _luminance(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] == 1:
        return x
    r, g, b = LUMA
    return x[:, 0:1] * r + x[:, 1:2] * g + x[:, 2:3] * b  # Python-float weights: no constant copied to the device


def identity(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return x


def brightness(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Brightness(v)``: blend with black, ``v x`` clamped."""
    return _blend(torch.zeros_like(x), x, v)


def contrast(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Contrast(v)``: blend with the gray of the mean luminance (rounded to an 8-bit level, as PIL)."""
    mean = _luminance(x).mean(dim=(1, 2, 3), keepdim=True)
    mean = torch.floor(mean * 255.0 + 0.5) / 255.0
    return _blend(mean.expand_as(x), x, v)


def color(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Color(v)``: blend with the luminance image (a gray image is left as it is)."""
    return _blend(_luminance(x).expand_as(x), x, v)


def sharpness(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Sharpness(v)``: blend with PIL's SMOOTH-filtered image, border pixels kept (kornia's is PIL's)."""
    import kornia.enhance

    return kornia.enhance.sharpness(x, v.to(device=x.device, dtype=x.dtype))


def autocontrast(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageOps.autocontrast``: each channel stretched from its min..max to 0..1; a constant channel is kept."""
    low = x.amin(dim=(2, 3), keepdim=True)
    high = x.amax(dim=(2, 3), keepdim=True)
    span = high - low
    return torch.where(span > 0, (x - low) / span.clamp_min(1e-12), x)


def equalize(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageOps.equalize`` per channel (kornia's, which is PIL's on the 8-bit levels)."""
    import kornia.enhance

    return kornia.enhance.equalize(x)


def invert(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageOps.invert``."""
    return 1.0 - x


def posterize(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageOps.posterize(v)``: keep the ``v`` high bits of each 8-bit level (``v`` in 0..8)."""
    import kornia.enhance

    return kornia.enhance.posterize(x, v.to(device=x.device, dtype=torch.long))


def solarize(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``ImageOps.solarize(255 v)``: pixels at or above the threshold ``v`` become ``1 - x``."""
    import kornia.enhance

    return kornia.enhance.solarize(x, v.to(device=x.device, dtype=x.dtype))


# -- geometry: PIL's Image.transform(size, AFFINE, (a, b, c, d, e, f)) ------------------------------------


def affine(x: torch.Tensor, matrix: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    """PIL's affine transform, one ``(2, 3)`` matrix per image: output pixel centre ``p`` reads input ``matrix @ (p, 1)``.

    Coordinates are continuous with pixel ``i`` spanning ``[i, i + 1)``; an output pixel whose
    input point lies outside the image is 0 (black).
    """
    n, c, h, w = x.shape
    m = matrix.to(device=x.device, dtype=x.dtype).view(n, 6, 1)
    px = (torch.arange(w, device=x.device, dtype=x.dtype) + 0.5).repeat(h).view(1, h * w)
    py = (torch.arange(h, device=x.device, dtype=x.dtype) + 0.5).repeat_interleave(w).view(1, h * w)
    sx = m[:, 0] * px + m[:, 1] * py + m[:, 2]  # (N, H*W)
    sy = m[:, 3] * px + m[:, 4] * py + m[:, 5]
    inside = (sx >= 0) & (sx < w) & (sy >= 0) & (sy < h)
    if mode == "nearest":
        index = (sy.floor().clamp(0, h - 1) * w + sx.floor().clamp(0, w - 1)).long()
        out = x.flatten(2).gather(2, index.unsqueeze(1).expand(-1, c, -1))
    elif mode == "bilinear":
        grid = torch.stack([2.0 * sx / w - 1.0, 2.0 * sy / h - 1.0], dim=-1).view(n, h, w, 2)
        out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False).flatten(2)
    else:
        raise ValueError(f"resample mode must be 'nearest' or 'bilinear', got {mode!r}")
    return torch.where(inside.unsqueeze(1), out, torch.zeros_like(out)).view(n, c, h, w)


def _matrix(v: torch.Tensor, a, b, c, d, e, f) -> torch.Tensor:
    """Per-image (2, 3) matrices from six entries, each a tensor like ``v`` or a number (filled on the device, not copied there)."""
    rows = [t.to(v.dtype).expand_as(v) if isinstance(t, torch.Tensor) else torch.full_like(v, float(t)) for t in (a, b, c, d, e, f)]
    return torch.stack(rows, dim=-1).view(-1, 2, 3)


def rotate_matrix(v: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``Image.rotate(v)``: ``v`` degrees counter-clockwise about the centre ``(W/2, H/2)``: input = R(-v) (p - centre) + centre."""
    radians = v.to(torch.float64) * (math.pi / 180.0)
    cos, sin = torch.cos(radians), torch.sin(radians)
    cx, cy = width / 2.0, height / 2.0
    return _matrix(cos, cos, -sin, cx - cos * cx + sin * cy, sin, cos, cy - sin * cx - cos * cy).to(torch.float32)


def shear_x_matrix(v: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """PIL's ShearX: affine ``(1, v, 0, 0, 1, 0)``, input x = x + v y (about the top-left corner)."""
    return _matrix(v.float(), 1.0, v.float(), 0.0, 0.0, 1.0, 0.0)


def shear_y_matrix(v: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """PIL's ShearY: affine ``(1, 0, 0, v, 1, 0)``, input y = v x + y."""
    return _matrix(v.float(), 1.0, 0.0, 0.0, v.float(), 1.0, 0.0)


def translate_x_matrix(v: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """PIL's TranslateX by ``v`` pixels: affine ``(1, 0, v, 0, 1, 0)``, the content moves left for ``v > 0``."""
    return _matrix(v.float(), 1.0, 0.0, v.float(), 0.0, 1.0, 0.0)


def translate_y_matrix(v: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """PIL's TranslateY by ``v`` pixels: affine ``(1, 0, 0, 0, 1, v)``, the content moves up for ``v > 0``."""
    return _matrix(v.float(), 1.0, 0.0, 0.0, 0.0, 1.0, v.float())


def identity_matrix(count: int, device: torch.device) -> torch.Tensor:
    return torch.eye(2, 3, device=device).expand(count, 2, 3)


def rotate(x: torch.Tensor, v: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    return affine(x, rotate_matrix(v, *x.shape[-2:]), mode)


def shear_x(x: torch.Tensor, v: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    return affine(x, shear_x_matrix(v, *x.shape[-2:]), mode)


def shear_y(x: torch.Tensor, v: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    return affine(x, shear_y_matrix(v, *x.shape[-2:]), mode)


def translate_x(x: torch.Tensor, v: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    return affine(x, translate_x_matrix(v, *x.shape[-2:]), mode)


def translate_y(x: torch.Tensor, v: torch.Tensor, mode: str = "nearest") -> torch.Tensor:
    return affine(x, translate_y_matrix(v, *x.shape[-2:]), mode)


def fill_box(x: torch.Tensor, top: torch.Tensor, bottom: torch.Tensor, left: torch.Tensor, right: torch.Tensor, value: float) -> torch.Tensor:
    """Rows ``top <= i < bottom`` and columns ``left <= j < right`` of each image set to ``value`` (Cutout)."""
    h, w = x.shape[-2:]
    rows = torch.arange(h, device=x.device).view(1, h, 1)
    cols = torch.arange(w, device=x.device).view(1, 1, w)
    box = (rows >= top.view(-1, 1, 1)) & (rows < bottom.view(-1, 1, 1)) & (cols >= left.view(-1, 1, 1)) & (cols < right.view(-1, 1, 1))
    return torch.where(box.unsqueeze(1), torch.full_like(x, value), x)
