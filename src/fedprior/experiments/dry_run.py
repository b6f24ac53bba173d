"""``fedprior run --dry-run``: the clients' data a run of a config would get, described, with nothing trained or written.

The partition is the run's own (:func:`~fedprior.experiments.client_split.client_split`, on the
labels only): the same training images leave the pool (an encoder's pretraining split,
``data.train_subset``, a validation hold-out) and the same seed splits the rest. No encoder
is built and no feature is computed, so a dry run takes a second or two and works offline
wherever the dataset's files are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedprior.algorithms.registry import algorithm_spec
from fedprior.data import Dataset, load_dataset
from fedprior.encoders.registry import reserved_train_indices
from fedprior.errors import FedpriorError
from fedprior.experiments.client_split import ClientSplit, client_split, run_config
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.domains import with_domains
from fedprior.experiments.generated import DRY_RUN_CLIENTS, generated_statistics, is_generated, synthetic_federation
from fedprior.partition.statistics import class_counts, describe


def planned_split(config: ExperimentConfig) -> tuple[Dataset, np.ndarray, ClientSplit]:
    """The dataset, the training indices its encoder reserves, and the clients' split, exactly as a run of ``config`` gets them.

    The run's own path (:func:`~fedprior.experiments.client_split.client_split`) on the labels only:
    nothing is encoded or trained. ``fedprior run --dry-run`` and ``fedprior partition --preset`` use it.
    """
    dataset = with_domains(
        load_dataset(config.data.dataset, config.data.root, config.data.download, config.data.image_column, config.data.label_column, config.data.group_column),
        config.partition.domains,
        images=False,
    )
    reserved = reserved_train_indices(config.encoder, dataset)
    return dataset, reserved, client_split(config, dataset, reserved)


LEFT_OUT = {"reserved": "reserved for the encoder's pretraining", "subset_dropped": "left out by data.train_subset", "validation": "held out for validation"}
"""Why a training image is not in the clients' pool, by the key :func:`left_out` counts it under."""


def left_out(dataset: Dataset, reserved: np.ndarray, split: ClientSplit) -> dict[str, int]:
    """How many training images leave the pool, by :data:`LEFT_OUT`'s reasons (the encoder's, ``data.train_subset``'s, the validation hold-out's)."""
    held = 0 if split.held_out is None else int(split.held_out.size)
    return {
        "reserved": int(reserved.size),
        "subset_dropped": int(dataset.train_labels.size - reserved.size - held - split.pool.size),
        "validation": held,
    }


def left_out_text(counts: dict[str, int]) -> str:
    """:func:`left_out`'s non-zero counts in words, '; '-separated ('' when nothing leaves the pool)."""
    return "; ".join(f"{count:,} {LEFT_OUT[key]}" for key, count in counts.items() if count)


def needs_built_algorithm(config: ExperimentConfig) -> bool:
    """Whether :func:`check_built_algorithm` has something to check for ``config``: concurrent client updates,
    Power-of-Choice sampling or ``privacy.dp``, on pixels (with an encoder the task's input is its features, which
    neither a dry run nor a grid's planning computes)."""
    federation = run_config(config).federation  # a centralized baseline's one client takes 'uniform'
    asks = config.run.concurrent_clients > 1 or federation.sampler == "power-of-choice" or config.privacy.dp != "none" or config.system.partial_work
    return asks and config.encoder.name == "none"


def check_built_algorithm(config: ExperimentConfig, dataset: Dataset, which: str = "") -> None:
    """What the run refuses on the built algorithm, refused here as the run refuses it, the algorithm built on the run's
    task (``dataset``'s classes and image shape): ``run.concurrent_clients > 1`` for an algorithm whose client updates run
    one at a time (:func:`~fedprior.experiments.workers_setup.check_concurrent_updates`), ``federation.sampler =
    'power-of-choice'`` for one whose clients hold no labels to rank them by (:func:`~fedprior.runtime.clients.check_power_of_choice`),
    ``privacy.dp`` for one whose aggregate reads more than the mean of the replies (the run's own composition,
    :func:`~fedprior.privacy.wrap.with_privacy`: :mod:`fedprior.algorithms.pieces.private_aggregation`'s cause 3), and
    ``system.partial_work`` for one whose client updates take no step budget (:func:`~fedprior.runtime.system_round.check_partial_work`). On pixels
    only (:func:`needs_built_algorithm`). ``which`` starts the message (a grid's run). One torch thread: a grid's
    planning process may fork its runs afterwards."""
    if not needs_built_algorithm(config):
        return
    from fedprior.algorithms.base import Runtime
    from fedprior.data.standardize import PixelStandardizer
    from fedprior.experiments.client_side import with_misbehaving_clients
    from fedprior.experiments.workers_setup import check_concurrent_updates
    from fedprior.privacy.wrap import with_privacy
    from fedprior.runtime.clients import check_power_of_choice
    from fedprior.runtime.system_round import check_partial_work
    from fedprior.runtime.threads import torch_threads
    from fedprior.task import Task

    config = run_config(config)
    federation = config.federation
    standardizer = PixelStandardizer.fit(dataset.train_images)
    task = Task(
        num_classes=dataset.num_classes,
        input_shape=tuple(dataset.train_images.shape[1:]),
        class_names=dataset.class_names,
        num_clients=federation.num_clients,
        pixel_mean=standardizer.mean,
        pixel_std=standardizer.std,
    )
    try:
        with torch_threads(1):
            algorithm = algorithm_spec(config.algorithm.name).build(
                task, config.algorithm.hyperparameters(), Runtime(federation.local_epochs, federation.batch_size)
            )
            check_concurrent_updates(config, algorithm)
            if federation.sampler == "power-of-choice":
                check_power_of_choice(algorithm)
            if config.system.partial_work:
                check_partial_work(algorithm)
            if config.privacy.dp != "none":  # as the run composes it: the attackers' replies, then DP (its clients' side: nothing accounted)
                with_privacy(
                    with_misbehaving_clients(algorithm, config, task),
                    config.privacy,
                    federation.num_clients,
                    federation.fraction,
                    federation.sampler,
                    accounted=False,
                )
    except FedpriorError as error:  # the run's own line, led by the grid's run
        raise (type(error)(f"{which}{error}") if which else error) from None


