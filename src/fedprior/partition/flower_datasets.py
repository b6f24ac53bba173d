"""``partition.scheme = "flwr:NAME"``: any fedprior dataset split by one of flwr-datasets' partitioners (the hf extra).

The partitioner is flwr-datasets' own class (``flwr_datasets.partitioner.NAME``), not a copy. It is given
a Hugging Face ``Dataset`` of the training labels (column ``label``; ``group`` where the data has natural
owners, e.g. FEMNIST's writers) and each client's positions are read back from the partitions it
returns. fedprior's fields go where they mean the same: ``federation.num_clients`` -> ``num_partitions``,
the run's seed -> ``seed``, ``partition.alpha`` -> ``alpha``, ``partition.shards`` ->
``num_shards_per_partition``, ``partition.window`` -> ``num_classes_per_partition``, the label column ->
``partition_by`` (``group`` for the natural-id partitioners); the partitioner's other arguments come from
``partition.flwr_kwargs``, which also overrides alpha, shards and window (not the clients nor the seed).
With ``partition.flwr_shuffle`` (the default) the rows are first shuffled with the run's seed, as
flwr-datasets' ``FederatedDataset`` does before it partitions (its ``shuffle=True``), so a contiguous
partitioner (``IidPartitioner``, the size partitioners) splits a shuffled set, as Flower users get it.
docs/huggingface.md compares the IID, Dirichlet and shard definitions with fedprior's own.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from fedprior.errors import ConfigError
from fedprior.hf_datasets import INSTALL, hub_access

PREFIX = "flwr:"
EXCLUDED = ("Partitioner", "IdToSizeFncPartitioner", "VerticalEvenPartitioner", "VerticalSizePartitioner")
"""Not offered: the abstract base, the one that needs a Python callable, and the two that split columns (features), not rows."""
NATURAL = ("NaturalIdPartitioner", "GroupedNaturalIdPartitioner")
"""Partitioners whose ``partition_by`` is an owner column: fedprior's ``group`` (the dataset's natural owners)."""
FIXED = {"num_partitions": "federation.num_clients", "seed": "run.seed"}
"""Arguments set by a run-level field, never by ``partition.flwr_kwargs``."""
INDEX = "fedprior_index"
"""The column that carries each row's position back out of the partitions."""


def is_flwr(scheme: str) -> bool:
    return scheme.startswith(PREFIX)


def accepted_names() -> list[str]:
    """The partitioners of the installed flwr-datasets that split rows (every class its ``partitioner`` package exports, less :data:`EXCLUDED`)."""
    module = _partitioners()
    return [name for name in module.__all__ if name not in EXCLUDED]


def _partitioners() -> Any:
    try:
        import flwr_datasets.partitioner as module
    except ImportError:
        raise ConfigError(f"partition.scheme: the flwr: schemes need flwr-datasets, the hf extra ({INSTALL})") from None
    return module


def partitioner_class(scheme: str) -> type:
    """flwr-datasets' class named by ``flwr:NAME``; a ConfigError listing the accepted names where there is none."""
    name = scheme[len(PREFIX) :]
    accepted = accepted_names()
    if name not in accepted:
        raise ConfigError(f"partition.scheme: unknown flwr-datasets partitioner {name!r}; accepted: {', '.join(PREFIX + n for n in accepted)}")
    return getattr(_partitioners(), name)


def partitioner_arguments(
    scheme: str, num_clients: int, seed: int, *, alpha: float, shards: int, window: int, kwargs: dict[str, Any], has_groups: bool | None = False
) -> dict[str, Any]:
    """The arguments the partitioner of ``scheme`` is built with: fedprior's fields where its constructor takes them, then ``kwargs``.

    ``has_groups``: whether the training set has natural owners (a ``group`` column); None: not known yet (the config check).
    """
    cls = partitioner_class(scheme)
    parameters = inspect.signature(cls).parameters
    for key in kwargs:
        if key in FIXED:
            raise ConfigError(f"partition.flwr_kwargs: {key!r} is set by {FIXED[key]}; remove it from flwr_kwargs")
        if key not in parameters:
            accepted = [p for p in parameters if p not in FIXED]
            raise ConfigError(f"partition.flwr_kwargs: {cls.__name__} takes no argument {key!r}; accepted: {', '.join(accepted) or 'none'}")
    fields = {
        "num_partitions": num_clients,
        "seed": seed,
        "alpha": alpha,
        "num_shards_per_partition": shards,
        "num_classes_per_partition": window,
        "partition_by": "group" if cls.__name__ in NATURAL else "label",
    }
    arguments = {key: value for key, value in fields.items() if key in parameters}
    arguments.update(kwargs)
    columns = ("label", "group") if has_groups in (True, None) else ("label",)
    if arguments.get("partition_by", "label") not in columns:
        why = (
            "the dataset has no natural owners (e.g. FEMNIST's writers)"
            if arguments.get("partition_by") == "group"
            else f"the columns are {', '.join(columns)}"
        )
        raise ConfigError(f"partition.flwr_kwargs: partition_by {arguments['partition_by']!r} names no column of the training set ({why})")
    try:
        inspect.signature(cls).bind(**arguments)
    except TypeError as error:
        raise ConfigError(f"partition.flwr_kwargs: {cls.__name__}: {error}") from None
    return arguments


