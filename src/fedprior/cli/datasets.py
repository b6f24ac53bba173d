"""``fedprior datasets``: every registered dataset, a line each, and whether it is here; ``fedprior datasets export NAME FOLDER``
writes one as a Hugging Face dataset."""

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


datasets_app = typer.Typer(
    help="List the registered datasets and whether each is available here (nothing is downloaded); `fedprior datasets export NAME FOLDER` writes one as a Hugging Face dataset.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(datasets_app, name="datasets")


@datasets_app.callback()
@user_errors
def datasets(
    ctx: typer.Context,
    root: Path | None = typer.Option(None, "--root", help="Look only in this folder, as data.root does."),
) -> None:
    """List the registered datasets and whether each is available here (nothing is downloaded)."""
    if ctx.invoked_subcommand is not None:
        return
    from fedprior.data.registry import DATASETS

    root = root.expanduser() if root else None
    table = Table("dataset", "here", "description")
    for spec in DATASETS.values():
        found, where = availability(spec.name, root)
        description = spec.description + (f"\n[dim]{escape(where)}[/]" if where else "")
        table.add_row(spec.name, "[green]yes[/]" if found else "no", description)
    print_table(make_console(), table)


@datasets_app.command("export")
@user_errors
def export(
    name: str = typer.Argument(..., help="A shipped dataset (see `fedprior datasets`)."),
    folder: Path = typer.Argument(..., help="The folder to write (save_to_disk); it must not exist yet."),
    root: Path | None = typer.Option(None, "--root", help="Read the dataset's files from this folder only (data.root)."),
) -> None:
    """Write a shipped dataset as a Hugging Face dataset (train/test/validation splits, columns image and label with the class names);
    `--set data.dataset=hf:FOLDER` then runs on it, with the same numbers."""
    from fedprior.data.huggingface import export_hf, is_hf
    from fedprior.data.registry import DATASETS, load_dataset

    if is_hf(name) or name not in DATASETS or DATASETS[name].generated:
        shipped = [n for n, spec in DATASETS.items() if not spec.generated]
        raise FedpriorError(f"NAME: {name!r} is not a shipped dataset with files to export; accepted: {', '.join(shipped)}")
    folder = folder.expanduser()
    if folder.exists():
        raise FedpriorError(f"FOLDER: {folder} exists already; give a new folder")
    data = load_dataset(name, root)
    export_hf(data, folder)
    sizes = ", ".join(
        f"{split} {len(labels):,}"
        for split, labels in (("train", data.train_labels), ("test", data.test_labels), ("validation", data.val_labels))
        if labels is not None
    )
    typer.echo(f"{name} written to {folder} as a Hugging Face dataset ({sizes}); run on it with --set data.dataset=hf:{folder}")
