"""``run.precision``: the one place a training or evaluation forward pass learns its arithmetic.

``"fp32"`` computes in float32. ``"bf16"`` runs forward passes under
``torch.autocast(device_type=<the run's device type>, dtype=torch.bfloat16)``: matrix
products and convolutions compute in bfloat16 (on a GPU's tensor cores, or oneDNN's bf16
kernels on the CPU, so CI tests it), while the weights, their gradients and the optimizer
state stay float32 (autocast casts a copy of each weight per op; ``backward`` returns
float32 gradients). No loss scaling is needed: bfloat16 has float32's exponent range.

Losses are computed in float32: a training loop puts the forward pass and the loss under
:func:`autocast` together, and autocast runs the loss ops (cross-entropy, NLL, KL
divergence, MSE, BCE) in float32; evaluation and pseudo-labeling take logits through
:func:`autocast` and cast them back to float32 (:func:`float32`) before softmax, metrics and
thresholds. Factories that support it take the runtime-provided keyword ``precision`` (the
registry passes ``run.precision`` like ``run.device``) and hand it to their loops, which
call :func:`autocast` and nothing else.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Literal, get_args

import torch

Precision = Literal["fp32", "bf16"]
"""The accepted values of ``run.precision``."""

PRECISIONS: tuple[str, ...] = get_args(Precision)


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`; ValueError naming the accepted values otherwise."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; accepted: {', '.join(PRECISIONS)}")
    return precision


def autocast(device: torch.device | str, precision: str) -> AbstractContextManager[object]:
    """The context a forward pass (and the loss computed from it) runs in: bf16 autocast on ``device``'s type, or nothing for fp32."""
    if check_precision(precision) == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 (a forward pass's bf16 output before softmax, metrics and thresholds); unchanged if it is already."""
    return x if x.dtype == torch.float32 or not x.is_floating_point() else x.float()
