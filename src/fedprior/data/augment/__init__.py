"""Data augmentation on batched image tensors, seeded per client and round.

One module per recipe: FixMatch's weak and strong views (FedDB and its
semi-supervised baselines, with the former ``kornia-fixed`` strong view), SimCLR's two
views (MFCL and the contrastive baselines), FedBM's crop and flips of generated images.

Two ways to be seeded:

- FixMatch's views (all three strong recipes) and FedBM's crop and flips are our own ops
  on whole batches with per-image parameters, drawn from a ``torch.Generator`` *on the
  images' device* (:func:`device_generator` seeded from the caller's stream, or
  :func:`generator_at` from a seed), so that a GPU never waits for a parameter drawn on
  the host;
- the kornia pipeline (SimCLR's views) draws its parameters from torch's global
  generator (on the CPU), so every call runs inside :func:`seeded`, which forks the
  global RNG state, seeds it from the caller's stream and restores it afterwards.

Either way the same client, round and seed give the same views on the same device, and
nothing else in the process sees its random state move.
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


def device_generator(generator: torch.Generator, device: torch.device) -> torch.Generator:
    """A generator on ``device`` for the random parameters of a view: ``generator`` itself when it is there already,
    else a new one seeded from it (:func:`seed_from`, a draw on the host that never waits for the device)."""
    if torch.device(generator.device) == torch.device(device):
        return generator
    return generator_at(seed_from(generator), device)


def generator_at(seed: int, device: torch.device) -> torch.Generator:
    """A generator on ``device`` seeded with ``seed`` (setting a seed waits for nothing, on any device)."""
    return torch.Generator(device=device).manual_seed(seed)
