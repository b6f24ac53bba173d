"""A backbone whose features are projected to a fixed classifier's space and L2-normalized.

FedBM (the FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning",
Sec. III-B: "we add a fully-connected layer on top of the feature
extractor to align the dimension of h_i and e_m") and FedETF (Li et al., ICCV 2023,
Sec. 4.1: a projection layer, then feature normalization) train a network of this
shape against a classifier that stays fixed:

    embed(x) = normalize(projection(backbone.embed(x))),   forward(x) = head(embed(x))

The backbone's own linear head is dropped. The head is whatever module the method
gives (its tensors are usually non-persistent buffers, so they are neither trained nor
part of the state that is sent).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.models.split import split


class ProjectedNet(nn.Module):
    def __init__(self, backbone: nn.Module, dim: int, head: nn.Module) -> None:
        super().__init__()
        backbone.head = nn.Identity()
        self.body = backbone
        self.projection = nn.Linear(split(backbone).feature_dim, dim)
        self.head = head
        self.feature_dim = dim

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Images -> (N, dim) unit vectors h."""
        return F.normalize(self.projection(split(self.body).embed(x)), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))
