"""A client's optimizer state (momentum buffers, Adam moments) as flat client State, kept between rounds.

The FedDB authors' code keeps each client's optimizer state across the rounds it is
sampled in (IMPLEMENTATION-NOTES.md, FedDB). Algorithms hold no state in closures, so
the optimizer's per-parameter tensors become named CPU tensors in the client State
(``opt.<parameter name>:<key>``), which checkpoints, resume and Flower carry like any
other state.
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.algorithms.base import State

OPTIMIZER = "opt."


def optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module) -> State:
    """The optimizer's per-parameter tensors as flat client State (``opt.<parameter>:<key>``, CPU)."""
    names = {id(p): n for n, p in model.named_parameters()}
    out: State = {}
    for parameter, entries in optimizer.state.items():
        for key, value in entries.items():
            out[f"{OPTIMIZER}{names[id(parameter)]}:{key}"] = torch.as_tensor(value).detach().cpu().clone()
    return out


def load_optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module, state: State) -> None:
    """Restore what :func:`optimizer_state` saved (tensors go to the parameter's device, Adam's step stays on CPU)."""
    for name, parameter in model.named_parameters():
        prefix = f"{OPTIMIZER}{name}:"
        entries = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        if entries:
            optimizer.state[parameter] = {k: (v.clone() if k == "step" else v.to(parameter.device).clone()) for k, v in entries.items()}
