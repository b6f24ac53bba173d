"""From the ``[partition]`` config to a partitioner."""

from __future__ import annotations

from fedprior.partition.base import Partitioner
from fedprior.partition.iid import IidPartitioner


def make_partitioner(scheme: str, num_clients: int, seed: int, *, shards: int = 2, alpha: float = 0.5,
                     min_size: int = 0, window: int = 2) -> Partitioner:
    """The partitioner named ``scheme`` with the config's parameters."""
    if scheme == "iid":
        return IidPartitioner(num_clients, seed=seed)
    from fedprior.errors import ConfigError

    raise ConfigError(f"partition.scheme: '{scheme}' is not available yet; accepted: iid")