def check_planned_algorithms(planned: list[tuple[ExperimentConfig, str]]) -> None:
    """:func:`check_built_algorithm` for each of a grid's planned configs that needs it (``(config, which)`` pairs), before
    any of them trains: each dataset is loaded once (the run's own loader, labels and images, nothing encoded)."""
    datasets: dict[tuple[str, str | None, bool, str | None, str | None, str | None], Dataset] = {}
    for config, which in planned:
        if not needs_built_algorithm(config):
            continue
        key = (config.data.dataset, config.data.root, config.data.download, config.data.image_column, config.data.label_column, config.data.group_column)
        if key not in datasets:
            datasets[key] = load_dataset(*key)
        check_built_algorithm(config, datasets[key], which)


def dry_run(config: ExperimentConfig) -> dict[str, Any]:
    """JSON-ready: the dataset's training images, those that leave the pool, and each role's partition statistics.

    Keys: ``dataset``, ``train_images``, ``reserved`` (an encoder's pretraining images),
    ``subset_dropped`` (left out by ``data.train_subset``), ``validation`` (held out for
    ``run.model_selection = 'validation'``), ``pool`` (the images the clients share),
    ``num_clients`` (1 for a centralized baseline), ``centralized``, and ``roles``:
    ``train``, or ``labeled`` and ``unlabeled``, and ``local_test`` (the clients' local test splits,
    ``partition.local_test_fraction``), each :func:`~fedprior.partition.statistics.describe`'s
    summary plus ``median_client_size`` and ``median_classes_per_client``.
    """
    from fedprior.experiments.build import check_planned

    check_planned(config)  # what the run refuses without data, refused before the data
    if is_generated(config):
        return generated_dry_run(config)
    dataset, reserved, split = planned_split(config)
    check_built_algorithm(config, dataset)
    labels = dataset.train_labels
    roles = {}
    local = {} if split.local_tests is None else {"local_test": split.local_tests}  # partition.local_test_fraction
    for role, parts in {**split.partition.roles, **local}.items():
        summary = describe(class_counts(labels, list(parts), dataset.num_classes), dataset.class_names)
        summary["median_client_size"] = float(np.median(summary["client_sizes"]))
        summary["median_classes_per_client"] = float(np.median(summary["classes_per_client"]))
        roles[role] = summary
    return {
        "dataset": dataset.name,
        "train_images": int(labels.size),
        **left_out(dataset, reserved, split),
        "pool": int(split.pool.size),
        "num_clients": split.config.federation.num_clients,
        "centralized": algorithm_spec(config.algorithm.name).centralized,
        "roles": roles,
    }


def generated_dry_run(config: ExperimentConfig) -> dict[str, Any]:
    """:func:`dry_run`'s answer for a federation generated per client (``data.dataset = 'synthetic'``): every client's size, and the
    class counts of the first :data:`~fedprior.experiments.generated.DRY_RUN_CLIENTS` (``classes_per_client``, the betas)."""
    summary = generated_statistics(synthetic_federation(config), clients=DRY_RUN_CLIENTS)
    summary["median_client_size"] = float(np.median(summary["client_sizes"]))
    summary["median_classes_per_client"] = float(np.median(summary["classes_per_client"]))
    return {
        "dataset": config.data.dataset,
        "train_images": summary["num_samples"],
        **dict.fromkeys(LEFT_OUT, 0),
        "pool": summary["num_samples"],
        "num_clients": config.federation.num_clients,
        "centralized": False,
        "roles": {"train": summary},
    }
