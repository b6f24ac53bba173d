"""Client sampling: one stream per (stage, round), shared by every algorithm so comparisons are paired."""

from __future__ import annotations

from fedprior.seeding import numpy_rng


def clients_per_round(num_clients: int, fraction: float) -> int:
    """max(1, round(fraction * num_clients)), the number of clients sampled each round."""
    return max(1, min(num_clients, int(round(fraction * num_clients))))


def sample_clients(seed: int, stage: str, round_: int, num_clients: int, fraction: float) -> list[int]:
    """The sorted ids of the clients sampled, without replacement, in ``round_`` of ``stage``."""
    k = clients_per_round(num_clients, fraction)
    if k == num_clients:
        return list(range(num_clients))
    chosen = numpy_rng(seed, "sampling", stage, round_).choice(num_clients, size=k, replace=False)
    return sorted(int(c) for c in chosen)
