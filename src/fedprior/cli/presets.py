"""``fedprior presets`` and ``fedprior algorithms``: what ships, a line each; ``fedprior presets show NAME``: one preset's TOML."""

from __future__ import annotations

import typer
from pydantic import BaseModel
from rich.markup import escape
from rich.table import Table

from fedprior.cli.app import ALGORITHM_HELP, IMPORT_HELP, app, import_first, user_errors
from fedprior.cli.console import make_console, print_table

presets_app = typer.Typer(
    help="List the shipped experiment presets (run one with `fedprior run NAME`); `fedprior presets show NAME` prints one's TOML.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(presets_app, name="presets")


@presets_app.callback()
@user_errors
def presets(
    ctx: typer.Context,
    fields: bool = typer.Option(False, "--fields", help="Also list every config field with its default and meaning."),
) -> None:
    """List the shipped experiment presets (run one with `fedprior run NAME`); `fedprior presets show NAME` prints one's TOML."""
    if ctx.invoked_subcommand is not None:
        return
    from fedprior.experiments.config import ExperimentConfig, list_presets

    console = make_console()
    for name, description in list_presets().items():
        console.print(f"[bold]{name:<22}[/] {escape(description)}", highlight=False)
    if fields:
        table = Table("field", "default", "meaning")
        for section, info in ExperimentConfig.model_fields.items():
            model = info.annotation
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                continue
            for key, field in model.model_fields.items():
                table.add_row(f"{section}.{key}", repr(field.default), field.description or "")
        print_table(console, table)


@presets_app.command("show")
@user_errors
def show(
    preset: str = typer.Argument(..., help="A preset name (see `fedprior presets`) or a path to a TOML config."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field: section.key=value (repeatable)."),
    imports: list[str] = typer.Option([], "--import", help=f"{IMPORT_HELP} Shown in run.imports where the config's algorithm is one of yours."),
    algorithm: str | None = typer.Option(None, "--algorithm", metavar="NAME", help=ALGORITHM_HELP),
) -> None:
    """Print a preset's config as TOML, every field with its value: saved to FILE.toml, `fedprior run FILE.toml` runs that very config."""
    from fedprior.algorithms.registry import hyperparameters_from_snapshot
    from fedprior.cli.dry_run import config_header
    from fedprior.experiments.config import load_config

    import_first(imports)
    with hyperparameters_from_snapshot():  # no torch: the shipped algorithms' fields come from their snapshot
        _, config = load_config(preset, set_, imports, algorithm)
    typer.echo(config.to_toml(header=config_header(preset, set_, imports, algorithm)), nl=False)


def named_algorithm(name: str, algorithm_spec):
    """The algorithm ``fedprior algorithms NAME`` shows; an unknown NAME is one line naming the accepted ones."""
    from fedprior.errors import ConfigError

    try:
        return algorithm_spec(name)
    except ConfigError as error:
        raise ConfigError(f"NAME: {str(error).removeprefix('algorithm.name: ')}") from None


@app.command()
@user_errors
def algorithms(
    name: str | None = typer.Argument(None, metavar="[NAME]", help="Show this algorithm alone (see `fedprior algorithms` for the names)."),
    imports: list[str] = typer.Option([], "--import", help=f"{IMPORT_HELP} Its algorithms are listed too."),
) -> None:
    """List the algorithms and their hyperparameters (the [algorithm] config keys): shipped, installed (entry points) and --import'ed; NAME: one of them."""
    import typing

    from fedprior.algorithms.registry import algorithm_spec, registered

    import_first(imports)
    console = make_console()
    for spec in registered().values() if name is None else [named_algorithm(name, algorithm_spec)]:
        console.print(f"[bold]{spec.name}[/]: {escape(spec.summary)}", highlight=False)
        for name, param in spec.hyperparameters().items():
            meta = [m for m in typing.get_args(param.annotation)[1:] if hasattr(m, "description")]
            help_text = meta[0].description if meta else ""
            console.print(f"    {name} = {escape(repr(param.default))}  {escape(help_text)}", highlight=False)
