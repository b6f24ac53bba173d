"""Synthetic(alpha, beta): the FedProx paper's synthetic federation, generated lazily per client.

Li, Sahu, Zaheer, Sanjabi, Talwalkar and Smith, "Federated Optimization in Heterogeneous Networks"
(FedProx), MLSys 2020, Sec. 5.1 (after Shamir et al.'s setting): device k holds samples
``(x, y)`` of a multinomial logistic model of its own,

* ``y = argmax(softmax(W_k x + b_k))``, 60-d ``x``, 10 classes;
* ``W_k ~ N(u_k, 1)``, ``b_k ~ N(u_k, 1)`` (entrywise), ``u_k ~ N(0, alpha)``: how far the local models differ;
* ``x ~ N(v_k, Sigma)``, ``Sigma`` diagonal with ``Sigma_jj = j^-1.2``, ``v_k ~ N(B_k, 1)`` (entrywise),
  ``B_k ~ N(0, beta)``: how far the local feature distributions differ;
* Synthetic IID (``iid``): one ``W``, ``b ~ N(0, 1)`` for all devices and ``x ~ N(0, Sigma)``;
* the devices' sizes follow a power law.

Facts taken from the authors' generator (github.com/litian96/FedProx, ``data/synthetic_*/generate_synthetic.py``;
read, not copied): ``alpha`` and ``beta`` are standard deviations (``np.random.normal(0, alpha)``), the same
``u_k`` is the mean of ``W_k`` and of ``b_k``, and a device's size is ``floor(LogNormal(4, 2)) + 50``
(the "power law": a heavy tail, mean ~ e^6 + 50 ~ 450, a few devices with thousands). Where they differ from
the paper the paper wins: each device's data is split 80% / 20% into training and test (the generator writes 90% / 10%).

What is ours: nothing is drawn for the whole population at once. Client ``k``'s model, feature mean and
samples come from the stream ``(seed, "synthetic", k)`` alone, and its size from a block of
:data:`SIZE_BLOCK` clients' sizes drawn from ``(seed, "synthetic-sizes", k // SIZE_BLOCK)``. So client ``k``'s
data depend on ``(seed, k)`` only: not on the number of clients, nor on which clients were generated
before; a federation of 10^6 clients holds a 4 MB array of sizes and generates a client when it is asked for.
The global test set (:meth:`SyntheticFederation.test_set`) is the union of the test splits of the first
``min(N, TEST_CLIENTS)`` clients: all of them at the paper's 30, the same 1,000 clients (a random sample of
the population, since clients are drawn independently) for every ``N >= 1,000``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fedprior.seeding import numpy_rng

NAME = "synthetic"
DIMENSION, NUM_CLASSES = 60, 10
CLASS_NAMES = tuple(f"class {c}" for c in range(NUM_CLASSES))
TRAIN_FRACTION = 0.8
"""Each device's training share (the FedProx paper, Sec. 5.1 and App. C.1: 80% training, 20% testing)."""
SIZE_BLOCK = 1024
"""Clients whose sizes one stream draws (so that N sizes cost N / 1024 generators, not N)."""
TEST_CLIENTS = 1000
"""The global test set is the test splits of the first min(N, TEST_CLIENTS) clients."""
LOGNORMAL_MEAN, LOGNORMAL_SIGMA, MIN_SIZE = 4.0, 2.0, 50
"""A device's size: floor(LogNormal(4, 2)) + 50 (the authors' generator)."""


def feature_scales() -> np.ndarray:
    """The standard deviations ``sqrt(Sigma_jj) = j^-0.6``, j = 1..60 (the FedProx paper, Sec. 5.1)."""
    return np.power(np.arange(1, DIMENSION + 1, dtype=np.float64), -0.6)


