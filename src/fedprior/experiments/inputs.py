"""What the models read: the dataset loaded once, its pixels standardised or its frozen-encoder features (cached on disk), and the in-memory cache of the last setting."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedprior.data import Dataset, load_dataset
from fedprior.data.standardize import PixelStandardizer
from fedprior.experiments.client_split import check_hold_out
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.domains import with_domains


@dataclass
class Inputs:
    """What the clients train on: pixels or frozen-encoder features, plus prior knowledge and reserved indices."""

    train_x: torch.Tensor
    test_x: torch.Tensor
    prior: dict[str, torch.Tensor]
    reserved: np.ndarray
    encoder_name: str = "none"
    pixel_mean: tuple[float, ...] = ()
    pixel_std: tuple[float, ...] = ()
    val_x: torch.Tensor | None = None
    """The dataset's own validation split, where it has one."""


def encoded_inputs(config: ExperimentConfig, dataset: Dataset, device: torch.device) -> Inputs:
    """Features of a frozen encoder (cached on disk), L2-normalized if encoder.normalize, and the class text features."""
    from fedprior.encoders.registry import build_encoder, class_text_features, encode_dataset

    settings = config.encoder
    encoder = build_encoder(settings, dataset, device)
    train_x = encode_dataset(encoder, dataset, "train", settings)
    test_x = encode_dataset(encoder, dataset, "test", settings)
    val_x = encode_dataset(encoder, dataset, "val", settings) if dataset.val_images is not None else None
    prior = {}
    if hasattr(encoder, "encode_texts"):
        prior["text_features"] = class_text_features(encoder, dataset.class_names, settings.prompt)
    if settings.normalize:
        train_x, test_x = F.normalize(train_x, dim=1), F.normalize(test_x, dim=1)
        val_x = None if val_x is None else F.normalize(val_x, dim=1)
        prior = {k: F.normalize(v, dim=1) for k, v in prior.items()}
    reserved = np.asarray(getattr(encoder, "reserved_train_indices", np.zeros(0, dtype=np.int64)), dtype=np.int64)
    return Inputs(train_x, test_x, prior, reserved, settings.name, val_x=val_x)


def model_inputs(config: ExperimentConfig, dataset: Dataset, device: torch.device) -> Inputs:
    if config.encoder.name != "none":
        return encoded_inputs(config, dataset, device)
    standardizer = PixelStandardizer.fit(dataset.train_images)
    train_x, test_x = standardizer.pixels(dataset.train_images), standardizer.pixels(dataset.test_images)
    val_x = standardizer.pixels(dataset.val_images) if dataset.val_images is not None else None
    return Inputs(train_x, test_x, {}, np.zeros(0, dtype=np.int64), pixel_mean=standardizer.mean, pixel_std=standardizer.std, val_x=val_x)


_PREPARED: dict[str, tuple[Dataset, Inputs]] = {}


def prepared_data(config: ExperimentConfig, device: torch.device = torch.device("cpu")) -> tuple[Dataset, Inputs]:
    """The dataset and its model inputs (the encoder runs on ``device``), kept in memory for the last data+encoder setting.

    A table or a test runs many experiments on the same data: they load and encode once.
    """
    key = json.dumps([config.data.model_dump(), config.encoder.model_dump(), device.type, config.partition.domains], sort_keys=True)
    if key not in _PREPARED:
        _PREPARED.clear()
        dataset = with_domains(
            load_dataset(
                config.data.dataset, config.data.root, config.data.download, config.data.image_column, config.data.label_column, config.data.group_column
            ),
            config.partition.domains,
        )
        if config.encoder.name != "none" and config.run.model_selection == "validation" and dataset.val_images is None:
            check_hold_out(dataset.train_labels, config.data.validation_fraction)  # before encoding; hold_out checks the pool
        _PREPARED[key] = (dataset, model_inputs(config, dataset, device))
    return _PREPARED[key]
