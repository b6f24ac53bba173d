"""The run's data resident on its device: the training set moved there once, each client's data gathered there by index.

The training tensors go to the run's device once per run (per worker process), each client's row indices go
there once (cached), and a client's fields are gathered on the device: a device-side copy, nothing crosses the bus. The values are those the CPU path
gives (the same tensors, the same rows); on the CPU ``.to(cpu)`` returns the tensors themselves, so a CPU
run is what it was, bit for bit.

Images are kept on the device as ``uint8`` pixels where they allow it (a quarter of float32's memory: CIFAR-10's
training set is 154 MB instead of 614 MB): standardized pixels (``data/standardize.py``) are turned back into the
``uint8`` values they came from on the host, once, and a client's gathered rows are turned into model inputs on the
device by looking each value up in a table of the 256 values per channel computed on the host, so they are the CPU
path's values to the bit. :func:`as_pixels` checks that round
trip on the whole training set and keeps float32 where it does not hold (features, or inputs not from ``uint8``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from fedprior.algorithms.base import ClientData
from fedprior.algorithms.pieces.tensors import to_device
from fedprior.data.standardize import PixelStandardizer
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


IMAGE_FIELDS = frozenset(names[0] for names in ROLE_FIELDS.values())
"""The client fields gathered from the training images (x, x_labeled, x_unlabeled)."""


def pixel_table(standardizer: PixelStandardizer) -> torch.Tensor:
    """``(C, 256)``: the float32 model input of each ``uint8`` value in each channel, as ``standardizer.pixels`` computes it on the host."""
    channels = len(standardizer.mean)
    values = np.broadcast_to(np.arange(256, dtype=np.uint8), (1, channels, 1, 256))
    return standardizer.pixels(values.copy()).view(channels, 256)


def standardized(pixels: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``uint8`` images ``(N, C, H, W)`` -> their model inputs, looked up in ``table`` (:func:`pixel_table`, on their device).

    A lookup, not arithmetic: the values are the host's to the bit on any device (a GPU divides by a scalar
    as a product with its reciprocal, which can differ in the last bit).
    """
    channel = torch.arange(table.shape[0], device=pixels.device).view(1, -1, 1, 1)
    return table[channel, pixels.long()]


def as_pixels(x: torch.Tensor, standardizer: PixelStandardizer) -> torch.Tensor | None:
    """The ``uint8`` pixels that ``standardizer.pixels`` turns into exactly ``x`` (float32 images), or None where there are none.

    None for features or other inputs (no statistics, not 4-dimensional, or any value off the round trip).
    """
    if standardizer.identity or x.ndim != 4 or x.dtype != torch.float32 or x.shape[1] != len(standardizer.mean):
        return None
    pixels = standardizer.invert(x).mul_(255.0).round_().clamp_(0, 255).to(torch.uint8)
    return pixels if torch.equal(standardized(pixels, pixel_table(standardizer)), x) else None


@dataclass
class ResidentClients:
    """Client ``i``'s data (``self(i)``) gathered on ``device`` from the training tensors moved there once.

    ``fields``: the data fields the algorithm reads (``client_side.client_fields``). The row indices of each
    (client, role) are moved to the device the first time the client is asked for and kept. Off the CPU, images
    standardized by ``standardizer`` are kept as ``uint8`` pixels and standardized again when gathered
    (:func:`as_pixels`; the same values).
    """

    partition: Partition
    train: dict[str, torch.Tensor]
    fields: tuple[str, ...]
    device: torch.device
    standardizer: PixelStandardizer = field(default_factory=PixelStandardizer)
    _rows: dict[tuple[int, str], torch.Tensor] = field(default_factory=dict, init=False, repr=False)
    _table: torch.Tensor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        pixels = None if self.device.type == "cpu" else as_pixels(self.train["x"], self.standardizer)
        self._table = None if pixels is None else pixel_table(self.standardizer).to(self.device)
        self.train = to_device({**self.train, "x": self.train["x"] if pixels is None else pixels}, self.device)

    def rows(self, client_id: int, role: str) -> torch.Tensor:
        key = (client_id, role)
        if key not in self._rows:
            self._rows[key] = torch.from_numpy(self.partition.client(client_id)[role]).to(self.device)
        return self._rows[key]

    def __call__(self, client_id: int) -> ClientData:
        data = select_client_data(self.partition, self.train, self.fields, client_id, self.rows)
        if self._table is None:
            return data
        return {name: standardized(value, self._table) if name in IMAGE_FIELDS else value for name, value in data.items()}
