"""Quantity skew: clients of different sizes, each an IID draw of the data (sizes linear, exponential or power-law in the client id).

A client's share is a weight w_i of its id i = 0 .. N-1, smallest at client 0 and largest at client N-1, scaled so that
the largest is ``size_ratio`` times the smallest (r = i / (N - 1), R = ``size_ratio``):

- ``linear``:      w_i = 1 + (R - 1) r
- ``exponential``: w_i = R^r                       (sizes in geometric progression)
- ``power-law``:   w_i = (i + 1)^a, a = ln R / ln N (sizes a power of the rank)

Client i holds n_i = n w_i / sum(w) samples of the n (rounded down, the remainder one each to the largest fractions),
drawn at random without replacement: the classes keep their global proportions in every client, so only the
quantity is skewed (the label skew of ``dirichlet``, ``shard`` and ``window`` is absent).

flwr-datasets offers the same shapes with fixed rates (``LinearPartitioner``: w_i = i + 1, here linear with
R = N; ``SquarePartitioner``: (i + 1)^2, power-law with R = N^2; ``ExponentialPartitioner``: e^i, exponential with
R = e^(N - 1)). Here one parameter, the ratio of the largest client to the smallest, means the same for the
three shapes, and a ratio that would leave a client without a sample is refused, naming it.
"""

from __future__ import annotations

import math

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.checks import check_num_clients
from fedprior.seeding import numpy_rng

SHAPES = ("linear", "exponential", "power-law")
"""The accepted ``partition.sizes``."""


def size_weights(shape: str, num_clients: int, ratio: float) -> np.ndarray:
    """The clients' weights w_0 .. w_{N-1} (see the module): increasing, w_{N-1} / w_0 = ``ratio``."""
    if num_clients == 1:
        return np.ones(1)
    i = np.arange(num_clients, dtype=float)
    r = i / (num_clients - 1)
    if shape == "linear":
        return 1 + (ratio - 1) * r
    if shape == "exponential":
        return ratio**r
    return (i + 1) ** (math.log(ratio) / math.log(num_clients))


def client_sizes(weights: np.ndarray, total: int) -> np.ndarray:
    """``total`` split in proportion to ``weights``: each share rounded down, the remainder one each to the largest fractions."""
    exact = total * weights / weights.sum()
    sizes = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - sizes), kind="stable")
    sizes[order[: total - int(sizes.sum())]] += 1
    return sizes


class QuantitySkewPartitioner:
    """Clients of skewed sizes (``partition.scheme = 'quantity'``), each an IID draw of the data.

    Parameters
    ----------
    num_clients:
        Number of clients ``N`` (config field ``federation.num_clients``).
    sizes:
        How a client's size grows with its id (``partition.sizes``): ``linear``, ``exponential`` or ``power-law``.
    size_ratio:
        The largest client's size over the smallest's, R >= 1 (``partition.size_ratio``; 1: equal sizes, as ``iid``).
    seed:
        Seed of the ``("partition", "quantity")`` stream, which draws the samples of each client.

    Notes
    -----
    Client 0 is the smallest and client N - 1 the largest, as in flwr-datasets' partitioners; the runtime samples
    clients uniformly, so their ids carry no other meaning. Sizes are exact to one sample: the rounding gives the
    remainder to the clients whose exact share lost most.
    """

    def __init__(self, num_clients: int, sizes: str = "power-law", size_ratio: float = 10.0, seed: int = 0) -> None:
        self.num_clients = check_num_clients(num_clients)
        if sizes not in SHAPES:
            raise ConfigError(f"partition.sizes: unknown value {sizes!r}; accepted: {', '.join(SHAPES)}")
        if isinstance(size_ratio, bool) or not isinstance(size_ratio, int | float) or not math.isfinite(size_ratio) or size_ratio < 1:
            raise ConfigError(f"partition.size_ratio: the largest client over the smallest must be a finite number >= 1, got {size_ratio!r}")
        self.sizes, self.size_ratio, self.seed = sizes, float(size_ratio), seed

    def split(self, labels: np.ndarray) -> list[np.ndarray]:
        labels = np.asarray(labels)
        check_num_clients(self.num_clients, labels.size)
        sizes = client_sizes(size_weights(self.sizes, self.num_clients, self.size_ratio), labels.size)
        if sizes.min() < 1:
            raise ConfigError(
                f"partition.size_ratio: {self.size_ratio:g} leaves client {int(sizes.argmin())} without a sample ({self.sizes} sizes, {self.num_clients} clients, "
                f"{labels.size} samples); lower it or give fewer clients"
            )
        order = numpy_rng(self.seed, "partition", "quantity").permutation(labels.size)
        return [np.sort(part).astype(np.int64) for part in np.split(order, np.cumsum(sizes)[:-1])]
