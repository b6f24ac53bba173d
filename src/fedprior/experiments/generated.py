"""A run on a federation generated per client (``data.dataset = 'synthetic'``): each client's data made when the round asks for it.

Nothing is held per client but its size (``fedprior.data.synthetic``): no training set in memory, no index array per
client, so setting up 10^6 clients costs an ``int32`` array of 4 MB. A sampled client's samples are generated from
``(run.seed, client id)`` each time it is asked for (the same numbers every time). The partition statistics describe the
first :data:`STATS_CLIENTS` clients' class counts (every client at the FedProx paper's 30) and every client's size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedprior.algorithms.base import ClientData
from fedprior.data.synthetic import CLASS_NAMES, DIMENSION, NAME, NUM_CLASSES, SyntheticFederation
from fedprior.experiments.config import ExperimentConfig
from fedprior.partition.statistics import describe

STATS_CLIENTS = 1000
"""The partition statistics' class counts (and picture) cover the first min(N, STATS_CLIENTS) clients."""
DRY_RUN_CLIENTS = 100
"""``--dry-run`` generates the first min(N, DRY_RUN_CLIENTS) clients for their class counts (a second at most)."""


def is_generated(config: ExperimentConfig) -> bool:
    """Whether ``config``'s dataset is generated per client (``synthetic``) rather than loaded."""
    return config.data.dataset == NAME


def synthetic_federation(config: ExperimentConfig) -> SyntheticFederation:
    """The run's Synthetic(alpha, beta) federation: ``federation.num_clients`` clients under ``run.seed`` (alpha, beta unset: 1)."""
    data = config.data
    return SyntheticFederation(
        config.federation.num_clients,
        alpha=1.0 if data.synthetic_alpha is None else data.synthetic_alpha,
        beta=1.0 if data.synthetic_beta is None else data.synthetic_beta,
        iid=bool(data.synthetic_iid),
        seed=config.run.seed,
    )


def test_data(federation: SyntheticFederation) -> ClientData:
    """The global test set (:meth:`SyntheticFederation.test_set`) as tensors."""
    x, y = federation.test_set()
    return {"x": torch.from_numpy(x), "y": torch.from_numpy(y)}


def generated_statistics(federation: SyntheticFederation, clients: int = STATS_CLIENTS) -> dict[str, Any]:
    """:func:`~fedprior.partition.statistics.describe` of the training labels of the first ``min(N, clients)`` clients, with the
    sizes of all N: ``num_clients``, ``num_samples``, ``client_sizes`` and the size extremes cover every client,
    ``class_counts``, ``classes_per_client``, ``beta_cib`` and ``beta_hetero`` the ``described_clients`` first ones."""
    shown = min(federation.num_clients, clients)
    counts = np.stack([np.bincount(federation.client(k).y_train, minlength=NUM_CLASSES) for k in range(shown)])
    summary = describe(counts, CLASS_NAMES)
    sizes = federation.train_sizes
    summary.update(
        {
            "num_clients": federation.num_clients,
            "num_samples": int(sizes.sum(dtype=np.int64)),
            "client_sizes": sizes.tolist(),
            "min_client_size": int(sizes.min()),
            "mean_client_size": float(sizes.mean()),
            "max_client_size": int(sizes.max()),
            "empty_clients": int((sizes == 0).sum()),
            "described_clients": shown,
            "feature_dimension": DIMENSION,
        }
    )
    return summary
