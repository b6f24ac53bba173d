"""``fedprior partition``: split a dataset's training labels over clients and describe the result."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import typer

from fedprior.cli.app import app, user_errors
from fedprior.errors import ConfigError, FedpriorError

# The defaults of the matching config fields (tests/test_cli_partition.py checks they agree).
DEFAULT_DATASET = "fashion-mnist"
DEFAULT_CLIENTS = 100
DEFAULT_SHARDS = 2
DEFAULT_ALPHA = 0.5
DEFAULT_MIN_SIZE = 0
DEFAULT_WINDOW = 2

OPTION_OF_FIELD = {
    "data.dataset": "--dataset",
    "partition.scheme": "--scheme",
    "federation.num_clients": "--clients",
    "partition.shards": "--shards",
    "partition.alpha": "--alpha",
    "partition.min_size": "--min-size",
    "partition.window": "--window",
}

SPARK = "▁▂▃▄▅▆▇█"


def check_output_file(path: Path, option: str) -> None:
    """Refuse, before any work, an output file that is a folder or lies in a folder that cannot be written."""
    if path.is_dir():
        raise FedpriorError(f"{option}: {path} is a folder; give a file name such as {path / 'partition.png'}")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise FedpriorError(f"{option}: cannot write {path} ({parent} is not a writable folder)")


def _with_option(error: ConfigError) -> ConfigError:
    """The same message, led by the command-line option that sets the field it names."""
    message = str(error)
    field = message.split(":", 1)[0]
    if field in OPTION_OF_FIELD:
        return ConfigError(f"{OPTION_OF_FIELD[field]} ({field}){message[len(field):]}")
    return error


def _parameters(scheme: str, clients: int, seed: int, shards: int, alpha: float, min_size: int, window: int,
                balance: bool) -> dict:
    """The parameters that shape the partition of ``scheme`` (the rest are ignored by it)."""
    parameters: dict = {"num_clients": clients, "seed": seed}
    if scheme == "shard":
        parameters["shards"] = shards
    elif scheme == "dirichlet":
        parameters.update(alpha=alpha, min_size=min_size, balance=balance)
    elif scheme == "window":
        parameters["window"] = window
    return parameters


def _sparkline(row: np.ndarray) -> str:
    """One character per class: blank-ish dot for none, then eighths of the client's largest count."""
    top = max(int(row.max()), 1)
    return "".join("·" if value == 0 else SPARK[min(len(SPARK) - 1, int(np.ceil(8 * value / top)) - 1)] for value in row)


