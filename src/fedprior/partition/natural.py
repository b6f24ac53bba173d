"""The natural partition: each client holds the data of one natural owner (FEMNIST's writers).

FedBM's FEMNIST setting (the FedBM paper ("FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning"), Sec. IV-A1, after LEAF): 35 writers, each writer a
client. The dataset gives every training image's owner (``Dataset.train_groups``); the
i-th smallest owner id becomes client i, so the number of distinct owners in the pool
must equal ``federation.num_clients``.
"""

from __future__ import annotations

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.checks import check_num_clients


class NaturalPartitioner:
    """Client i holds the positions whose group is the i-th smallest group id."""

    def __init__(self, num_clients: int, groups: np.ndarray | None) -> None:
        self.num_clients = check_num_clients(num_clients)
        if groups is None:
            raise ConfigError("partition.scheme: 'natural' needs a dataset whose images have natural owners (e.g. femnist)")
        self.groups = np.asarray(groups)

    def split(self, labels: np.ndarray) -> list[np.ndarray]:
        if self.groups.shape != np.asarray(labels).shape:
            raise ValueError(f"need one group per label: {self.groups.shape} groups, {np.asarray(labels).shape} labels")
        owners = np.unique(self.groups)
        if owners.size != self.num_clients:
            raise ConfigError(
                f"federation.num_clients: the natural partition has {owners.size} owners in the training pool, set federation.num_clients = {owners.size}"
            )
        order = np.argsort(self.groups, kind="stable")  # one sort, O(S log S), not a scan of every label per owner (O(N S))
        starts = np.searchsorted(self.groups[order], owners)
        return [part.astype(np.int64) for part in np.split(order, starts[1:])]
