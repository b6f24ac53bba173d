"""Peer Normalization (PN), the MFCL paper's Sec. 2.2, Eq. 3-4.

A contrastive client mini-batch holds two augmented views of each of K samples,
laid out ``B = (x_{1,1}, ..., x_{K,1}, x_{1,2}, ..., x_{K,2})`` (first every sample's
view 1, then every sample's view 2). PN is Group Normalization (Wu & He, 2018)
whose statistics are pooled over the two views of the same sample: for sample i and
a group Phi of Lambda channels at layer l,

    mu_i      = 1/(2 Lambda) sum_{j=1,2} sum_{c in Phi} w_{i,j}^c                 (Eq. 3)
    sigma_i^2 = 1/(2 Lambda) sum_{j=1,2} sum_{c in Phi} ||w_{i,j}^c - mu_i||^2
    w_bar_{i,j}^c = eps_1 (w_{i,j}^c - mu_i) / sqrt(sigma_i^2) + eps_2            (Eq. 4)

with eps_1, eps_2 a learned per-channel scale and shift. As in GN (and as Figure 3
draws it: each block spans the spatial axes and is "normalized together with the same
mean and variance"), mu_i and sigma_i^2 are scalars over the group's channels, the
spatial positions and, for PN, both views; a small constant is added under the root
for numerical safety. With identical views PN equals GN, and with ``views = 1`` it
*is* GN; that is how a single image (a test image, no pair) is normalized
(:func:`peer_views`).

Eq. 3 as printed reads differently: mu_i is bold, a vector over the spatial positions
(w^c is channel c's feature map, so the sum over c and j is a per-pixel mean of the
group's 2 Lambda maps), and sigma_i^2 = 1/(2 Lambda) sum ||w - mu_i||^2 is a scalar whose
squared l2 norm *sums* over the H x W positions while dividing by 2 Lambda only, so
sigma_i^2 is H W times a per-element variance and Eq. 4's output has a magnitude of about
1/sqrt(H W) before eps_1. ``statistics = "eq3"`` (the norm ``pn-eq3``) computes exactly that;
the default ``"group"`` is the GN reading above, which Figure 3 draws and the text's "PN is
similar to GN ... normalizes a group of channels of two positive examples together" says.

Lambda is the number of channels in a group (Sec. 2.2: "a group of Lambda <= C
channels"; Eq. 3 divides by 2 Lambda), so a layer of C channels has C / Lambda groups
(:func:`groups_of`). Lambda = C pools every channel and pixel of the two views (a
LayerNorm over the pair); Lambda = 1 pools one channel's pixels over the two views (an
InstanceNorm over the pair). The layer takes the group *count*, as torch's GroupNorm
does, and refuses one that does not divide its channels.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

STATISTICS = ("group", "eq3")
"""PN's two readings of Eq. 3 (module docstring)."""


def group_count(channels: int, groups: int) -> int:
    """min(groups, channels), lowered until it divides ``channels``: the group *count* rule of the GroupNorm layers of
    the networks that take a count (ConvNet, ResNet, WRN for FedRGD); MFCL's PN and GN take Lambda instead (:func:`groups_of`)."""
    g = max(1, min(groups, channels))
    while channels % g:
        g -= 1
    return g


def groups_of(channels: int, group_channels: int) -> int:
    """C / Lambda: the number of groups of ``group_channels`` (Lambda, the MFCL paper's Sec. 2.2, Eq. 3) channels in a layer of ``channels``.

    ValueError when Lambda is not a divisor of C (the message lists the divisors).
    """
    if group_channels < 1 or channels % group_channels:
        divisors = [d for d in range(1, channels + 1) if channels % d == 0]
        raise ValueError(f"{channels} channels cannot be split into groups of {group_channels} channels (Lambda); accepted: {', '.join(map(str, divisors))}")
    return channels // group_channels


class PeerNorm(nn.Module):
    """PN over ``channels`` in ``groups`` groups of channels / groups (= Lambda) each; the batch is ``views`` blocks of K rows
    each (view-major, Eq. 3-4).

    ``views`` is an attribute, not state: 2 while training on contrastive pairs, 1 for
    single images (then PN is GN). Use :func:`peer_views` to change it for a block of code.
    ``statistics``: ``"group"`` (scalar mean and variance per sample and group, as GN) or ``"eq3"`` (Eq. 3 as printed: a
    per-pixel mean over the group's channels and the views, a scalar variance summed over the pixels; module docstring).
    """

    def __init__(self, channels: int, groups: int, eps: float = 1e-5, views: int = 2, statistics: str = "group") -> None:
        super().__init__()
        if groups < 1 or channels % groups:
            raise ValueError(f"PeerNorm: {groups} groups do not divide {channels} channels")
        if statistics not in STATISTICS:
            raise ValueError(f"PeerNorm: unknown statistics '{statistics}'; accepted: {', '.join(STATISTICS)}")
        self.statistics = statistics
        self.channels = channels
        self.groups = groups
        self.eps = eps
        self.views = views
        self.weight = nn.Parameter(torch.ones(channels))  # eps_1 of Eq. 4
        self.bias = nn.Parameter(torch.zeros(channels))  # eps_2 of Eq. 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[0], x.shape[1]
        if c != self.channels:
            raise ValueError(f"PeerNorm over {self.channels} channels got input with {c}")
        if n % self.views:
            raise ValueError(f"PeerNorm: a batch of {n} rows cannot hold {self.views} views of each sample")
        if self.statistics == "eq3":  # (views, K, groups, Lambda, pixels): mu over j and c per pixel, sigma^2 = sum_j,c ||w - mu||^2 / (2 Lambda)
            grouped = x.reshape(self.views, n // self.views, self.groups, c // self.groups, -1)
            mean = grouped.mean(dim=(0, 3), keepdim=True)
            var = (grouped - mean).square().mean(dim=(0, 3), keepdim=True).sum(dim=4, keepdim=True)
        else:
            grouped = x.reshape(self.views, n // self.views, self.groups, -1)
            mean = grouped.mean(dim=(0, 3), keepdim=True)
            var = grouped.var(dim=(0, 3), unbiased=False, keepdim=True)
        out = ((grouped - mean) / torch.sqrt(var + self.eps)).reshape_as(x)
        shape = (1, c) + (1,) * (x.dim() - 2)
        return out * self.weight.view(shape) + self.bias.view(shape)

    def extra_repr(self) -> str:
        return f"{self.channels}, groups={self.groups} (Lambda={self.channels // self.groups}), views={self.views}, statistics={self.statistics}"


@contextmanager
def peer_views(model: nn.Module, views: int) -> Iterator[nn.Module]:
    """Run a block with every PeerNorm of ``model`` reading its batches as ``views`` views per sample."""
    layers = [m for m in model.modules() if isinstance(m, PeerNorm)]
    before = [m.views for m in layers]
    for m in layers:
        m.views = views
    try:
        yield model
    finally:
        for m, v in zip(layers, before, strict=True):
            m.views = v
