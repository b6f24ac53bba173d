"""The logistic-regression probe that measures a locked-text stand-in's headroom over its zero-shot accuracy.

One implementation for the stand-in's benchmark (``benchmarks/standin_recipes.py``, which
chose ``v2-headroom`` by it) and its tests (``tests/encoders/test_locked_text.py``), so both measure
the same control.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def logistic_probe_accuracy(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor, steps: int = 300) -> float:
    """Test accuracy of a multinomial logistic regression fitted full batch with Adam on standardized features."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    a, b = (train_x - mean) / std, (test_x - mean) / std
    classes = int(train_y.max()) + 1
    weight = torch.zeros(a.shape[1], classes, requires_grad=True)
    bias = torch.zeros(classes, requires_grad=True)
    optimizer = torch.optim.Adam([weight, bias], lr=0.05)
    for _ in range(steps):
        loss = F.cross_entropy(a @ weight + bias, train_y) + 1e-4 * weight.square().sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return ((b @ weight + bias).argmax(1) == test_y).float().mean().item()
