"""The :class:`Task`: what the server and every client know before training starts.

It sits below models/ and algorithms/ (models are built from it, algorithms are
factories of it), so neither imports the other for it. ``fedprior.algorithms.base``
re-exports it, the name the Python API documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Task:
    """What both the server and every client know before training starts.

    Built from the experiment config alone, so each side can rebuild it without
    receiving it: class names, input shape, the number of clients, and prior
    knowledge such as the text features of a vision-language model (``prior``).
    """

    num_classes: int
    input_shape: tuple[int, ...]
    class_names: tuple[str, ...]
    num_clients: int
    prior: Mapping[str, torch.Tensor] = field(default_factory=dict)
    pixel_mean: tuple[float, ...] = ()
    pixel_std: tuple[float, ...] = ()
    """Per-channel mean and std the images were standardized with (empty for features): augmentations that
    need pixel values in [0, 1] undo the standardization with them (``data/augment/fixmatch.py``)."""
