"""Which kernels a local optimizer's step runs: fused on CUDA, torch's defaults elsewhere.

A client step on a GPU is bound by kernel launches more than by arithmetic (a FedDB round on an H200 launched about
85,000 kernels, 2026-11-28). ``torch.optim.SGD`` and ``Adam`` step with a few multi-tensor (``foreach``) kernels per
parameter group on CUDA by default; ``fused=True`` updates every parameter in one kernel. The update is the same
(SGD's Eq. with momentum, Nesterov and weight decay as torch documents it); on the CPU the default kernels are kept, so
CPU numbers do not change (``tests/algorithms/pieces/test_optimizer_kernels.py`` also shows the fused step equal to the default one there).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


def materialized(parameters: Iterable[Any]) -> list[Any]:
    """``parameters`` (tensors, or param groups) as a list, each group's ``params`` a list: safe to read twice (a group may
    hold a generator, as ``module.parameters()``, which a first reading would exhaust)."""
    return [{**item, "params": list(item["params"])} if isinstance(item, dict) else item for item in parameters]


def fused_on_cuda(parameters: Iterable[Any]) -> bool | None:
    """The optimizer's ``fused``: True where every parameter (tensors, or param groups' ``params``) is on a CUDA device, else
    None (torch's default kernels). Reads ``parameters`` once: give it :func:`materialized` ones where the optimizer reads them too."""
    tensors: list[torch.Tensor] = []
    for item in parameters:
        tensors.extend(item["params"] if isinstance(item, dict) else [item])
    return True if tensors and all(t.is_cuda for t in tensors) else None