def _print_summary(dataset: str, scheme: str, parameters: dict, summary: dict, show: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = np.asarray(summary["class_counts"])
    names = summary.get("class_names") or [str(i) for i in range(summary["num_classes"])]
    shown = ", ".join(f"{key}={value}" for key, value in parameters.items())
    console.print(f"[bold]{dataset}[/], scheme [bold]{scheme}[/] ({shown})", highlight=False, soft_wrap=True)
    used, total = summary["num_samples"], summary["num_train_samples"]
    unused = f" ({total - used:,} of {total:,} unused)" if used < total else ""
    console.print(
        f"  {used:,} samples over {summary['num_clients']} clients, {summary['num_classes']} classes{unused}",
        highlight=False, soft_wrap=True,
    )
    per_client = np.asarray(summary["classes_per_client"])
    console.print(
        f"  client size       min {summary['min_client_size']}, mean {summary['mean_client_size']:.1f}, "
        f"max {summary['max_client_size']}" + (f"  ({summary['empty_clients']} empty)" if summary["empty_clients"] else ""),
        highlight=False, soft_wrap=True,
    )
    console.print(
        f"  classes/client    min {per_client.min()}, mean {per_client.mean():.2f}, max {per_client.max()}",
        highlight=False, soft_wrap=True,
    )
    if summary["beta_cib"] is not None:
        console.print(
            f"  beta_cib          {summary['beta_cib']:.3f} bits  (0 = class-balanced clients, "
            f"{np.log2(summary['num_classes']):.2f} = one class each)", highlight=False, soft_wrap=True,
        )
        console.print(
            f"  beta_hetero       {summary['beta_hetero']:.3f} bits  (mean KL between clients, 0 = identical)",
            highlight=False, soft_wrap=True,
        )
    if show <= 0:
        return
    table = Table("client", "size", "classes", "histogram", "largest classes", title=f"first {min(show, len(counts))} clients",
                  title_justify="left", box=None, pad_edge=False)
    for client, row in enumerate(counts[:show]):
        top = np.argsort(-row, kind="stable")[:3]
        largest = ", ".join(f"{names[c]}: {row[c]}" for c in top if row[c] > 0)
        histogram = _sparkline(row) if row.size <= 60 else ""
        table.add_row(str(client), str(int(row.sum())), str(int((row > 0).sum())), histogram, largest)
    console.print(table)


@app.command()
@user_errors
def partition(
    dataset: str = typer.Option(DEFAULT_DATASET, "--dataset", help="Dataset whose training split is partitioned (see data.dataset)."),
    scheme: str = typer.Option("iid", "--scheme", help="iid, shard, dirichlet or window (partition.scheme)."),
    clients: int = typer.Option(DEFAULT_CLIENTS, "--clients", help="Number of clients (federation.num_clients)."),
    shards: int = typer.Option(DEFAULT_SHARDS, "--shards", help="scheme=shard: shards per client (partition.shards)."),
    alpha: float = typer.Option(DEFAULT_ALPHA, "--alpha", help="scheme=dirichlet: concentration; smaller is more skewed (partition.alpha)."),
    window: int = typer.Option(DEFAULT_WINDOW, "--window", help="scheme=window: classes per client (partition.window)."),
    min_size: int = typer.Option(DEFAULT_MIN_SIZE, "--min-size", help="scheme=dirichlet: redraw until every client holds this many samples (partition.min_size)."),
    balance: bool = typer.Option(False, "--balance", help="scheme=dirichlet: the FedDB code's variant (full clients get no more classes)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the partition (run.seed)."),
    root: str | None = typer.Option(None, "--root", help="Folder holding the dataset's files (data.root)."),
    download: bool = typer.Option(False, "--download", help="Allow downloading a missing dataset (data.download)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (statistics, counts, parameters) instead of the summary."),
    plot: Path | None = typer.Option(None, "--plot", help="Also write a clients x classes heatmap PNG to this file."),
    show: int = typer.Option(5, "--show", help="Clients whose class histogram the summary shows."),
) -> None:
    """Partition a dataset's training labels over clients; print sizes, classes per client, beta_cib and beta_hetero."""
    from fedprior.data import load_dataset
    from fedprior.partition.factory import make_partitioner
    from fedprior.partition.statistics import class_counts, describe

    if plot is not None:
        check_output_file(plot, "--plot")
    try:
        partitioner = make_partitioner(scheme, clients, seed, shards=shards, alpha=alpha, min_size=min_size,
                                       window=window, balance=balance)
        data = load_dataset(dataset, root, download)
        labels = data.train_labels
        parts = partitioner.split(labels)
    except ConfigError as error:
        raise _with_option(error) from None
    counts = class_counts(labels, parts, data.num_classes)
    summary = {**describe(counts, data.class_names), "num_train_samples": int(labels.size)}
    parameters = _parameters(scheme, clients, seed, shards, alpha, min_size, window, balance)
    if plot is not None:
        from fedprior.partition.plot import plot_heatmap

        shown = ", ".join(f"{key}={value}" for key, value in parameters.items() if key != "num_clients")
        try:
            plot_heatmap(counts, plot, class_names=data.class_names, title=f"{dataset}, {scheme} ({shown})")
        except OSError as error:
            raise FedpriorError(f"--plot: cannot write {plot} ({error.strerror or error})") from None
    if as_json:
        record = {"dataset": dataset, "scheme": scheme, "parameters": parameters, **summary}
        if plot is not None:
            record["plot"] = str(plot)
        typer.echo(json.dumps(record))
        return
    _print_summary(dataset, scheme, parameters, summary, show)
    if plot is not None:
        typer.echo(f"heatmap written to {plot}")
