"""From a checked config to everything a run needs: data, partition, task, algorithm."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import Algorithm, ClientData, Task
from fedprior.algorithms.registry import algorithm_spec
from fedprior.data import Dataset, load_dataset
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.partition import Partition, make_partitioner
from fedprior.partition.checks import check_num_clients
from fedprior.partition.subset import balanced_subset

ROLE_FIELDS = {"train": ("x", "y"), "labeled": ("x_labeled", "y_labeled"), "unlabeled": ("x_unlabeled", "y_unlabeled")}


@dataclass
class Experiment:
    """A run's inputs: the config, the training/test tensors, the partition, the task and the algorithm."""

    name: str
    config: ExperimentConfig
    dataset: Dataset
    train: dict[str, torch.Tensor]
    test: dict[str, torch.Tensor]
    pool: np.ndarray
    partition: Partition
    task: Task
    algorithm: Algorithm
    encoder_name: str = "none"

    def client_data(self, client_id: int) -> ClientData:
        """Client ``client_id``'s data: only the fields the algorithm reads (no labels for unsupervised ones)."""
        out: ClientData = {}
        for role, indices in self.partition.client(client_id).items():
            for field, source in zip(ROLE_FIELDS[role], ("x", "y")):
                if field in self.algorithm.inputs:
                    out[field] = self.train[source][torch.from_numpy(indices)]
        return out


def pixels(images: np.ndarray, mean: np.ndarray, std: np.ndarray) -> torch.Tensor:
    """uint8 (N, C, H, W) -> float32 standardized per channel with the training set's mean and std."""
    x = torch.from_numpy(images).float().div_(255.0)
    return (x - torch.from_numpy(mean).view(1, -1, 1, 1)) / torch.from_numpy(std).view(1, -1, 1, 1)


def pixel_inputs(dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Standardized train and test pixels, and the channel statistics used (``pixel_mean``, ``pixel_std``).

    The statistics go into the Task's prior: augmentations that work on [0, 1] images
    (SimCLR's colour jitter) and MFCL's binary cross-entropy undo the standardization.
    """
    scaled = dataset.train_images.astype(np.float32) / 255.0
    mean = scaled.mean(axis=(0, 2, 3)).astype(np.float32)
    std = (scaled.std(axis=(0, 2, 3)) + 1e-6).astype(np.float32)
    stats = {"pixel_mean": torch.from_numpy(mean), "pixel_std": torch.from_numpy(std)}
    return pixels(dataset.train_images, mean, std), pixels(dataset.test_images, mean, std), stats


def build_partition(config: ExperimentConfig, labels: np.ndarray, pool: np.ndarray) -> Partition:
    """Split the training ``pool`` (indices into the training set) over ``federation.num_clients`` clients."""
    p, f = config.partition, config.federation
    check_num_clients(f.num_clients, pool.size)
    if p.scenario is not None:
        from fedprior.partition.scenarios import scenario

        named, num_classes = scenario(p.scenario), int(labels.max()) + 1
        if num_classes != named.num_classes:
            raise ConfigError(f"partition.scenario: {named.name} is defined on {named.num_classes} classes (mfcl.md {named.table}); "
                              f"{config.data.dataset} has {num_classes}; use partition.scheme = 'window' with a window instead")
    partitioner = make_partitioner(
        p.scheme, f.num_clients, config.run.seed, shards=p.shards, alpha=p.alpha, min_size=p.min_size, window=p.window
    )
    parts = partitioner.split(labels[pool])
    return Partition({"train": tuple(pool[part] for part in parts)})


@dataclass
class Inputs:
    """What the clients train on: pixels or frozen-encoder features, plus prior knowledge and reserved indices."""

    train_x: torch.Tensor
    test_x: torch.Tensor
    prior: dict[str, torch.Tensor]
    reserved: np.ndarray
    encoder_name: str = "none"


def encoded_inputs(config: ExperimentConfig, dataset: Dataset) -> Inputs:
    """Features of a frozen encoder (cached on disk), L2-normalized if encoder.normalize, and the class text features."""
    from fedprior.encoders.registry import build_encoder, class_text_features, encode_dataset

    settings = config.encoder
    encoder = build_encoder(settings, dataset)
    train_x = encode_dataset(encoder, dataset, "train", settings)
    test_x = encode_dataset(encoder, dataset, "test", settings)
    prior = {}
    if hasattr(encoder, "encode_texts"):
        prior["text_features"] = class_text_features(encoder, dataset.class_names, settings.prompt)
    if settings.normalize:
        train_x, test_x = F.normalize(train_x, dim=1), F.normalize(test_x, dim=1)
        prior = {k: F.normalize(v, dim=1) for k, v in prior.items()}
    reserved = np.asarray(getattr(encoder, "reserved_train_indices", np.zeros(0, dtype=np.int64)), dtype=np.int64)
    return Inputs(train_x, test_x, prior, reserved, settings.name)


def model_inputs(config: ExperimentConfig, dataset: Dataset) -> Inputs:
    if config.encoder.name != "none":
        return encoded_inputs(config, dataset)
    train_x, test_x, stats = pixel_inputs(dataset)
    return Inputs(train_x, test_x, stats, np.zeros(0, dtype=np.int64))


_PREPARED: dict[str, tuple[Dataset, Inputs]] = {}


def prepared_data(config: ExperimentConfig) -> tuple[Dataset, Inputs]:
    """The dataset and its model inputs, kept in memory for the last data+encoder setting.

    A table or a test runs many experiments on the same data: they load and encode once.
    """
    key = json.dumps([config.data.model_dump(), config.encoder.model_dump()], sort_keys=True)
    if key not in _PREPARED:
        _PREPARED.clear()
        dataset = load_dataset(config.data.dataset, config.data.root, config.data.download)
        _PREPARED[key] = (dataset, model_inputs(config, dataset))
    return _PREPARED[key]


def build_experiment(name: str, config: ExperimentConfig) -> Experiment:
    """Load the data, encode it if an encoder is set, partition it and build the algorithm.

    Training images an encoder was fitted on (the locked-text stand-in's pretraining
    split) are removed from the pool before partitioning, so no client ever holds them.
    A centralized baseline gets one client holding the whole pool.
    """
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    spec = algorithm_spec(config.algorithm.name)
    dataset, inputs = prepared_data(config)
    train_x, test_x = inputs.train_x, inputs.test_x
    pool = np.setdiff1d(np.arange(dataset.train_labels.size), inputs.reserved)
    if config.data.train_subset:
        pool = balanced_subset(dataset.train_labels, pool, config.data.train_subset, config.run.seed)
    if spec.centralized:
        config = config.model_copy(update={"federation": config.federation.model_copy(update={"num_clients": 1, "fraction": 1.0})})
        partition = Partition({"train": (pool,)})
    else:
        partition = build_partition(config, dataset.train_labels, pool)
    task = Task(
        num_classes=dataset.num_classes,
        input_shape=tuple(train_x.shape[1:]),
        class_names=dataset.class_names,
        num_clients=config.federation.num_clients,
        prior=inputs.prior,
    )
    algorithm = spec.build(
        task, config.algorithm.hyperparameters(),
        local_epochs=config.federation.local_epochs, batch_size=config.federation.batch_size, device=torch.device("cpu"),
    )
    return Experiment(
        name=name,
        config=config,
        dataset=dataset,
        train={"x": train_x, "y": torch.from_numpy(dataset.train_labels)},
        test={"x": test_x, "y": torch.from_numpy(dataset.test_labels)},
        pool=pool,
        partition=partition,
        task=task,
        algorithm=algorithm,
        encoder_name=inputs.encoder_name,
    )
