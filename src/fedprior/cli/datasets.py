"""``fedprior datasets``: every registered dataset, a line each, and whether it is here."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from fedprior.cli.app import app, user_errors
from fedprior.cli.console import make_console, print_table
from fedprior.errors import FedpriorError


def _locators() -> dict[str, Callable[[Path | None], Path]]:
    """Cheap existence checks (no decoding, no network) for the datasets that have one."""
    from fedprior.data import cifar, cinic, medmnist, svhn

    locators: dict[str, Callable[[Path | None], Path]] = {
        "cifar10": lambda root: cifar.locate_cifar(cifar.CIFAR10, root),
        "cifar100": lambda root: cifar.locate_cifar(cifar.CIFAR100, root),
        "cinic10": cinic.locate_cinic10,
        "svhn": svhn.locate_svhn,
    }
    for flag in medmnist.INFO:
        locators[flag] = functools.partial(medmnist.locate_medmnist, flag)
    return locators


def availability(name: str, root: Path | None) -> tuple[bool, str]:
    """Whether dataset ``name`` is found without downloading, and where (or why not) when that is known cheaply.

    Datasets without a cheap check are loaded once with ``download=False``, so damaged
    files show up as 'no' with the reason; built-in ones ignore ``root``.
    """
    from fedprior.data.registry import DATASETS

    spec = DATASETS[name]
    locate = _locators().get(name)
    if spec.generated:
        return True, "generated per client during a run"
    try:
        if locate is not None:
            return True, str(locate(root))
        spec.loader(None if spec.builtin else root, False)
        return True, "built in" if spec.builtin else ""
    except FedpriorError as error:
        return False, str(error) if root is not None else ""


@app.command()
@user_errors
def datasets(
    root: Path | None = typer.Option(None, "--root", help="Look only in this folder, as data.root does."),
) -> None:
    """List the registered datasets and whether each is available here (nothing is downloaded)."""
    from fedprior.data.registry import DATASETS

    root = root.expanduser() if root else None
    table = Table("dataset", "here", "description")
    for spec in DATASETS.values():
        found, where = availability(spec.name, root)
        description = spec.description + (f"\n[dim]{escape(where)}[/]" if where else "")
        table.add_row(spec.name, "[green]yes[/]" if found else "no", description)
    print_table(make_console(), table)
