"""A sampled client's data generated when the round asks for it (``data.dataset = 'synthetic'``, ``fedprior.data.synthetic``).

Used in process (``fedprior.experiments.build``, the worker processes) and on a Flower node (``fedprior.flower.export``):
the same generator, so a node's client data are the in-process arrays bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedprior.algorithms.base import ClientData
from fedprior.data.synthetic import SyntheticFederation


@dataclass
class GeneratedClients:
    """Client ``i``'s training data (``self(i)``: ``x`` float32 (n, 60), ``y`` int64, those of ``fields``) generated on ``device``."""

    federation: SyntheticFederation
    fields: tuple[str, ...]
    device: torch.device

    def __call__(self, client_id: int) -> ClientData:
        samples = self.federation.client(client_id)
        data = {"x": torch.from_numpy(samples.x_train), "y": torch.from_numpy(samples.y_train)}
        return {name: value.to(self.device) for name, value in data.items() if name in self.fields}
