"""From the ``[partition]`` config to a partitioner."""

from __future__ import annotations

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.base import Partition, Partitioner
from fedprior.partition.config import PartitionConfig
from fedprior.partition.labeled_split import LabeledSplitPartitioner
from fedprior.seeding import derived_seed

SCHEMES: dict[str, str] = {
    "iid": "uniformly random near-equal shares (the FST-CBDG paper, Sec. 4.1)",
    "shard": "sort by label, N*s shards, s random shards per client (the FST-CBDG paper, Sec. 4.1)",
    "dirichlet": "per class, proportions over clients ~ Dir(alpha) (LDA; the FST-CBDG paper, Sec. 4.1; the FedDB paper, Sec. 5.1)",
    "window": "client m holds classes mW..mW+W-1 mod n, equal counts (the MFCL paper's Tables 1 and 4)",
    "natural": "each client is one natural owner of the data, e.g. a FEMNIST writer (the FedBM paper, Sec. IV-A1)",
    "quantity": "IID draws of skewed sizes, linear, exponential or power-law in the client id (as flwr-datasets' size partitioners)",
    "flwr:NAME": "flwr-datasets' partitioner NAME itself (e.g. flwr:DirichletPartitioner), its other arguments from partition.flwr_kwargs (docs/huggingface.md)",
}
"""The partition schemes ``partition.scheme`` accepts, with a line each."""


def scheme_partitioner(config: PartitionConfig, num_clients: int, seed: int, groups: np.ndarray | None = None) -> Partitioner:
    """The partitioner of ``config.scheme`` with its parameters (the one place that reads them).

    ``shards`` serves scheme ``shard``, ``alpha``, ``min_size`` and ``balance`` (the FedDB
    code's variant) serve ``dirichlet``, ``window`` serves ``window``, ``sizes`` and ``size_ratio`` serve ``quantity``, ``groups`` (each position's
    owner, aligned with the labels ``split`` gets) serves ``natural``; ``flwr:NAME`` is flwr-datasets' partitioner NAME
    (:mod:`fedprior.partition.flower_datasets`: alpha, shards, window, groups, flwr_kwargs and flwr_shuffle); the others are ignored.
    """
    scheme = config.scheme
    if scheme.startswith("flwr:"):
        from fedprior.partition.flower_datasets import FlowerDatasetsPartitioner

        return FlowerDatasetsPartitioner.of_config(config, num_clients, seed, groups=groups)
    if scheme == "iid":
        from fedprior.partition.iid import IidPartitioner

        return IidPartitioner(num_clients, seed=seed)
    if scheme == "shard":
        from fedprior.partition.shard import ShardPartitioner

        return ShardPartitioner(num_clients, config.shards, seed=seed)
    if scheme == "dirichlet":
        from fedprior.partition.dirichlet import DirichletPartitioner

        return DirichletPartitioner(num_clients, config.alpha, seed=seed, min_size=config.min_size, balance=config.balance)
    if scheme == "window":
        from fedprior.partition.window import ClassWindowPartitioner

        return ClassWindowPartitioner(num_clients, config.window, seed=seed)
    if scheme == "natural":
        from fedprior.partition.natural import NaturalPartitioner

        return NaturalPartitioner(num_clients, groups)
    if scheme == "quantity":
        from fedprior.partition.quantity import QuantitySkewPartitioner

        return QuantitySkewPartitioner(num_clients, config.sizes, config.size_ratio, seed=seed)
    raise ConfigError(f"partition.scheme: unknown scheme {scheme!r}; accepted: {', '.join(SCHEMES)}")


class SingleRole:
    """A scheme's partitioner whose split is the one role ``"train"`` (no labeled/unlabeled split)."""

    def __init__(self, partitioner: Partitioner) -> None:
        self.partitioner = partitioner
        self.num_clients = partitioner.num_clients

    def partition(self, labels: np.ndarray) -> Partition:
        return Partition({"train": tuple(self.partitioner.split(labels))})


def make_partitioner(config: PartitionConfig, num_clients: int, seed: int, *, groups: np.ndarray | None = None) -> SingleRole | LabeledSplitPartitioner:
    """From the ``[partition]`` section to what splits the training labels: every caller's one way.

    With ``config.num_labeled > 0`` a :class:`~fedprior.partition.labeled_split.LabeledSplitPartitioner`
    (the FedDB paper, Sec. 5.1): the labeled and the unlabeled set are each partitioned by the scheme, with seeds
    derived from ``seed`` for "labeled" and "unlabeled" (independent draws, as in FedDB), ``min_size``
    applying to each set; otherwise the scheme's partitioner as the one role ``"train"``. Either way
    ``partition(labels)`` gives a :class:`~fedprior.partition.base.Partition`. ``groups`` (each
    position's natural owner) serves the ``natural`` scheme without a labeled split.
    """
    if config.num_labeled:

        def role(name: str) -> Partitioner:
            return scheme_partitioner(config, num_clients, derived_seed(seed, "partition", name))

        return LabeledSplitPartitioner(
            config.num_labeled,
            role("labeled"),
            role("unlabeled"),
            seed=seed,
            add_labeled_to_unlabeled=config.labeled_in_unlabeled,
            num_unlabeled=config.num_unlabeled,
        )
    return SingleRole(scheme_partitioner(config, num_clients, seed, groups))


def domain_split(config: PartitionConfig, labels: np.ndarray, image_domains: np.ndarray, num_domains: int, num_clients: int, seed: int) -> Partition:
    """A feature-shift federation's partition (``partition.domains``): each domain's images split over its clients by
    the section's scheme (:func:`~fedprior.partition.domains.domain_partition`), a labeled split's labeled and unlabeled
    counts shared out over the domains (:func:`~fedprior.partition.domains.shares`). What a run and ``fedprior.build_partition``
    both split."""
    from fedprior.partition.domains import domain_partition, shares

    labeled, unlabeled = shares(config.num_labeled, num_domains), shares(config.num_unlabeled, num_domains)

    def in_domain(domain_labels: np.ndarray, clients: int, domain_seed: int, d: int) -> Partition:
        fields = config.model_copy(update={"num_labeled": labeled[d], "num_unlabeled": unlabeled[d]}) if config.num_labeled else config
        return make_partitioner(fields, clients, domain_seed).partition(domain_labels)

    return domain_partition(labels, image_domains, num_clients, num_domains, seed, in_domain)
