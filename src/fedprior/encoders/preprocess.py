"""CLIP's image preprocessing written on tensors (there is no torchvision here).

CLIP (Radford et al., 2021) feeds its image tower RGB images resized so that the
shorter side is ``size`` (bicubic), center-cropped to ``crop`` x ``crop``, scaled to
[0, 1] and normalized per channel. This module does the same on batches of uint8
tensors:

1. grayscale (1 channel) is repeated to 3 channels; 4 channels (RGBA) keep the first 3;
2. resize the shorter side to ``size`` with bicubic interpolation and antialiasing
   (``torch.nn.functional.interpolate(..., antialias=True)``, the kernel PIL uses,
   a = -0.5); the longer side becomes ``int(size * long / short)`` as in torchvision;
3. the result is rounded and clamped to 0..255, as PIL's uint8 output is, so values
   match the reference pipeline (PIL resize, then ``ToTensor``);
4. center crop to ``crop`` (default ``size``), offsets ``round((H - crop) / 2)``;
5. divide by 255 and normalize with ``mean`` / ``std`` (CLIP's by default, or the
   values a model's config gives).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

PREPROCESS_VERSION = "clip-tensor-v1"
"""Changes whenever the numbers this module produces change (it enters encoder fingerprints)."""


@dataclass(frozen=True)
class PreprocessConfig:
    """Everything that determines the preprocessed pixels: resize target, crop, mean, std."""

    size: int = 224
    """The shorter side after resizing."""
    crop: int | None = None
    """Side of the square center crop; None: ``size`` (filled in, so equal settings compare equal)."""
    mean: tuple[float, float, float] = CLIP_MEAN
    std: tuple[float, float, float] = CLIP_STD

    def __post_init__(self) -> None:
        if self.size < 1 or (self.crop is not None and not 1 <= self.crop <= self.size):
            raise ValueError(f"preprocessing needs size >= 1 and 1 <= crop <= size, got size={self.size}, crop={self.crop}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError(f"preprocessing needs 3 means and 3 positive stds, got mean={self.mean}, std={self.std}")
        if self.crop is None:
            object.__setattr__(self, "crop", self.size)
        object.__setattr__(self, "mean", tuple(float(m) for m in self.mean))
        object.__setattr__(self, "std", tuple(float(s) for s in self.std))

    @property
    def crop_size(self) -> int:
        assert self.crop is not None, "set by __post_init__"
        return self.crop

    def describe(self) -> str:
        """A stable text form (enters encoder fingerprints)."""
        mean = ",".join(f"{m:.8g}" for m in self.mean)
        std = ",".join(f"{s:.8g}" for s in self.std)
        return f"{PREPROCESS_VERSION}:size={self.size}:crop={self.crop_size}:mean={mean}:std={std}"


def resized_shape(height: int, width: int, size: int) -> tuple[int, int]:
    """(H', W') with the shorter side ``size`` and the aspect ratio kept (torchvision's rounding)."""
    if height <= width:
        return size, int(size * width / height)
    return int(size * height / width), size


def to_rgb(images: torch.Tensor) -> torch.Tensor:
    """(N, 1|3|4, H, W) -> (N, 3, H, W): gray repeated, alpha dropped."""
    channels = images.shape[1]
    if channels == 1:
        return images.expand(-1, 3, -1, -1)
    if channels == 3:
        return images
    if channels == 4:
        return images[:, :3]
    raise ValueError(f"images must have 1, 3 or 4 channels, got {channels}")


def center_crop(images: torch.Tensor, crop: int) -> torch.Tensor:
    """Center crop of side ``crop`` (top/left offsets ``round((H - crop) / 2)``, like torchvision)."""
    height, width = images.shape[-2:]
    top = int(round((height - crop) / 2.0))
    left = int(round((width - crop) / 2.0))
    return images[..., top : top + crop, left : left + crop]


def preprocess_images(images: np.ndarray | torch.Tensor, config: PreprocessConfig = PreprocessConfig()) -> torch.Tensor:
    """uint8 images (N, C, H, W) -> float32 (N, 3, crop, crop), CLIP-normalized (see the module docstring)."""
    x = torch.as_tensor(images)
    if x.ndim != 4 or x.dtype != torch.uint8:
        raise ValueError(f"images must be uint8 (N, C, H, W), got {x.dtype} {tuple(x.shape)}")
    x = to_rgb(x).float()
    height, width = x.shape[-2:]
    target = resized_shape(height, width, config.size)
    if target != (height, width):
        x = F.interpolate(x, size=target, mode="bicubic", align_corners=False, antialias=True)
        x = x.clamp_(0.0, 255.0).round_()
    x = center_crop(x, config.crop_size).div(255.0)
    mean = torch.tensor(config.mean, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(config.std, dtype=torch.float32).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()