def client_sizes(seed: int, num_clients: int) -> np.ndarray:
    """The ``int32`` sizes (training + test samples) of clients ``0..num_clients-1``; client k's size depends on (seed, k) only."""
    blocks = -(-num_clients // SIZE_BLOCK)
    drawn = [numpy_rng(seed, "synthetic-sizes", b).lognormal(LOGNORMAL_MEAN, LOGNORMAL_SIGMA, SIZE_BLOCK) for b in range(blocks)]
    sizes = np.concatenate(drawn)[:num_clients] if drawn else np.zeros(0)
    return (np.floor(sizes) + MIN_SIZE).astype(np.int32)


def train_size(size: int) -> int:
    """How many of a client's ``size`` samples are for training: floor(0.8 size)."""
    return int(size * TRAIN_FRACTION)


@dataclass(frozen=True)
class ClientSamples:
    """One client's data: training and test features (float32, (n, 60)) and labels (int64)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


@dataclass(frozen=True)
class SyntheticFederation:
    """Synthetic(alpha, beta) (or Synthetic IID) with ``num_clients`` clients under ``seed``: sizes now, samples when asked."""

    num_clients: int
    alpha: float = 1.0
    beta: float = 1.0
    iid: bool = False
    seed: int = 0
    sizes: np.ndarray = field(init=False, repr=False, compare=False)
    """Every client's size (training + test), ``int32``: the only thing held per client."""

    def __post_init__(self) -> None:
        if self.num_clients < 1:
            raise ValueError(f"num_clients must be at least 1, got {self.num_clients}")
        if self.alpha < 0 or self.beta < 0:
            raise ValueError(f"alpha and beta are standard deviations (>= 0), got {self.alpha}, {self.beta}")
        object.__setattr__(self, "sizes", client_sizes(self.seed, self.num_clients))

    @property
    def train_sizes(self) -> np.ndarray:
        """Every client's number of training samples (``int32``)."""
        return (self.sizes * TRAIN_FRACTION).astype(np.int32)

    def _model(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(W (60, 10), b (10,), v (60,)) of a client: its own (non-IID, from its stream ``rng``), or the shared one (IID)."""
        if self.iid:
            shared = numpy_rng(self.seed, "synthetic-shared")
            return shared.normal(0.0, 1.0, (DIMENSION, NUM_CLASSES)), shared.normal(0.0, 1.0, NUM_CLASSES), np.zeros(DIMENSION)
        u, big_b = rng.normal(0.0, self.alpha), rng.normal(0.0, self.beta)
        w = rng.normal(u, 1.0, (DIMENSION, NUM_CLASSES))
        b = rng.normal(u, 1.0, NUM_CLASSES)
        return w, b, rng.normal(big_b, 1.0, DIMENSION)

    def client(self, client_id: int) -> ClientSamples:
        """Client ``client_id``'s samples, generated from ``(seed, "synthetic", client_id)``: its first 80% for training, the rest for test."""
        if not 0 <= client_id < self.num_clients:
            raise IndexError(f"client {client_id} is not one of the {self.num_clients} clients")
        rng = numpy_rng(self.seed, "synthetic", client_id)
        w, b, v = self._model(rng)
        n = int(self.sizes[client_id])
        x = v + rng.standard_normal((n, DIMENSION)) * feature_scales()  # N(v, Sigma) with a diagonal Sigma
        y = np.argmax(x @ w + b, axis=1)  # softmax is monotone: its argmax is the logits'
        cut = train_size(n)
        x32 = x.astype(np.float32)
        return ClientSamples(x32[:cut], y[:cut].astype(np.int64), x32[cut:], y[cut:].astype(np.int64))

    def test_set(self, clients: int = TEST_CLIENTS) -> tuple[np.ndarray, np.ndarray]:
        """The global test set: the test splits of clients ``0..min(N, clients)-1``, concatenated."""
        parts = [self.client(k) for k in range(min(self.num_clients, clients))]
        return np.concatenate([p.x_test for p in parts]), np.concatenate([p.y_test for p in parts])
