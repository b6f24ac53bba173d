"""An optimizer's per-parameter state as flat named tensors, so it can live in a State and be checkpointed.

Server-side training that spans rounds (MFCL's discriminator, one epoch per round)
keeps its optimizer's moments in the server State (``opt.<parameter>.<key>``, e.g.
``opt.blocks.0.conv1.weight.exp_avg``): a run killed between two epochs resumes with
the very same Adam moments and step counts.
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.algorithms.base import Arrays

OPT = "opt."


def optimizer_arrays(optimizer: torch.optim.Optimizer, model: nn.Module, prefix: str = OPT) -> Arrays:
    """The tensor entries of ``optimizer.state`` for each named parameter of ``model`` (CPU copies)."""
    out: Arrays = {}
    for name, param in model.named_parameters():
        for key, value in optimizer.state.get(param, {}).items():
            if isinstance(value, torch.Tensor):
                out[f"{prefix}{name}.{key}"] = value.detach().cpu().clone()
    return out


def load_optimizer_arrays(optimizer: torch.optim.Optimizer, model: nn.Module, arrays: Arrays, prefix: str = OPT) -> None:
    """Put the entries saved by :func:`optimizer_arrays` back (a parameter with none starts fresh)."""
    for name, param in model.named_parameters():
        head = f"{prefix}{name}."
        entries = {k[len(head) :]: v for k, v in arrays.items() if k.startswith(head) and "." not in k[len(head) :]}
        if entries:
            optimizer.state[param] = {k: v.clone() if k == "step" else v.to(param.device).clone() for k, v in entries.items()}
