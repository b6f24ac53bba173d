"""What a partition is, and what every partitioner provides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Partitioner(Protocol):
    """Splits a label array into per-client index arrays.

    Implementations take all their parameters (and a ``seed``) in the constructor and
    check them there, with messages that name the parameter and the value. ``split``
    returns one sorted ``int64`` array per client of positions into ``labels``; the
    arrays are disjoint. It is deterministic for a seed.
    """

    num_clients: int

    def split(self, labels: np.ndarray) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class Partition:
    """Per-client index arrays into the training set, by role.

    ``roles`` maps a role to one index array per client: ``"train"`` for clients whose
    data is a single pool, or ``"labeled"`` and ``"unlabeled"`` for the semi-supervised
    split (the FedDB paper ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning"), Sec. 5.1), where a client may see the labels of its ``labeled`` part only.
    """

    roles: dict[str, tuple[np.ndarray, ...]]

    def __post_init__(self) -> None:
        counts = {role: len(parts) for role, parts in self.roles.items()}
        if len(set(counts.values())) != 1:
            raise ValueError(f"every role needs one index array per client, got {counts}")

    @property
    def num_clients(self) -> int:
        return len(next(iter(self.roles.values())))

    def client(self, client_id: int) -> dict[str, np.ndarray]:
        """The index arrays of one client, by role."""
        return {role: parts[client_id] for role, parts in self.roles.items()}

    def holdings(self, client_id: int) -> np.ndarray:
        """Every training index client ``client_id`` holds, whatever its role (sorted, unique)."""
        return np.unique(np.concatenate([parts[client_id] for parts in self.roles.values()]))

    def client_sizes(self) -> np.ndarray:
        return np.array([self.holdings(c).size for c in range(self.num_clients)], dtype=np.int64)
