"""BatchNorm recalibration: a network's running statistics re-estimated on given images, its weights untouched.

A BatchNorm layer in evaluation mode normalizes with its running mean and variance, an exponential average of the
training batches' statistics (PyTorch: momentum 0.1). Where those statistics are not the ones of the images being
evaluated (a fresh layer's mean 0 and variance 1; FedAvg's average of clients' running statistics, which the MFCL
paper's Eq. 1 applies to a BN sensor's buffers as to its weights; statistics of augmented views where clean images are
evaluated), :func:`recalibrate_batchnorm` replaces them by those of the given inputs: every BatchNorm layer is reset, put
in training mode with a cumulative average (``momentum = None``) and ``forward()`` runs once under no_grad. With the
inputs in one batch each layer's running statistics are then exactly that batch's mean and unbiased variance of the
layer's input, the layers above it normalized by the batch's statistics as in training ("BN recalibration", also called
precise BN). The layers' momentum and training flags are restored; every other module keeps its mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def batchnorm_layers(module: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """The BatchNorm layers (1-d, 2-d, 3-d) of ``module`` that keep running statistics, in module order."""
    return [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


@torch.no_grad()
def recalibrate_batchnorm(module: nn.Module, forward: Callable[[], Any]) -> nn.Module:
    """Reset the running statistics of ``module``'s BatchNorm layers and re-estimate them by calling ``forward()`` once.

    ``forward`` runs ``module`` (or a model containing it) on the images to calibrate on; each forward pass through a
    layer adds its batch's statistics to a cumulative average, so one batch gives that batch's mean and unbiased
    variance exactly. Returns ``module`` (modified in place).
    """
    layers = batchnorm_layers(module)
    kept = [(layer.momentum, layer.training) for layer in layers]
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None
        layer.train()
    try:
        forward()
    finally:
        for layer, (momentum, training) in zip(layers, kept, strict=True):
            layer.momentum = momentum
            layer.train(training)
    return module
