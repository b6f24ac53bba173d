"""``fedprior presets`` and ``fedprior algorithms``: what ships, a line each."""

from __future__ import annotations

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from fedprior.cli.app import app, user_errors


@app.command()
@user_errors
def presets(fields: bool = typer.Option(False, "--fields", help="Also list every config field with its default and meaning.")) -> None:
    """List the shipped experiment presets (run one with `fedprior run NAME`)."""
    from fedprior.experiments.config import ExperimentConfig, list_presets

    console = Console()
    for name, description in list_presets().items():
        console.print(f"[bold]{name:<22}[/] {description}", highlight=False)
    if fields:
        table = Table("field", "default", "meaning")
        for section, info in ExperimentConfig.model_fields.items():
            model = info.annotation
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                continue
            for key, field in model.model_fields.items():
                table.add_row(f"{section}.{key}", repr(field.default), field.description or "")
        console.print(table)


@app.command()
@user_errors
def algorithms() -> None:
    """List the algorithms and their hyperparameters (the [algorithm] config keys)."""
    import typing

    from fedprior.algorithms.registry import ALGORITHMS

    console = Console()
    for spec in ALGORITHMS.values():
        console.print(f"[bold]{spec.name}[/]: {spec.summary}", highlight=False)
        for name, param in spec.hyperparameters().items():
            meta = [m for m in typing.get_args(param.annotation)[1:] if hasattr(m, "description")]
            help_text = meta[0].description if meta else ""
            console.print(f"    {name} = {param.default!r}  {help_text}", highlight=False)
