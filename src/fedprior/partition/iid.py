"""IID partition: a random permutation cut into near-equal parts (the FST-CBDG paper ("Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model"), Sec. 4.1, "evenly split")."""

from __future__ import annotations

import numpy as np

from fedprior.partition.checks import check_num_clients
from fedprior.seeding import numpy_rng


class IidPartitioner:
    """Every client gets a uniformly random, near-equal share (sizes differ by at most one)."""

    def __init__(self, num_clients: int, seed: int = 0) -> None:
        self.num_clients = check_num_clients(num_clients)
        self.seed = seed

    def split(self, labels: np.ndarray) -> list[np.ndarray]:
        labels = np.asarray(labels)
        check_num_clients(self.num_clients, labels.size)
        order = numpy_rng(self.seed, "partition", "iid").permutation(labels.size)
        return [np.sort(part).astype(np.int64) for part in np.array_split(order, self.num_clients)]
