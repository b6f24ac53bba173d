"""Normalization layers by name, so a network's normalization is one constructor argument.

- ``bn``: BatchNorm with running statistics (PyTorch's default);
- ``bn-batch``: BatchNorm *without* running statistics (``track_running_stats=False``):
  batch statistics at training and at test time, as the FedDB authors' code
  (github.com/GuogangZhu/FedDB, SemiFL-based) builds its WRN-28-2;
- ``gn``: GroupNorm (Wu & He, 2018), FedRGD's and MFCL's alternative to BatchNorm;
- ``pn``: Peer Normalization (mfcl.md Eq. 3-4), GroupNorm whose statistics are pooled
  over the two augmented views of each sample (:mod:`fedprior.models.peer_norm`);
- ``none``: identity.
"""

from __future__ import annotations

from torch import nn

from fedprior.models.peer_norm import PeerNorm, group_count

NORMS = ("bn", "bn-batch", "gn", "pn", "none")


def norm2d(kind: str, channels: int, groups: int = 32) -> nn.Module:
    """A 2-d normalization layer over ``channels`` (GroupNorm and PN use min(groups, channels) groups dividing it)."""
    if kind == "bn":
        return nn.BatchNorm2d(channels)
    if kind == "bn-batch":
        return nn.BatchNorm2d(channels, track_running_stats=False)
    if kind == "gn":
        return nn.GroupNorm(group_count(channels, groups), channels)
    if kind == "pn":
        return PeerNorm(channels, groups)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown normalization '{kind}'; accepted: {', '.join(NORMS)}")