class FlowerDatasetsPartitioner:
    """A fedprior :class:`~fedprior.partition.base.Partitioner` that asks flwr-datasets' partitioner ``scheme`` for the split.

    Built (and its arguments checked, by flwr-datasets' own constructor) when the config is checked,
    before any data loads; :meth:`split` runs it on the labels.
    """

    def __init__(
        self,
        scheme: str,
        num_clients: int,
        seed: int = 0,
        *,
        alpha: float = 0.5,
        shards: int = 2,
        window: int = 2,
        kwargs: dict[str, Any] | None = None,
        shuffle: bool = True,
        groups: np.ndarray | None = None,
        groups_known: bool = True,
    ) -> None:
        self.scheme, self.num_clients, self.seed, self.shuffle, self.groups = scheme, num_clients, seed, shuffle, groups
        self.cls = partitioner_class(scheme)
        self.arguments = partitioner_arguments(
            scheme,
            num_clients,
            seed,
            alpha=alpha,
            shards=shards,
            window=window,
            kwargs=dict(kwargs or {}),
            has_groups=(groups is not None) if groups_known else None,
        )
        self._build()  # its constructor's checks, now

    @classmethod
    def of_config(cls, config: Any, num_clients: int, seed: int, **groups: Any) -> FlowerDatasetsPartitioner:
        """The partitioner of a ``[partition]`` section whose scheme is ``flwr:NAME`` (its alpha, shards, window, flwr_kwargs and
        flwr_shuffle); ``groups`` / ``groups_known`` as the constructor takes them."""
        return cls(
            config.scheme,
            num_clients,
            seed,
            alpha=config.alpha,
            shards=config.shards,
            window=config.window,
            kwargs=config.flwr_kwargs,
            shuffle=config.flwr_shuffle,
            **groups,
        )

    def _build(self) -> Any:
        try:
            return self.cls(**self.arguments)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"partition.flwr_kwargs: {self.cls.__name__} refuses {self.arguments}: {error}") from None

    def split(self, labels: np.ndarray) -> list[np.ndarray]:
        """One sorted ``int64`` array of positions into ``labels`` per client, from flwr-datasets' partitions."""
        labels = np.asarray(labels)
        columns: dict[str, Any] = {"label": labels.astype(np.int64), INDEX: np.arange(labels.size, dtype=np.int64)}
        if self.groups is not None:
            columns["group"] = np.asarray(self.groups)
        partitioner = self._build()
        with hub_access(allowed=False, field="partition.scheme") as datasets:
            table = datasets.Dataset.from_dict(columns)
            if self.shuffle:
                table = table.shuffle(seed=self.seed)  # as FederatedDataset(shuffle=True, seed=...) does
            partitioner.dataset = table
            try:
                made = partitioner.num_partitions  # the natural-id partitioners count the owners here; Dirichlet draws here
                if made != self.num_clients:
                    raise ConfigError(f"federation.num_clients: {self.cls.__name__} makes {made} partitions of these data; set federation.num_clients = {made}")
                parts = [np.sort(np.asarray(partitioner.load_partition(c)[INDEX], dtype=np.int64)) for c in range(self.num_clients)]
            except (ValueError, KeyError, IndexError) as error:
                raise ConfigError(f"partition.scheme: {self.cls.__name__} {self.arguments} cannot split {labels.size} samples: {error}") from None
        return parts


def check_flwr_fields(config: Any, num_clients: int, seed: int) -> None:
    """At config time: ``partition.flwr_kwargs`` only with a ``flwr:`` scheme; with one, its partitioner is built (the name, the
    arguments and flwr-datasets' own checks of their values), so that a mistake is one line before any data loads."""
    if not is_flwr(config.scheme):
        if config.flwr_kwargs:
            raise ConfigError(f"partition.flwr_kwargs: applies to partition.scheme = 'flwr:NAME' only (it is {config.scheme!r}); remove it")
        return
    FlowerDatasetsPartitioner.of_config(config, num_clients, seed, groups_known=False)
