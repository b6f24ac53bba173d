"""The frozen-encoder interface: images (and, for vision-language models, texts) to vectors.

An encoder is never trained by a federated algorithm; its outputs are computed once
and cached (see ``cache.py``), keyed by its ``fingerprint``, which must change whenever
its weights or preprocessing change.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class ImageEncoder(Protocol):
    name: str
    """What the user wrote in ``encoder.name`` (e.g. ``openclip:RN50``, ``locked-text``)."""
    fingerprint: str
    """A short hash of everything that determines the outputs (weights, preprocessing, settings)."""
    dim: int
    """Length of the feature vectors."""

    def encode_images(self, images: np.ndarray, batch_size: int = 256) -> torch.Tensor:
        """uint8 images (N, C, H, W) -> float32 features (N, dim), not normalized."""
        ...


@runtime_checkable
class VisionLanguageEncoder(ImageEncoder, Protocol):
    def encode_texts(self, texts: list[str]) -> torch.Tensor:
        """Texts -> float32 features (len(texts), dim) in the same space as the images, not normalized."""
        ...


@runtime_checkable
class TextEncoder(Protocol):
    name: str
    fingerprint: str
    dim: int

    def encode_texts(self, texts: list[str]) -> torch.Tensor: ...
