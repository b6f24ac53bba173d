"""From the ``[partition]`` config to a partitioner."""

from __future__ import annotations

from fedprior.errors import ConfigError
from fedprior.partition.base import Partitioner

SCHEMES: dict[str, str] = {
    "iid": "uniformly random near-equal shares (fst-cbdg.txt 4.1)",
    "shard": "sort by label, N*s shards, s random shards per client (fst-cbdg.txt 4.1)",
    "dirichlet": "per class, proportions over clients ~ Dir(alpha) (LDA; fst-cbdg.txt 4.1, feddb.txt 5.1)",
    "window": "client m holds classes mW..mW+W-1 mod n, equal counts (mfcl.md Tables 1 and 4)",
    "natural": "each client is one natural owner of the data, e.g. a FEMNIST writer (fedbm.txt IV-A1)",
}
"""The partition schemes ``partition.scheme`` accepts, with a line each."""


def make_partitioner(
    scheme: str, num_clients: int, seed: int, *, shards: int = 2, alpha: float = 0.5, min_size: int = 0, window: int = 2, balance: bool = False, groups=None
) -> Partitioner:
    """The partitioner named ``scheme`` with the config's parameters.

    ``shards`` serves scheme ``shard``, ``alpha``, ``min_size`` and ``balance`` (the FedDB
    code's variant) serve ``dirichlet``, ``window`` serves ``window``, ``groups`` (each position's
    owner, aligned with the labels ``split`` gets) serves ``natural``; the others are ignored.
    """
    if scheme == "iid":
        from fedprior.partition.iid import IidPartitioner

        return IidPartitioner(num_clients, seed=seed)
    if scheme == "shard":
        from fedprior.partition.shard import ShardPartitioner

        return ShardPartitioner(num_clients, shards, seed=seed)
    if scheme == "dirichlet":
        from fedprior.partition.dirichlet import DirichletPartitioner

        return DirichletPartitioner(num_clients, alpha, seed=seed, min_size=min_size, balance=balance)
    if scheme == "window":
        from fedprior.partition.window import ClassWindowPartitioner

        return ClassWindowPartitioner(num_clients, window, seed=seed)
    if scheme == "natural":
        from fedprior.partition.natural import NaturalPartitioner

        return NaturalPartitioner(num_clients, groups)
    raise ConfigError(f"partition.scheme: unknown scheme {scheme!r}; accepted: {', '.join(SCHEMES)}")
