"""Small operations on named tensors: model <-> state, prefixes, weighted means."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import torch
from torch import nn

from fedprior.algorithms.base import Arrays

MODEL = "model."

M = TypeVar("M", bound=nn.Module)


def model_arrays(model: nn.Module, prefix: str = MODEL, *, resident: bool = False) -> Arrays:
    """A detached copy of a model's state dict, names prefixed (``model.conv.weight``): on the CPU, wherever the model lives,
    or with ``resident`` on the model's device.

    ``resident`` is for the algorithms whose server side takes its replies wherever they are (FedAvg's mean and FedAvg's
    client loop, the FedDB family, SCAFFOLD, FedBM and the other algorithms on ``engines/body_training.py``):
    on an accelerator their replies stay on the run's device, the server
    aggregates them there, and the runtime copies to the host only for a checkpoint, Flower, a worker's pipe or the run's
    result. On the CPU both are the same copy.
    """
    if resident:
        return {prefix + name: value.detach().clone() for name, value in model.state_dict().items()}
    return {prefix + name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()}


def to_device(arrays: Arrays, device: torch.device) -> Arrays:
    """The tensors moved to ``device`` (the same tensors where they already are there)."""
    return {name: value.to(device) for name, value in arrays.items()}


def device_of(arrays: Arrays) -> torch.device:
    """Where a mapping's tensors are (its first tensor's device): a server moves its state there to aggregate replies on the device
    (``model_arrays(..., resident=True)``) or on the host alike."""
    return next(iter(arrays.values())).device


def to_cpu(arrays: Arrays) -> Arrays:
    """Detached CPU tensors (what crosses to the server, Flower, or a checkpoint)."""
    return {name: value.detach().cpu() for name, value in arrays.items()}


def load_model_arrays(model: M, arrays: Arrays, prefix: str = MODEL) -> M:
    """Load the ``prefix``-named tensors of ``arrays`` into ``model`` (strictly: all of them, nothing else)."""
    model.load_state_dict(with_prefix(arrays, prefix), strict=True)
    return model


def with_prefix(arrays: Arrays, prefix: str) -> Arrays:
    """The tensors whose names start with ``prefix``, with the prefix removed."""
    return {name[len(prefix) :]: value for name, value in arrays.items() if name.startswith(prefix)}


def add_prefix(arrays: Arrays, prefix: str) -> Arrays:
    return {prefix + name: value for name, value in arrays.items()}


def weighted_mean(arrays: Sequence[Arrays], weights: Sequence[float] | torch.Tensor) -> Arrays:
    """The weighted mean, name by name, of several tensor mappings with the same names.

    Weights are normalized to sum to one; integer tensors (e.g. BatchNorm's
    ``num_batches_tracked``) take the value of the first mapping. The sum runs in float64
    on the tensors' own device, all tensors of a mapping at once (``torch._foreach_*``: one
    multiply-add per mapping over every tensor, not a stack and a product per tensor), and
    is cast back to each tensor's dtype. The weights are host numbers (normalized on the
    CPU), so nothing is read back from the device.
    """
    if not arrays:
        raise ValueError("weighted_mean of nothing")
    w = torch.as_tensor(weights, dtype=torch.float64).cpu()
    if w.numel() != len(arrays) or bool((w < 0).any()) or float(w.sum()) <= 0:
        raise ValueError(f"need {len(arrays)} non-negative weights with a positive sum, got {w.tolist()}")
    shares = (w / w.sum()).tolist()
    first = arrays[0]
    floating = [name for name, value in first.items() if value.is_floating_point()]
    total = torch._foreach_mul([first[name].to(torch.float64) for name in floating], shares[0])
    for mapping, share in zip(arrays[1:], shares[1:], strict=True):
        torch._foreach_add_(total, [mapping[name].to(torch.float64) for name in floating], alpha=share)
    summed = dict(zip(floating, total, strict=True))
    return {name: summed[name].to(value.dtype) if name in summed else value.clone() for name, value in first.items()}


def payload_bytes(arrays: Arrays) -> int:
    """Bytes of a message's tensors as sent: elements x element size (Flower ships raw tensor buffers)."""
    return sum(t.numel() * t.element_size() for t in arrays.values())
