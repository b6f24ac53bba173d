"""The ``[partition]`` config section: how the training set is split over the clients.

Defined here, by the layer that uses it; ``fedprior.experiments.config`` composes it
into the experiment config.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from fedprior.errors import ConfigError
from fedprior.validation import ConfigSection

SCHEME_NAMES = ("iid", "shard", "dirichlet", "window", "natural", "quantity")
FLWR_PREFIX = "flwr:"


class PartitionConfig(ConfigSection):
    scheme: str = "iid"
    """How the training set is split over clients: iid, shard (sort by label, s shards each), dirichlet (LDA), window (fixed class windows), natural (one client per natural owner, e.g. FEMNIST writers), quantity (IID draws of skewed sizes: partition.sizes, partition.size_ratio), or flwr:NAME, flwr-datasets' partitioner NAME (e.g. flwr:DirichletPartitioner; the hf extra; docs/huggingface.md)."""
    shards: int = Field(2, ge=1)
    """Shards per client for scheme=shard (the FST-CBDG paper, Sec. 4.1: N*s shards of the label-sorted data)."""
    alpha: float = Field(0.5, gt=0)
    """Dirichlet concentration for scheme=dirichlet; smaller is more heterogeneous."""
    min_size: int = Field(0, ge=0)
    """For scheme=dirichlet: redraw until every client holds at least this many samples."""
    window: int = Field(2, ge=1)
    """Classes per client for scheme=window (the MFCL paper's Table 1: client m holds classes mW..mW+W-1 mod n, equal counts)."""
    scenario: str | None = None
    """An MFCL scenario by name: Sc1..Sc10 (the MFCL paper's Table 1: 10 clients, 10 classes, window = the number) or Sc11..Sc110 (Table 4: 100 clients, 100 classes, window = number - 10); sets scheme = window and the window; "" clears it."""
    balance: bool = False
    """For scheme=dirichlet: the FedDB code's variant (a client holding n/num_clients samples gets no more; redraw until every client holds one)."""
    sizes: Literal["linear", "exponential", "power-law"] = "power-law"
    """For scheme=quantity: how a client's size grows with its id, from client 0 (smallest) to the last (largest): linear, exponential (a geometric progression) or power-law (a power of the rank)."""
    size_ratio: float = Field(10.0, ge=1)
    """For scheme=quantity: the largest client's size over the smallest's (1: equal sizes)."""
    num_labeled: int = Field(0, ge=0)
    """Semi-supervised split (the FedDB paper, Sec. 5.1): this many labeled images in total, drawn class-balanced; the labeled and the unlabeled set are each split over the clients by `scheme`, with their own draw. 0 = no split (clients hold labeled data only)."""
    num_unlabeled: int = Field(0, ge=0)
    """With num_labeled > 0: keep this many of the other training images, drawn at random, as the unlabeled set (0 = all of them, the paper)."""
    labeled_in_unlabeled: bool = True
    """With num_labeled > 0: each client's unlabeled pool also holds its labeled images, without their labels (the FedDB paper, Sec. 5.1)."""
    flwr_kwargs: dict[str, Any] = {}
    """For scheme=flwr:NAME: the partitioner's other constructor arguments, e.g. {min_partition_size = 10, self_balancing = true}; num_partitions, seed, partition_by, alpha, num_shards_per_partition and num_classes_per_partition come from federation.num_clients, run.seed, the label column, partition.alpha, partition.shards and partition.window unless given here (num_partitions and seed never)."""
    flwr_shuffle: bool = True
    """For scheme=flwr:NAME: shuffle the training rows with the run seed before the partitioner sees them, as flwr-datasets' FederatedDataset does (shuffle=True); false hands them over in the dataset's order."""
    domains: str = ""
    """A feature-shift federation (docs/feature-shift.md): each client in one domain, its images split inside the domain by `scheme`. "rotation:K" (images rotated by 0, 360/K, ... degrees; Ghosh et al., NeurIPS 2020, Sec. 6: K = 4), "style" (original, low-contrast, blur, noise, inverted), "dataset" (a multi-domain dataset's own: digit5, domainnet, office-caltech10); "" = none."""
    local_test_fraction: float = Field(0.0, ge=0, lt=1)
    """Hold out this fraction of each client's data (at least one image, stratified by class) as its local test split: each client's model is then scored on it at every evaluation, per client (mean, sd, worst 10%; docs/runs.md). 0 = none, every image trains."""

    @field_validator("scheme")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if value in SCHEME_NAMES or (value.startswith(FLWR_PREFIX) and len(value) > len(FLWR_PREFIX)):
            return value
        raise PydanticCustomError(
            "scheme",
            "unknown scheme {value}; accepted: {accepted}, or 'flwr:' and the class name of a flwr-datasets partitioner",
            {"value": repr(value), "accepted": ", ".join(SCHEME_NAMES)},
        )

    @field_validator("domains")
    @classmethod
    def _known_domains(cls, value: str) -> str:
        from fedprior.partition.domains import parse_domains

        try:
            parse_domains(value)
        except ConfigError as error:
            raise PydanticCustomError("unknown_domains", str(error).split(": ", 1)[1]) from None
        return value

    def scheme_parameters(self) -> dict[str, Any]:
        """The fields that shape a split by ``scheme`` (the others are ignored by it), in the config's order."""
        if self.scheme == "shard":
            return {"shards": self.shards}
        if self.scheme == "dirichlet":
            return {"alpha": self.alpha, "min_size": self.min_size, "balance": self.balance}
        if self.scheme == "window":
            return {"window": self.window}
        if self.scheme == "quantity":
            return {"sizes": self.sizes, "size_ratio": self.size_ratio}
        if self.scheme.startswith(FLWR_PREFIX):  # the arguments flwr-datasets' partitioner gets, less the clients and the seed
            from fedprior.partition.flower_datasets import partitioner_arguments

            arguments = partitioner_arguments(
                self.scheme, 1, 0, alpha=self.alpha, shards=self.shards, window=self.window, kwargs=self.flwr_kwargs, has_groups=None
            )
            return {**{k: v for k, v in arguments.items() if k not in ("num_partitions", "seed")}, "flwr_shuffle": self.flwr_shuffle}
        return {}
