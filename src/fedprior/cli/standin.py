"""``fedprior standin``: the locked-text stand-in's shipped towers: list them, rebuild and check them, refresh them.

``fedprior standin build`` retrains each shipped recipe from scratch (no cache, no shipped
weights) and compares the SHA-256 of the weights with the shipped one. Training is
deterministic on one machine kind (OS, architecture, torch build, CPU kernels), not
across kinds, so a mismatch on another kind is expected and harmless (runs there use the
shipped weights anyway); on the kind the towers were built on, it means the recipe, a
library or the data changed. ``--check`` makes any mismatch exit 1; ``--write`` replaces
the shipped files with the new build (from a source checkout).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import typer

from fedprior.cli.app import app, user_errors

if TYPE_CHECKING:
    from fedprior.encoders.shipped_towers import ShippedTower

standin = typer.Typer(help="The locked-text stand-in's shipped image towers: list, rebuild and check, refresh.", no_args_is_help=True)
app.add_typer(standin, name="standin")


@standin.command("list")
@user_errors
def list_towers() -> None:
    """The shipped towers: recipe, file size, weights SHA-256, the machine kind they were built on, and whether the file is intact."""
    from fedprior.encoders.locked_text import load_shipped_tower
    from fedprior.encoders.shipped_towers import RECIPES, build_machine, shipped_towers
    from fedprior.errors import FedpriorError

    towers = shipped_towers()
    typer.echo(f"this machine: {build_machine()}")
    for name, recipe in RECIPES.items():
        tower = towers.get(name)
        if tower is None:
            typer.echo(f"{name}: not shipped (build it with `fedprior standin build --recipe {name} --write`)")
            continue
        try:
            load_shipped_tower(tower)
            intact = "intact"
        except FedpriorError as error:
            intact = f"DAMAGED: {error}"
        settings = ", ".join(f"{k}={v}" for k, v in recipe.settings().items() if k != "name")
        typer.echo(
            f"{name}: {recipe.dataset}, {settings}; {tower.file} ({tower.bytes / 1e6:.2f} MB), "
            f"weights SHA-256 {tower.weights_sha256}, built on {tower.built_on}; {intact}"
        )


@standin.command()
@user_errors
def build(
    recipes: list[str] = typer.Option([], "--recipe", help="A shipped recipe (see `fedprior standin list`); repeatable. Default: all."),
    check: bool = typer.Option(False, "--check", help="Exit 1 unless every rebuilt tower equals the shipped one bit for bit."),
    write: bool = typer.Option(False, "--write", help="Replace the shipped tower files and their fingerprints with this build."),
) -> None:
    """Retrain the shipped recipes from scratch and compare the weights with the shipped fingerprints."""
    from fedprior.atomic import tensors_sha256
    from fedprior.data import load_dataset
    from fedprior.encoders import shipped_towers as shipped
    from fedprior.encoders.locked_text import RECIPE_VERSION, locked_text_fingerprint, resolved_recipe, save_tower, train_recipe
    from fedprior.errors import ConfigError, FedpriorError
    from fedprior.experiments.config import EncoderConfig

    if check and write:
        raise ConfigError("--check and --write exclude each other: check the shipped towers, or replace them")
    unknown = [name for name in recipes if name not in shipped.RECIPES]
    if unknown:
        raise ConfigError(f"--recipe: unknown recipe '{unknown[0]}'; accepted: {', '.join(shipped.RECIPES)}")
    kind = shipped.build_machine()
    typer.echo(f"this machine: {kind}")
    towers = shipped.shipped_towers()
    failures = []
    for name in recipes or list(shipped.RECIPES):
        recipe = shipped.RECIPES[name]
        config = EncoderConfig(**recipe.settings())
        data = load_dataset(recipe.dataset)
        fingerprint = locked_text_fingerprint(config, data)
        typer.echo(f"{name}: training the tower (recipe {config.recipe}) on {resolved_recipe(config).pretrain_images:,} {data.name} images...")
        start = time.perf_counter()
        tower = train_recipe(config, data)
        sha = tensors_sha256(tower.state_dict())
        typer.echo(f"{name}: built in {time.perf_counter() - start:.1f} s, recipe fingerprint {fingerprint}, weights SHA-256 {sha}")
        old = towers.get(name)
        verdict = _compare(old, fingerprint, sha, kind)
        typer.echo(f"{name}: {verdict}")
        if write:
            path = shipped.FOLDER / f"{name}.safetensors"
            try:
                save_tower(tower, path, fingerprint)
            except OSError as error:
                raise FedpriorError(
                    f"--write: cannot write {path} ({error.strerror or error}); refresh the towers from a source checkout (pip install -e .)"
                ) from None
            shipped.record(
                shipped.ShippedTower(
                    name=name,
                    file=path.name,
                    dataset=recipe.dataset,
                    settings=recipe.settings(),
                    image_shape=data.image_shape,
                    recipe_version=RECIPE_VERSION,
                    recipe_fingerprint=fingerprint,
                    weights_sha256=sha,
                    bytes=path.stat().st_size,
                    built_on=kind,
                )
            )
            typer.echo(f"{name}: wrote {path} ({path.stat().st_size / 1e6:.2f} MB) and its fingerprint in {shipped.MANIFEST}")
        elif old is None or old.recipe_fingerprint != fingerprint or old.weights_sha256 != sha:
            failures.append(name)
    if check and failures:
        typer.echo(f"check failed: {', '.join(failures)} (see above)", err=True)
        raise typer.Exit(1)


def _compare(old: ShippedTower | None, fingerprint: str, sha: str, kind: str) -> str:
    """One line: does this build reproduce the shipped tower, and what a difference means."""
    if old is None:
        return "not shipped yet (--write ships it)"
    if old.recipe_fingerprint != fingerprint:
        return (
            f"DIFFERENT RECIPE: the shipped tower was built from recipe fingerprint {old.recipe_fingerprint}, this one is "
            f"{fingerprint} (other dataset files, another text model, or a changed recipe); runs here train their own tower"
        )
    if old.weights_sha256 == sha:
        return f"matches the shipped weights bit for bit (built on {old.built_on})"
    if old.built_on != kind:
        return (
            f"DIFFERS from the shipped weights {old.weights_sha256[:16]}..., which were built on another machine kind "
            f"({old.built_on}); expected there: float kernels round differently, so training here gives another encoder. "
            "Runs here still use the shipped weights, which is why they ship"
        )
    return (
        f"DIFFERS from the shipped weights {old.weights_sha256[:16]}... on the machine kind they were built on: the recipe code, "
        "a library or the data changed, so the shipped towers no longer come from this code; find the change, or refresh them with --write"
    )
