"""One seed explains a run: independent random streams derived per purpose.

Every random choice in fedprior draws from a stream named by its purpose, e.g.
``("partition",)``, ``("sampling", stage, round)`` or ``("client", stage, round, client_id)``.
Streams depend only on the run seed and those keys, never on the order in which
other streams were used, so a resumed run, a vectorized run and a Flower run draw
exactly the same numbers as the uninterrupted in-process run.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


MAX_SEED = 2**63 - 1
"""The largest run seed: TOML's integers are 64-bit signed (config.toml holds the seed), and torch's seeding takes
64 bits; every stream's own seed is derived from it (63 bits, :func:`derived_seed`)."""


def _key_to_int(key: str | int) -> int:
    if isinstance(key, (int, np.integer)):
        if key < 0:
            raise ValueError(f"stream keys must be non-negative, got {key}")
        return int(key)
    return zlib.crc32(str(key).encode("utf-8"))


def seed_sequence(seed: int, *keys: str | int) -> np.random.SeedSequence:
    """The seed sequence of the stream named ``keys`` under run seed ``seed``."""
    return np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(_key_to_int(k) for k in keys))


def numpy_rng(seed: int, *keys: str | int) -> np.random.Generator:
    """A NumPy generator for the stream named ``keys``."""
    return np.random.default_rng(seed_sequence(seed, *keys))


def derived_seed(seed: int, *keys: str | int) -> int:
    """A 63-bit integer seed for the stream named ``keys`` (for libraries that take an int)."""
    return int(seed_sequence(seed, *keys).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def torch_generator(seed: int, *keys: str | int) -> torch.Generator:
    """A CPU torch generator for the stream named ``keys`` (torch is imported here only: partitions stay NumPy)."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(derived_seed(seed, *keys))
    return generator
