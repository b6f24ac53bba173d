"""Per-channel pixel standardisation of images, and its inverse back to [0, 1] pixels.

fedprior feeds the models standardized pixels: ``uint8`` images scaled to [0, 1],
then ``(x - mean) / std`` per channel, with the mean and std of the *training*
images (:meth:`PixelStandardizer.fit`; ``experiments/inputs.py`` fits it once per
run and puts the statistics on the Task as ``pixel_mean`` and ``pixel_std``).
Whatever needs [0, 1] pixels again undoes it with :meth:`PixelStandardizer.invert`
(``x * std + mean``) or :meth:`PixelStandardizer.to_unit` (then clamped to [0, 1]):
FixMatch's colour operations (``data/augment/fixmatch.py``), SimCLR's views and
MFCL's binary cross-entropy (``algorithms/engines/self_supervised.py``), FedDB's pictures
of the views (``papers/feddb/report.py``); FedBM's generator draws [0, 1] images
and standardizes them with :meth:`PixelStandardizer.apply` as the real inputs are
(``algorithms/fedbm.py``).

A standardizer without statistics (``PixelStandardizer()``: features, or data
already in [0, 1]) is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

STD_EPS = 1e-6
"""Added to each channel's std, so that a constant channel does not divide by zero."""


@dataclass(frozen=True)
class PixelStandardizer:
    """``(x - mean) / std`` per channel of ``(N, C, H, W)`` images in [0, 1], and back; no statistics: the identity."""

    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std):
            raise ValueError(f"mean and std need one value per channel, got {self.mean} and {self.std}")

    @classmethod
    def fit(cls, images: np.ndarray) -> PixelStandardizer:
        """The per-channel mean and std (+ :data:`STD_EPS`) of ``uint8`` images ``(N, C, H, W)`` scaled to [0, 1] (float32)."""
        scaled = images.astype(np.float32) / 255.0
        mean = scaled.mean(axis=(0, 2, 3)).astype(np.float32)
        std = (scaled.std(axis=(0, 2, 3)) + STD_EPS).astype(np.float32)
        return cls(tuple(float(v) for v in mean), tuple(float(v) for v in std))

    @property
    def identity(self) -> bool:
        """True when there are no statistics: :meth:`apply` and :meth:`invert` return their input."""
        return not self.mean

    def statistics(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, std) shaped (1, C, 1, 1), in the dtype and on the device of ``like``.

        Each value is filled in on the device (``new_full``), not copied there from the host:
        a copy from pageable host memory would make a GPU's host wait (one sync per call).
        """
        mean = torch.stack([like.new_full((), value) for value in self.mean]).view(1, -1, 1, 1)
        std = torch.stack([like.new_full((), value) for value in self.std]).view(1, -1, 1, 1)
        return mean, std

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """[0, 1] images -> the model's inputs: ``(x - mean) / std``."""
        if self.identity:
            return x
        mean, std = self.statistics(x)
        return (x - mean) / std

    def invert(self, x: torch.Tensor) -> torch.Tensor:
        """The model's inputs -> [0, 1] images (not clamped): ``x * std + mean``."""
        if self.identity:
            return x
        mean, std = self.statistics(x)
        return x * std + mean

    def to_unit(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`invert`, clamped to [0, 1]."""
        return self.invert(x).clamp(0.0, 1.0)

    def pixels(self, images: np.ndarray) -> torch.Tensor:
        """``uint8`` images ``(N, C, H, W)`` -> float32 model inputs: scaled to [0, 1], then :meth:`apply`."""
        return self.apply(torch.from_numpy(images).float().div_(255.0))
