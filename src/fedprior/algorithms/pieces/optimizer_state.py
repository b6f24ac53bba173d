"""An optimizer's per-parameter state (momentum buffers, Adam moments and steps) as flat named tensors in a State.

Algorithms hold no state in closures, so an optimizer that must outlive one call keeps
its per-parameter tensors as named tensors in a State (on the parameters' device: resident on a GPU between
rounds; the checkpoint copies them to the host), which checkpoints, resume
and Flower carry like any other state:

- FedDB's clients keep their optimizer state across the rounds they are sampled in
  (the FedDB authors' code: each ``Client`` keeps its ``optimizer_state_dict``; docs/feddb.md), in the client State
  (``algorithms/engines/semi_supervised.py``, ``keep_optimizer_state``);
- MFCL's server trains its discriminator one epoch per round with Adam, whose moments
  and step counts live in the server State (``algorithms/mfcl.py``), so a run killed
  between two epochs resumes with the very same moments;
- FedBM's generator Adam, with ``adam_state='kept'`` (``algorithms/fedbm.py``, prefix
  ``generator_adam.``).

The key of a tensor is ``<prefix><parameter name>:<key>`` (``prefix`` defaults to
``opt.``), e.g. ``opt.blocks.0.conv1.weight:exp_avg``. Earlier versions wrote two
other layouts, which :func:`load_optimizer_state` still reads, so that checkpoints of
existing runs resume: ``<prefix><parameter>.<key>`` (MFCL's discriminator) and
``<prefix><parameter>.exp_avg`` / ``.exp_avg_sq`` with one shared ``<prefix>step``
(FedBM's generator Adam). :func:`store_optimizer_state` drops those old entries when
it writes the new ones.
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.algorithms.base import State

OPTIMIZER = "opt."
"""The default prefix of optimizer-state keys."""

SEPARATOR = ":"
"""Between the parameter's name (which has dots) and the optimizer's key (``exp_avg``, ``momentum_buffer``, ``step``)."""


def optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module, prefix: str = OPTIMIZER) -> State:
    """The optimizer's per-parameter tensors as flat State (``<prefix><parameter>:<key>``, contiguous copies where they are:
    momentum and moments on the parameter's device, kept there between rounds; Adam's ``step`` on the CPU).

    Parameters of ``model`` without optimizer state (no step yet, or SGD without
    momentum) give no entries; numbers (a step kept as a Python number) become tensors;
    ``None`` entries are left out.
    """
    out: State = {}
    for name, parameter in model.named_parameters():
        for key, value in optimizer.state.get(parameter, {}).items():
            if value is None:
                continue
            out[f"{prefix}{name}{SEPARATOR}{key}"] = torch.as_tensor(value).detach().contiguous().clone()
    return out


def load_optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module, state: State, prefix: str = OPTIMIZER) -> None:
    """Restore what :func:`optimizer_state` saved (tensors go to the parameter's device, Adam's ``step`` stays on CPU).

    A parameter with no entries starts fresh. Entries in the older layouts (module
    docstring) are read where a parameter has none in the current one.
    """
    shared_step = state.get(f"{prefix}step")
    for name, parameter in model.named_parameters():
        entries = _entries(state, f"{prefix}{name}{SEPARATOR}") or _entries(state, f"{prefix}{name}.")
        if entries and "step" not in entries and shared_step is not None:
            entries["step"] = shared_step
        if entries:
            optimizer.state[parameter] = {k: (v.clone() if k == "step" else v.to(parameter.device).clone()) for k, v in entries.items()}


def store_optimizer_state(state: State, optimizer: torch.optim.Optimizer, model: nn.Module, prefix: str = OPTIMIZER) -> State:
    """``state`` with the optimizer's tensors (:func:`optimizer_state`) put in, and entries in an older layout dropped.

    Every key under ``prefix`` must belong to this optimizer: a key without ``:`` there is taken for an old entry.
    """
    kept = {k: v for k, v in state.items() if not k.startswith(prefix) or SEPARATOR in k[len(prefix) :]}
    return {**kept, **optimizer_state(optimizer, model, prefix)}


def _entries(state: State, head: str) -> dict[str, torch.Tensor]:
    """The entries ``head + key`` of ``state`` by key, for keys without a dot or a separator."""
    return {k[len(head) :]: v for k, v in state.items() if k.startswith(head) and not any(c in k[len(head) :] for c in "." + SEPARATOR)}
