"""``fedprior encode``: fill the feature cache of a dataset under a frozen encoder, and say how fast it went."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

import typer

from fedprior.cli.app import app, user_errors

if TYPE_CHECKING:
    from pydantic import BaseModel

SPLITS = {"train": ("train",), "test": ("test",), "all": ("train", "test")}


def _sections(dataset: str, encoder: str, overrides: list[str], batch_size: int | None, weights: str | None):
    """(DataConfig, EncoderConfig) from the flags and ``--set encoder.key=value`` / ``data.key=value``."""
    from pydantic import ValidationError

    from fedprior.errors import ConfigError
    from fedprior.experiments.config import DataConfig, EncoderConfig, parse_override
    from fedprior.validation import describe_validation_error

    values: dict[str, dict] = {"data": {}, "encoder": {}}
    for text in overrides:
        (section, key), value = parse_override(text)
        if section not in values:
            raise ConfigError(f"--set {text!r}: fedprior encode takes encoder.KEY=VALUE and data.KEY=VALUE")
        values[section][key] = value
    values["data"]["dataset"] = dataset
    values["encoder"]["name"] = encoder
    if batch_size is not None:
        values["encoder"]["batch_size"] = batch_size
    if weights is not None:
        values["encoder"]["weights"] = weights
    out = []
    for section, model in (("data", DataConfig), ("encoder", EncoderConfig)):
        try:
            out.append(model(**values[section]))
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, (section,), functools.partial(_field_names, model))) from None
    return tuple(out)


def _field_names(model: type[BaseModel], _parent: tuple[str, ...]) -> list[str]:
    """The keys a config section accepts (its pydantic fields), for the error message."""
    return list(model.model_fields)


@app.command()
@user_errors
def encode(
    dataset: str = typer.Option(..., "--dataset", help="Dataset name (see `fedprior datasets`)."),
    encoder: str = typer.Option(..., "--encoder", help="locked-text, openclip:ARCH (e.g. openclip:RN50) or hf-clip:FOLDER."),
    split: str = typer.Option("all", "--split", help="train, test or all."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Images per forward pass (encoder.batch_size)."),
    weights: str | None = typer.Option(None, "--weights", help="openclip weights: a local file or a pretrained tag (encoder.weights)."),
    overrides: list[str] = typer.Option([], "--set", help="encoder.KEY=VALUE or data.KEY=VALUE (repeatable)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar on stderr."),
    device: str = typer.Option("auto", "--device", help="Where the encoder runs: auto, cpu, cuda, cuda:N (as run.device)."),
) -> None:
    """Encode a dataset with a frozen encoder into the feature cache (a later run reads it instead of encoding)."""
    from fedprior.data import load_dataset
    from fedprior.data.registry import check_dataset_name
    from fedprior.encoders.cache import load_or_encode
    from fedprior.encoders.registry import build_encoder, check_encoder_name
    from fedprior.errors import ConfigError
    from fedprior.runtime.device import resolve_device

    if split not in SPLITS:
        raise ConfigError(f"--split: unknown split '{split}'; accepted: {', '.join(SPLITS)}")
    data_config, encoder_config = _sections(dataset, encoder, overrides, batch_size, weights)
    check_dataset_name(data_config.dataset)
    check_encoder_name(encoder_config.name)
    where = resolve_device(device)
    data = load_dataset(
        data_config.dataset, data_config.root, data_config.download, data_config.image_column, data_config.label_column, data_config.group_column
    )
    start = time.perf_counter()
    model = build_encoder(encoder_config, data, where)
    weights = f", {model.weights} weights" if hasattr(model, "weights") else ""  # locked-text: shipped, cache or trained
    typer.echo(f"encoder {model.name}: dim {model.dim}, fingerprint {model.fingerprint}{weights}, ready in {time.perf_counter() - start:.1f} s")
    for name in SPLITS[split]:
        images, labels = getattr(data, f"{name}_images"), getattr(data, f"{name}_labels")
        result = load_or_encode(
            model,
            data.name,
            name,
            images,
            labels,
            batch_size=encoder_config.batch_size,
            use_cache=encoder_config.cache,
            progress=progress,
        )
        rate = len(images) / max(result.seconds, 1e-9)
        if result.hit:
            status = f"cache hit: {result.path}"
        elif result.path is not None:
            status = f"encoded, cached: {result.path}"
        else:
            status = "encoded, not cached (encoder.cache=false)"
        typer.echo(f"{data.name} {name}: {len(images):,} images, dim {result.features.shape[1]}, {result.seconds:.2f} s, {rate:,.0f} images/s, {status}")
