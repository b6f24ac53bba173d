"""Latent Dirichlet allocation (LDA) partition: each class split over clients by Dir(alpha) proportions.

the FST-CBDG paper ("Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model"), Sec. 4.1: "For any given class k, each client i randomly samples a
proportion p_ki of the data belonging to class k, where p_ki ~ Dir(alpha) and
sum_i p_ki = 1." FedDB (the FedDB paper ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning"), Sec. 5.1) and FedBM use the same per-class draw, with
delta resp. beta in the role of alpha.
"""

from __future__ import annotations

import math

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.checks import check_num_clients
from fedprior.seeding import numpy_rng


class DirichletPartitioner:
    """For each class, proportions over the clients ~ Dir(alpha, ..., alpha); the class is cut accordingly.

    Parameters
    ----------
    num_clients:
        Number of clients (config field ``federation.num_clients``).
    alpha:
        Concentration (``partition.alpha``); smaller is more heterogeneous.
    seed:
        Seed of the ``("partition", "dirichlet")`` stream.
    min_size:
        Redraw the whole partition, continuing the same random stream, until every client
        holds at least this many samples (``partition.min_size``); 0 accepts the first draw,
        which may leave clients empty when alpha is small.
    balance:
        The FedDB authors' code variant (``non_iid`` in ``src/data.py``): while classes are
        dealt out in turn, a client that already holds at least ``n / num_clients`` samples
        gets no share of later classes (its proportion is zeroed and the rest renormalized),
        and a draw is accepted only when every client holds at least ``max(min_size, 1)``
        samples. This caps client sizes at roughly ``n / num_clients`` plus one class share.
        The default (False) follows the papers.
    max_tries:
        How many draws to try before giving up with a ConfigError.

    Notes
    -----
    Where the papers are silent, and what this code chooses:

    * Class ``k``'s samples are shuffled, then cut at ``floor(cumsum(p_k) * n_k)``, the usual
      implementation (Hsu et al. 2019; NIID-Bench): every sample is used, rounding goes to
      the later clients.
    * Classes are dealt in increasing label order, one Dirichlet draw each.
    * The FedDB paper writes the draw as q ~ Dir(delta * p) over classes per client; its code
      draws per class over clients, as here (docs/feddb.md).
    """

    def __init__(self, num_clients: int, alpha: float = 0.5, seed: int = 0, min_size: int = 0, balance: bool = False, max_tries: int = 1000) -> None:
        self.num_clients = check_num_clients(num_clients)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 0:
            raise ConfigError(f"partition.alpha: must be a positive finite number, got {alpha!r}")
        if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 0:
            raise ConfigError(f"partition.min_size: must be a non-negative integer, got {min_size!r}")
        if not isinstance(balance, bool):
            raise ConfigError(f"partition.balance: must be true or false, got {balance!r}")
        if isinstance(max_tries, bool) or not isinstance(max_tries, int) or max_tries < 1:
            raise ConfigError(f"max_tries: must be a positive integer, got {max_tries!r}")
        self.alpha = float(alpha)
        self.seed = seed
        self.min_size = min_size
        self.balance = balance
        self.max_tries = max_tries

    @property
    def required_size(self) -> int:
        """The smallest client size a draw must reach to be accepted."""
        return max(self.min_size, 1) if self.balance else self.min_size

    def split(self, labels: np.ndarray) -> list[np.ndarray]:
        labels = np.asarray(labels)
        n, num_clients = labels.size, self.num_clients
        check_num_clients(num_clients, n)
        if self.required_size * num_clients > n:
            raise ConfigError(
                f"partition.min_size: {num_clients} clients x {self.required_size} samples each needs "
                f"{self.required_size * num_clients} samples but there are only {n}; use at most {n // num_clients}"
            )
        rng = numpy_rng(self.seed, "partition", "dirichlet")
        members = [np.flatnonzero(labels == k) for k in np.unique(labels)]
        cap = n / num_clients
        smallest = 0
        for _ in range(self.max_tries):
            owner = np.empty(n, dtype=np.int64)
            sizes = np.zeros(num_clients, dtype=np.int64)
            for idx in members:
                idx = rng.permutation(idx)
                p = rng.dirichlet(np.full(num_clients, self.alpha))
                if self.balance:
                    open_ = sizes < cap
                    p = p * open_
                    p = p / p.sum() if p.sum() > 0 else open_ / open_.sum()
                cuts = (np.cumsum(p) * idx.size).astype(np.int64)
                cuts = np.minimum(np.maximum.accumulate(cuts), idx.size)
                counts = np.diff(np.concatenate(([0], cuts[:-1], [idx.size])))
                owner[idx] = np.repeat(np.arange(num_clients), counts)
                sizes += counts
            smallest = int(sizes.min())
            if smallest >= self.required_size:
                order = np.argsort(owner, kind="stable")
                return [part.astype(np.int64) for part in np.split(order, np.cumsum(sizes)[:-1])]
        if self.balance and self.min_size <= 1:  # the capped draw's own requirement: lowering min_size cannot help
            raise ConfigError(
                f"partition.balance: the capped Dirichlet draw (the FedDB code's variant) left a client of the {num_clients} "
                f"without a sample in each of {self.max_tries} tries with alpha={self.alpha:g} on {n} samples (smallest client "
                f"in the last draw: {smallest}), and it needs every client to get one; raise partition.alpha, use fewer "
                "clients or more samples, or set partition.balance = false (the papers' plain draw)"
            )
        raise ConfigError(
            f"partition.min_size: no Dirichlet draw with alpha={self.alpha:g} gave every one of the {num_clients} "
            f"clients at least {self.required_size} samples in {self.max_tries} tries (smallest client in the last "
            f"draw: {smallest}); lower partition.min_size, raise partition.alpha or use fewer clients"
        )
