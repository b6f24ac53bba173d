"""Per-class statistics of a client's data and the loss that balances by them (FedROD, FedETF, FedBM, FedNH, FedProto)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.models.split import split


def class_counts(y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The client's class counts, 1 for a class it lacks (as the code), so log counts are finite."""
    counts = torch.bincount(y, minlength=num_classes).float()
    return torch.where(counts > 0, counts, torch.ones_like(counts))


def balanced_softmax_loss(logits: torch.Tensor, y: torch.Tensor, counts: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """CE(logits + gamma log n, y): the balanced softmax of Ren et al. (2020) that FedROD and FedETF train with."""
    return F.cross_entropy(logits + gamma * counts.to(logits.device).log(), y)


@torch.no_grad()
def class_means(model: nn.Module, x: torch.Tensor, y: torch.Tensor, num_classes: int, batch: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, D) mean feature per class (zero where absent) and (K,) counts, with the model in eval mode."""
    model.eval()
    features = torch.cat([split(model).embed(x[s : s + batch]) for s in range(0, x.shape[0], batch)])
    counts = torch.bincount(y, minlength=num_classes).to(features.dtype)
    sums = torch.zeros(num_classes, features.shape[1], dtype=features.dtype, device=features.device).index_add_(0, y, features)
    return sums / counts.clamp_min(1).unsqueeze(1), counts
