"""Mini-batch SGD on a client's labelled data, shared by the supervised algorithms."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.metrics import logit_metrics

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss(model, x_batch, y_batch) -> scalar``."""


def cross_entropy_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), y)


def train_epochs(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    loss_fn: LossFn = cross_entropy_loss,
    after_backward: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Run ``epochs`` passes of shuffled mini-batches (the last batch may be smaller).

    ``after_backward`` runs between ``backward`` and ``optimizer.step`` (SCAFFOLD
    corrects gradients there). Returns the mean training loss and the step count.
    """
    model.train()
    n = x.shape[0]
    steps, total = 0, 0.0
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch_size):
            batch = order[start : start + batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model, x[batch], y[batch])
            loss.backward()
            if after_backward is not None:
                after_backward()
            optimizer.step()
            steps += 1
            total += float(loss.detach())
    return {"train_loss": total / max(steps, 1), "steps": float(steps)}


@torch.no_grad()
def classification_metrics(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 2048) -> dict[str, float | list[float]]:
    """Accuracy, mean cross-entropy, macro-F1 and per-class accuracy of ``model`` on ``(x, y)`` (see ``metrics.py``)."""
    model.eval()
    logits = torch.cat([model(x[start : start + batch_size]) for start in range(0, x.shape[0], batch_size)])
    return logit_metrics(logits, y)
