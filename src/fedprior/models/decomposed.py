"""Parameter decomposition theta = sigma + psi (FedMatch, Jeong et al., ICLR 2021, Sec. 4.2 "disjoint learning").

Every parameter of a network becomes the sum of two: ``sigma``, learned from labeled
data, and ``psi``, learned from unlabeled data (FedMatch's authors' code keeps both per
layer, ``sig`` and ``psi``). Done with :mod:`torch.nn.utils.parametrize`: the module
computes with ``sigma + psi`` wherever it used its parameter, ``sigma`` is the
parametrization's ``original`` (it starts at the network's own initialization) and
``psi`` a parameter of the parametrization. Buffers (BatchNorm statistics) are not split.

Two details of the authors' code (github.com/wyjeong/FedMatch), both off by default:

- ``psi_factor``: psi starts at ``psi_factor * sigma`` (``modules/nets.py``,
  ``build_resnet9``: ``psi.assign(sigma * psi_factor)``, psi_factor = 0.2 in
  ``config.py``), so the network starts at (1 + psi_factor) times its initialization;
  with 0, psi starts at zero and the decomposed network computes what the plain one did;
- ``threshold``: in eval mode psi entries with ``|psi| <= threshold`` count as zero (the
  code's hard thresholding at inference, ``modules/layers.py``, ``DecomposedConv.call``
  and ``DecomposedDense.call`` with ``l1_thres`` = 5e-6); training uses the dense psi.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize


class AddPsi(nn.Module):
    """The parametrization ``sigma -> sigma + psi`` (psi hard-thresholded at ``threshold`` in eval mode)."""

    def __init__(self, sigma: torch.Tensor, psi_factor: float = 0.0, threshold: float = 0.0) -> None:
        super().__init__()
        self.psi = nn.Parameter(psi_factor * sigma.detach().clone())
        self.threshold = threshold

    def forward(self, sigma: torch.Tensor) -> torch.Tensor:
        if self.training or self.threshold <= 0:
            return sigma + self.psi
        return sigma + self.psi * (self.psi.abs() > self.threshold)


def decompose(model: nn.Module, psi_factor: float = 0.0, threshold: float = 0.0) -> nn.Module:
    """Split every parameter of ``model`` (in place) into sigma + psi, psi = ``psi_factor`` sigma; returns the model."""
    for module in list(model.modules()):
        for name, parameter in list(module.named_parameters(recurse=False)):
            parametrize.register_parametrization(module, name, AddPsi(parameter.detach(), psi_factor, threshold))
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
