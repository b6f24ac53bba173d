"""Which training images the clients hold: the pool (subset, validation hold-out) and its partition (the ``[partition]`` section).

Only labels are read here, so ``fedprior run --dry-run`` uses it without encoding anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedprior.algorithms.base import Algorithm
from fedprior.algorithms.registry import algorithm_spec
from fedprior.data import Dataset
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.partition import Partition, make_partitioner
from fedprior.partition.checks import check_num_clients
from fedprior.partition.local_test import local_test_split
from fedprior.partition.subset import balanced_subset
from fedprior.seeding import numpy_rng

ROLE_FIELDS = {"train": ("x", "y"), "labeled": ("x_labeled", "y_labeled"), "unlabeled": ("x_unlabeled", "y_unlabeled")}


def build_partition(
    config: ExperimentConfig, labels: np.ndarray, pool: np.ndarray, groups: np.ndarray | None = None, domains: tuple[np.ndarray, int] | None = None
) -> Partition:
    """Split the training ``pool`` (indices into the training set) over ``federation.num_clients`` clients.

    With ``partition.num_labeled > 0`` the clients get a labeled and an unlabeled role
    (the FedDB paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning",
    Sec. 5.1, :class:`~fedprior.partition.labeled_split.LabeledSplitPartitioner`),
    otherwise one ``train`` role. ``groups`` (each training image's natural owner) serves the
    ``natural`` scheme. ``domains`` (each training image's domain, and how many there are; ``partition.domains``) makes a
    feature-shift federation: each client in one domain, the scheme splitting each domain's images over its clients
    (:func:`~fedprior.partition.domains.domain_partition`).
    """
    p, f = config.partition, config.federation
    check_num_clients(f.num_clients, pool.size)
    if p.scenario is not None:
        from fedprior.partition.scenarios import scenario

        named, num_classes = scenario(p.scenario), int(labels.max()) + 1
        if num_classes != named.num_classes:
            raise ConfigError(
                f"partition.scenario: {named.name} is defined on {named.num_classes} classes (the MFCL paper's {named.table}); "
                f"{config.data.dataset} has {num_classes}; use partition.scheme = 'window' with a window instead"
            )
    if domains is not None:
        from fedprior.partition.factory import domain_split

        image_domains, count = domains
        split = domain_split(p, labels[pool], image_domains[pool], count, f.num_clients, config.run.seed)
        return Partition({role: tuple(pool[part] for part in parts) for role, parts in split.roles.items()})
    owners = None if groups is None or p.num_labeled else groups[pool]
    split = make_partitioner(p, f.num_clients, config.run.seed, groups=owners).partition(labels[pool])
    return Partition({role: tuple(pool[part] for part in parts) for role, parts in split.roles.items()})


def check_inputs(algorithm: Algorithm, partition: Partition, config: ExperimentConfig) -> None:
    """Every data field the algorithm reads must come from a role of the partition; a ConfigError says which setting fits."""
    provided = {name for role in partition.roles for name in ROLE_FIELDS[role]}
    missing = [name for name in algorithm.inputs if name not in provided]
    if not missing:
        return
    if config.partition.num_labeled:
        raise ConfigError(
            f"partition.num_labeled: algorithm '{config.algorithm.name}' reads {', '.join(algorithm.inputs)}, which a "
            f"labeled/unlabeled split does not give; set partition.num_labeled = 0, or use a semi-supervised algorithm "
            f"(feddb, fixmatch, fedavg-labeled, fedmatch, fedrgd, semifl)"
        )
    raise ConfigError(
        f"partition.num_labeled: algorithm '{config.algorithm.name}' needs a labeled/unlabeled split "
        f"({', '.join(missing)}); set partition.num_labeled to the number of labeled images (e.g. 4000)"
    )


def subset_pool(pool: np.ndarray, labels: np.ndarray, size: int) -> np.ndarray:
    """``data.train_subset``: a class-balanced random subset of ``size`` pool indices (``size // classes`` per class,
    :func:`~fedprior.partition.subset.balanced_subset`), a fixed draw (seed 0) that is the same for every run seed,
    so runs with different seeds differ by their training only."""
    if size == 0:
        return pool
    if size > pool.size:
        raise ConfigError(f"data.train_subset: {size} is more than the {pool.size} training images available")
    return balanced_subset(labels, pool, size, seed=0)


def check_hold_out(labels: np.ndarray, fraction: float) -> None:
    """Refuse a ``data.validation_fraction`` that would hold out no image of some class of ``labels`` (the pool's).

    :func:`hold_out` takes ``round(fraction * n)`` images of a class of ``n``: a class that gives
    none leaves the validation split without it (or empty), and model selection cannot rank
    rounds on it. Raised before any training, naming the field and a fraction that works.
    """
    classes, counts = np.unique(labels, return_counts=True)
    held = np.array([int(round(fraction * n)) for n in counts], dtype=np.int64)
    if classes.size == 0 or held.min() > 0:
        return
    smallest = 1.0 / counts.min()
    scale = 10.0 ** (np.floor(np.log10(smallest)) - 1)
    enough = float(np.ceil(smallest / scale) * scale)  # two significant digits, rounded up
    missing = classes[held == 0]
    shown = ", ".join(str(c) for c in missing[:5]) + (", ..." if missing.size > 5 else "")
    what = f"holds out {held.sum()} images" + ("" if held.sum() == 0 else f", none of class {shown}")
    raise ConfigError(
        f"data.validation_fraction: {fraction:g} of the {labels.size} training images {what}; the validation split "
        f"(run.model_selection = 'validation') needs at least one per class ({classes.size}): use at least {enough:g}"
    )


def hold_out(pool: np.ndarray, labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest of the pool, validation indices): ``fraction`` of each class of the pool, drawn from ("validation",).

    A fraction that would leave some class out of the validation split is a :class:`ConfigError` (:func:`check_hold_out`).
    """
    check_hold_out(labels[pool], fraction)
    rng = numpy_rng(seed, "validation")
    chosen = [rng.permutation(members)[: int(round(fraction * members.size))] for members in (pool[labels[pool] == k] for k in np.unique(labels[pool]))]
    validation = np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
    return np.setdiff1d(pool, validation), validation


@dataclass(frozen=True)
class ClientSplit:
    """Which training images the clients hold: the pool, any validation hold-out, and the partition of the pool."""

    config: ExperimentConfig
    """The config as run: a centralized baseline's federation is one client, sampled every round (by the uniform sampler, whatever
    ``federation.sampler`` the config names: with one client every sampler chooses it)."""
    pool: np.ndarray
    """Training-set indices the clients hold between them (no encoder-reserved, subset-dropped or held-out image)."""
    held_out: np.ndarray | None
    """Training-set indices held out as the validation split (run.model_selection = 'validation' on a dataset without its own)."""
    partition: Partition
    local_tests: tuple[np.ndarray, ...] | None = None
    """Each client's local test split (training-set indices none of its training holds; ``partition.local_test_fraction > 0``)."""


def with_local_tests(config: ExperimentConfig, labels: np.ndarray, partition: Partition) -> tuple[Partition, tuple[np.ndarray, ...] | None]:
    """``partition.local_test_fraction`` of each client's ``train`` role held out as its local test split
    (:func:`~fedprior.partition.local_test.local_test_split`); (the partition, None) when it is 0."""
    fraction = config.partition.local_test_fraction
    if not fraction:
        return partition, None
    if "train" not in partition.roles:
        raise ConfigError(
            f"partition.local_test_fraction: {fraction:g} holds out part of each client's labeled data, which a labeled/unlabeled split "
            "(partition.num_labeled > 0) does not give; set partition.local_test_fraction = 0 or partition.num_labeled = 0"
        )
    train, tests = local_test_split(partition.roles["train"], labels, fraction, config.run.seed)
    return Partition({"train": train}), tests


def run_config(config: ExperimentConfig) -> ExperimentConfig:
    """The config as run (:attr:`ClientSplit.config`): a centralized baseline's federation is one client, sampled every round
    by the uniform sampler; any other config as it is."""
    if not algorithm_spec(config.algorithm.name).centralized:
        return config
    one = {"num_clients": 1, "fraction": 1.0, "sampler": "uniform", "power_of_choice_candidates": None}
    return config.model_copy(update={"federation": config.federation.model_copy(update=one)})


def client_split(config: ExperimentConfig, dataset: Dataset, reserved: np.ndarray) -> ClientSplit:
    """The pool of training images and its partition over the clients, as a run of ``config`` gets them.

    ``reserved``: training indices a frozen encoder was fitted on (never given to a client;
    :func:`fedprior.encoders.registry.reserved_train_indices`). Only labels are read, so
    ``fedprior run --dry-run`` calls this without encoding anything.
    """
    labels = dataset.train_labels
    pool = subset_pool(np.setdiff1d(np.arange(labels.size), reserved), labels, config.data.train_subset)
    held = None
    if config.run.model_selection == "validation" and dataset.val_images is None:
        pool, held = hold_out(pool, labels, config.data.validation_fraction, config.run.seed)
    if algorithm_spec(config.algorithm.name).centralized:
        config = run_config(config)
        if config.partition.local_test_fraction:
            raise ConfigError(
                f"partition.local_test_fraction: '{config.algorithm.name}' is a centralized baseline (one client holding every image), "
                "which has no clients' local test splits; set it to 0"
            )
        return ClientSplit(config, pool, held, Partition({"train": (pool,)}))
    if config.partition.domains and dataset.train_domains is None:
        raise ValueError("partition.domains is set but the dataset has no domains: pass it through experiments.domains.with_domains first")
    domains = (dataset.train_domains, len(dataset.domain_names)) if config.partition.domains and dataset.train_domains is not None else None
    partition, tests = with_local_tests(config, labels, build_partition(config, labels, pool, dataset.train_groups, domains))
    return ClientSplit(config, pool, held, partition, tests)
