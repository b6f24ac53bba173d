"""Mini-batch SGD on a client's labelled data, shared by the supervised algorithms."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.pieces.metrics import logit_metrics
from fedprior.algorithms.pieces.precision import autocast, float32

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss(model, x_batch, y_batch) -> scalar``."""


def cross_entropy_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), y)


def local_steps(n: int, batch_size: int, epochs: int) -> int:
    """The steps :func:`train_epochs` runs on ``n`` examples: ``epochs`` passes of ceil(n / batch_size) mini-batches."""
    return epochs * -(-n // batch_size)


def epoch_orders(n: int, epochs: int, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """(epochs, n): each epoch's shuffled order of ``n`` examples, drawn on the CPU from ``generator`` one epoch after the
    other (the draws an epoch-by-epoch loop makes) and moved to ``device`` in one copy, not one per epoch."""
    if epochs == 0:
        return torch.empty(0, n, dtype=torch.long, device=device)
    return torch.stack([torch.randperm(n, generator=generator) for _ in range(epochs)]).to(device)


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
    precision: str = "fp32",
    on_epoch: Callable[[int], None] | None = None,
    max_steps: int | None = None,
) -> dict[str, float]:
    """Run ``epochs`` passes of shuffled mini-batches (the last batch may be smaller): :func:`local_steps` steps.

    ``x``, ``y`` and ``model`` are on the device already (moved once per update, not
    per batch); the order comes from the client's CPU ``generator``, so every device
    visits the same batches, and the orders of all epochs go to the device in one copy
    (:func:`epoch_orders`). The loss is summed on the device and read once at the end
    (no per-step synchronization on a GPU). ``after_backward`` runs between
    ``backward`` and ``optimizer.step`` (SCAFFOLD corrects gradients there). Returns the
    mean training loss and the step count. ``precision`` (``run.precision``): the forward pass and
    the loss run under :func:`~fedprior.algorithms.pieces.precision.autocast`; weights stay float32.
    ``on_epoch(e)`` runs before the first step of each (0-based) epoch e (a per-epoch learning rate). ``max_steps``: stop after
    that many steps, within an epoch if need be (a straggler's partial work, ``ClientInfo.local_steps``); the batch orders are
    drawn as for the full update, so its steps are the full update's first ones.
    """
    model.train()
    n = x.shape[0]
    steps, total = 0, torch.zeros((), dtype=torch.float64, device=x.device)
    for epoch, order in enumerate(epoch_orders(n, epochs, generator, x.device)):
        if max_steps is not None:
            left = max_steps - steps
            if left <= 0:
                break
            order = order[: left * batch_size]
        if on_epoch is not None:
            on_epoch(epoch)
        steps += train_pass(
            model, x, y, order, total, batch_size=batch_size, optimizer=optimizer, loss_fn=loss_fn, after_backward=after_backward, precision=precision
        )
    return {"train_loss": float(total) / max(steps, 1), "steps": float(steps)}


def train_pass(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    order: torch.Tensor,
    total: torch.Tensor,
    *,
    batch_size: int,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn = cross_entropy_loss,
    after_backward: Callable[[], None] | None = None,
    precision: str = "fp32",
) -> int:
    """One pass of :func:`train_epochs`: mini-batches of ``batch_size`` rows of ``x`` and ``y`` taken in ``order`` (on their
    device), each step's loss added to ``total`` (a float64 scalar there, never read here); returns the number of steps."""
    steps = 0
    for start in range(0, order.shape[0], batch_size):
        batch = order[start : start + batch_size]
        optimizer.zero_grad(set_to_none=True)
        with autocast(x.device, precision):
            loss = loss_fn(model, x[batch], y[batch])
        loss.backward()
        if after_backward is not None:
            after_backward()
        optimizer.step()
        steps += 1
        total += loss.detach()
    return steps


EVALUATION_BATCH = 2048


@torch.inference_mode()
def model_logits(model: nn.Module, x: torch.Tensor, batch_size: int = EVALUATION_BATCH, precision: str = "fp32") -> torch.Tensor:
    """``model``'s float32 logits on ``x`` (on the model's device), in large batches, without autograd; each batch moves there once.

    ``precision``: the forward passes run under :func:`~fedprior.algorithms.pieces.precision.autocast`.
    """
    model.eval()
    device = next(model.parameters()).device
    with autocast(device, precision):
        return float32(torch.cat([model(x[start : start + batch_size].to(device)) for start in range(0, x.shape[0], batch_size)]))


def classification_metrics(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = EVALUATION_BATCH, precision: str = "fp32"
) -> dict[str, float | list[float]]:
    """Accuracy, mean cross-entropy, macro-F1 and per-class accuracy of ``model`` on ``(x, y)`` (see ``metrics.py``)."""
    return logit_metrics(model_logits(model, x, batch_size, precision), y)
