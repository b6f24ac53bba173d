"""Data augmentation on batched image tensors, seeded per client and round (DESIGN.md, "Augmentation is data-side").

One module per recipe: FixMatch's weak and strong views (FedDB and its
semi-supervised baselines), SimCLR's two views (MFCL and the contrastive
baselines). The ops are kornia's (it has RandAugment and every op on tensors;
there is no torchvision here). kornia draws its random parameters from torch's
global generator, so every call runs inside :func:`seeded`, which forks the global
RNG state, seeds it from the caller's stream and restores it afterwards: the same
client, round and seed give the same views in every runtime, and nothing else in
the process sees its random state move.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def seeded(seed: int, device: torch.device | None = None) -> Iterator[None]:
    """Run the block with torch's global RNG (CPU, and ``device``'s if it is CUDA) seeded to ``seed``, then restore it."""
    devices = [device] if device is not None and device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def seed_from(generator: torch.Generator) -> int:
    """A 63-bit seed drawn from a client's stream (``ClientInfo.generator(...)``), for :func:`seeded`."""
    return int(torch.randint(0, 2**62, (1,), generator=generator))
