"""The typed view of a classifier that splits into ``embed`` and ``head`` (models/resnet.py, convnet.py, wrn.py ...).

Networks come out of :func:`fedprior.models.build_model` as ``nn.Module``, whose
attribute access is typed ``Tensor | Module``; body/head methods read
``embed``, ``head`` and ``feature_dim`` through :func:`split`, a cast at that
boundary (no runtime check, no copy: the same module).
"""

from __future__ import annotations

from typing import Protocol, cast

import torch
from torch import nn


class SplitNet(Protocol):
    """``forward(x) = head(embed(x))``, ``embed(x)`` of shape (N, feature_dim)."""

    @property
    def head(self) -> nn.Module: ...

    @property
    def feature_dim(self) -> int: ...

    def embed(self, x: torch.Tensor) -> torch.Tensor: ...


def split(model: nn.Module) -> SplitNet:
    """``model`` seen as embed + head (every classifier of models/ but 'linear' has them)."""
    return cast(SplitNet, model)
