"""The run's data resident on its device: the training set moved there once, each client's data gathered there by index.

Issue 19 item 1. On a GPU, a client update used to receive its data as a CPU copy gathered from the
training tensors, which the algorithm then uploaded (one blocking copy per field and update), and every
evaluation uploaded the test set batch by batch. Here the training tensors go to the run's device once per
run (per worker process), each client's row indices go there once (cached), and a client's fields are
gathered on the device: a device-side copy, nothing crosses the bus. The values are those the CPU path
gives (the same tensors, the same rows); on the CPU ``.to(cpu)`` returns the tensors themselves, so a CPU
run is what it was, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from fedprior.algorithms.base import ClientData
from fedprior.algorithms.pieces.tensors import to_device
from fedprior.experiments.client_split import ROLE_FIELDS
from fedprior.partition import Partition


def select_client_data(
    partition: Partition, train: dict[str, torch.Tensor], inputs: tuple[str, ...], client_id: int, rows: Callable[[int, str], torch.Tensor] | None = None
) -> ClientData:
    """Client ``client_id``'s fields among ``inputs`` (x, y, x_labeled, ...), gathered from the training tensors.

    ``rows(client_id, role)``: the row indices of a role as a tensor (default: the partition's, on the host).
    """
    out: ClientData = {}
    for role, indices in partition.client(client_id).items():
        for name, source in zip(ROLE_FIELDS[role], ("x", "y"), strict=True):
            if name in inputs:
                out[name] = train[source][torch.from_numpy(indices) if rows is None else rows(client_id, role)]
    return out


@dataclass
class ResidentClients:
    """Client ``i``'s data (``self(i)``) gathered on ``device`` from the training tensors moved there once.

    ``fields``: the data fields the algorithm reads (``client_side.client_fields``). The row indices of each
    (client, role) are moved to the device the first time the client is asked for and kept.
    """

    partition: Partition
    train: dict[str, torch.Tensor]
    fields: tuple[str, ...]
    device: torch.device
    _rows: dict[tuple[int, str], torch.Tensor] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.train = to_device(self.train, self.device)

    def rows(self, client_id: int, role: str) -> torch.Tensor:
        key = (client_id, role)
        if key not in self._rows:
            self._rows[key] = torch.from_numpy(self.partition.client(client_id)[role]).to(self.device)
        return self._rows[key]

    def __call__(self, client_id: int) -> ClientData:
        return select_client_data(self.partition, self.train, self.fields, client_id, self.rows)
