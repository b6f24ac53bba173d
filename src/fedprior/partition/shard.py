"""Sharding: sort by label, cut into ``N * s`` shards, ``s`` random shards per client.

the FST-CBDG paper ("Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model"), Sec. 4.1 ("Datasets partition", following Lee et al. 2022, itself after
McMahan et al. 2017): "Sharding involves sorting the data based on the labels and then
dividing them into Ns shards where s represents the number of shards per client. Each
client subsequently randomly selects s shards without replacement to constitute its
local data."
"""

from __future__ import annotations

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.checks import check_num_clients
from fedprior.seeding import numpy_rng


class ShardPartitioner:
    """Each client gets ``shards_per_client`` contiguous shards of the label-sorted data.

    Parameters
    ----------
    num_clients:
        Number of clients ``N`` (config field ``federation.num_clients``).
    shards_per_client:
        Shards per client ``s`` (config field ``partition.shards``); smaller is more
        heterogeneous: with shards no larger than a class, a client sees at most ``s`` classes.
    seed:
        Seed of the ``("partition", "shard")`` stream.

    Notes
    -----
    Where the paper is silent, and what this code chooses:

    * Ties in the sort (all samples of one class) are broken in random order, so which
      samples of a class share a shard is random too.
    * When the number of samples is not a multiple of ``N * s``, the shards are cut with
      ``np.array_split``: sizes differ by at most one and every sample is used (the usual
      implementations drop the remainder instead).
    * Clients draw shards jointly: a random permutation of the ``N * s`` shard ids is cut
      into ``N`` groups of ``s``, which is the same as each client drawing ``s`` shards
      without replacement from those still unclaimed.
    * A shard may straddle a class boundary, so a client can see more than ``s`` classes
      when class sizes are not multiples of the shard size.
    """

    def __init__(self, num_clients: int, shards_per_client: int = 2, seed: int = 0) -> None:
        self.num_clients = check_num_clients(num_clients)
        if isinstance(shards_per_client, bool) or not isinstance(shards_per_client, int) or shards_per_client < 1:
            raise ConfigError(f"partition.shards: must be a positive integer, got {shards_per_client!r}")
        self.shards_per_client = shards_per_client
        self.seed = seed

    @property
    def num_shards(self) -> int:
        return self.num_clients * self.shards_per_client

    def split(self, labels: np.ndarray) -> list[np.ndarray]:
        labels = np.asarray(labels)
        check_num_clients(self.num_clients, labels.size)
        if self.num_shards > labels.size:
            raise ConfigError(
                f"partition.shards: {self.num_clients} clients x {self.shards_per_client} shards = {self.num_shards} "
                f"shards but only {labels.size} training samples; use at most "
                f"{labels.size // self.num_clients} shards per client"
            )
        rng = numpy_rng(self.seed, "partition", "shard")
        shuffled = rng.permutation(labels.size)
        order = shuffled[np.argsort(labels[shuffled], kind="stable")]
        shards = np.array_split(order, self.num_shards)
        owners = rng.permutation(self.num_shards).reshape(self.num_clients, self.shards_per_client)
        return [np.sort(np.concatenate([shards[s] for s in row])).astype(np.int64) for row in owners]
