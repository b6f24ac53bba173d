"""Normalization layers by name, so a network's normalization is one constructor argument.

- ``bn``: BatchNorm with running statistics (PyTorch's default);
- ``bn-batch``: BatchNorm *without* running statistics (``track_running_stats=False``):
  batch statistics at training and at test time, as the FedDB authors' code
  (github.com/GuogangZhu/FedDB, SemiFL-based) builds its WRN-28-2;
- ``gn``: GroupNorm (Wu & He, 2018), FedRGD's and MFCL's alternative to BatchNorm;
  groups given either as a count (``groups``, lowered to a divisor of the channels: the
  networks of FedRGD, ConvNet and ResNet) or as Lambda, the channels per group
  (``group_channels``, the MFCL paper's Sec. 2.2: MFCL's sensor module and FedSimCLR's stem), which
  must divide the channels (C / Lambda groups);
- ``pn``: Peer Normalization (the MFCL paper's Eq. 3-4), GroupNorm whose statistics are pooled
  over the two augmented views of each sample (:mod:`fedprior.models.peer_norm`);
- ``pn-eq3``: PN with Eq. 3 as printed (a per-pixel mean, a variance summed over the pixels;
  ``PeerNorm(statistics="eq3")``);
- ``none``: identity.
"""

from __future__ import annotations

from torch import nn

from fedprior.models.peer_norm import PeerNorm, group_count, groups_of

NORMS = ("bn", "bn-batch", "gn", "pn", "pn-eq3", "none")


def norm2d(kind: str, channels: int, groups: int = 32, *, group_channels: int | None = None) -> nn.Module:
    """A 2-d normalization layer over ``channels``.

    GroupNorm and PN use ``channels / group_channels`` groups when ``group_channels`` (Lambda) is
    given (ValueError when it does not divide ``channels``), otherwise min(groups, channels)
    lowered to a divisor of ``channels``.
    """
    if kind in ("gn", "pn", "pn-eq3"):
        groups = groups_of(channels, group_channels) if group_channels is not None else group_count(channels, groups)
    if kind == "bn":
        return nn.BatchNorm2d(channels)
    if kind == "bn-batch":
        return nn.BatchNorm2d(channels, track_running_stats=False)
    if kind == "gn":
        return nn.GroupNorm(groups, channels)
    if kind == "pn":
        return PeerNorm(channels, groups)
    if kind == "pn-eq3":
        return PeerNorm(channels, groups, statistics="eq3")
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown normalization '{kind}'; accepted: {', '.join(NORMS)}")
