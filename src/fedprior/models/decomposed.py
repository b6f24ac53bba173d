"""Parameter decomposition theta = sigma + psi (FedMatch, Jeong et al., ICLR 2021, Sec. 4.2 "disjoint learning").

Every parameter of a network becomes the sum of two: ``sigma``, learned from labeled
data, and ``psi``, learned from unlabeled data (FedMatch's authors' code keeps both per
layer, ``sig`` and ``psi``). Done with :mod:`torch.nn.utils.parametrize`: the module
computes with ``sigma + psi`` wherever it used its parameter, ``sigma`` is the
parametrization's ``original`` (it starts at the network's own initialization) and
``psi`` a parameter of the parametrization (it starts at zero, so the decomposed network
computes exactly what the plain one did). Buffers (BatchNorm statistics) are not split.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize


class AddPsi(nn.Module):
    """The parametrization ``sigma -> sigma + psi``."""

    def __init__(self, like: torch.Tensor) -> None:
        super().__init__()
        self.psi = nn.Parameter(torch.zeros_like(like))

    def forward(self, sigma: torch.Tensor) -> torch.Tensor:
        return sigma + self.psi


def decompose(model: nn.Module) -> nn.Module:
    """Split every parameter of ``model`` (in place) into sigma + psi; returns the model."""
    for module in list(model.modules()):
        for name, parameter in list(module.named_parameters(recurse=False)):
            parametrize.register_parametrization(module, name, AddPsi(parameter.detach()))
    return model


def is_sigma(name: str) -> bool:
    return name.endswith(".original")


def is_psi(name: str) -> bool:
    return name.endswith(".psi")


def sigma_psi_pairs(model: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(sigma, psi) of every decomposed parameter, in module order (both are parameters)."""
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    for module in model.modules():
        if parametrize.is_parametrized(module):
            plists = module.parametrizations
            assert isinstance(plists, nn.ModuleDict)  # what register_parametrization installs
            for plist in plists.values():
                assert isinstance(plist, parametrize.ParametrizationList)
                add_psi = plist[0]
                assert isinstance(add_psi, AddPsi)  # decompose() registers only AddPsi
                pairs.append((plist.original, add_psi.psi))
    return pairs
