"""``fedprior partition``: split a dataset's training labels over clients and describe the result."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import typer

from fedprior.cli.app import app, user_errors
from fedprior.errors import ConfigError, FedpriorError
from fedprior.partition.config import PartitionConfig

# The defaults of the matching config fields (tests/cli/test_partition.py checks they agree).
DEFAULT_DATASET = "fashion-mnist"
DEFAULT_CLIENTS = 100
DEFAULT_SHARDS = 2
DEFAULT_ALPHA = 0.5
DEFAULT_MIN_SIZE = 0
DEFAULT_WINDOW = 2
DEFAULT_SIZES = "power-law"
DEFAULT_SIZE_RATIO = 10.0
DEFAULT_LABELED = 0
DEFAULT_UNLABELED = 0

OPTION_OF_FIELD = {
    "data.dataset": "--dataset",
    "partition.scheme": "--scheme",
    "federation.num_clients": "--clients",
    "partition.shards": "--shards",
    "partition.alpha": "--alpha",
    "partition.min_size": "--min-size",
    "partition.window": "--window",
    "partition.sizes": "--sizes",
    "partition.size_ratio": "--size-ratio",
    "partition.num_labeled": "--labeled",
    "partition.num_unlabeled": "--unlabeled",
    "partition.flwr_kwargs": "--flwr-kwargs",
}

SPARK = "▁▂▃▄▅▆▇█"


def check_output_file(path: Path, option: str, example: str = "partition.png") -> None:
    """Refuse, before any work, an output file that is a folder or lies in a folder that cannot be written."""
    if path.is_dir():
        raise FedpriorError(f"{option}: {path} is a folder; give a file name such as {path / example}")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise FedpriorError(f"{option}: cannot write {path} ({parent} is not a writable folder)")


def _with_option(error: ConfigError) -> ConfigError:
    """The same message, led by the command-line option that sets the field it names."""
    message = str(error)
    field = message.split(":", 1)[0]
    if field in OPTION_OF_FIELD:
        return ConfigError(f"{OPTION_OF_FIELD[field]} ({field}){message[len(field) :]}")
    return error


def scheme_parameters(config: PartitionConfig, clients: int, seed: int) -> dict:
    """The parameters that shape the partition of ``config.scheme`` (the rest are ignored by it)."""
    return {"num_clients": clients, "seed": seed, **config.scheme_parameters()}


def _sparkline(row: np.ndarray) -> str:
    """One character per class: blank-ish dot for none, then eighths of the client's largest count."""
    top = max(int(row.max()), 1)
    return "".join("·" if value == 0 else SPARK[min(len(SPARK) - 1, int(np.ceil(8 * value / top)) - 1)] for value in row)


def _print_summary(dataset: str, scheme: str, parameters: dict, summary: dict, show: int, role: str = "") -> None:
    from rich.table import Table

    from fedprior.cli.console import make_console, print_table

    console = make_console()
    counts = np.asarray(summary["class_counts"])
    names = summary.get("class_names") or [str(i) for i in range(summary["num_classes"])]
    shown = ", ".join(f"{key}={value}" for key, value in parameters.items())
    heading = f"{role} set of " if role else ""
    console.print(f"{heading}[bold]{dataset}[/], scheme [bold]{scheme}[/] ({shown})", highlight=False, soft_wrap=True)
    used, total = summary["num_samples"], summary["num_train_samples"]
    unused = f" ({total - used:,} of {total:,} unused)" if used < total and role != "labeled" else ""
    console.print(
        f"  {used:,} samples over {summary['num_clients']} clients, {summary['num_classes']} classes{unused}",
        highlight=False,
        soft_wrap=True,
    )
    per_client = np.asarray(summary["classes_per_client"])
    console.print(
        f"  client size       min {summary['min_client_size']}, mean {summary['mean_client_size']:.1f}, "
        f"max {summary['max_client_size']}" + (f"  ({summary['empty_clients']} empty)" if summary["empty_clients"] else ""),
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"  classes/client    min {per_client.min()}, mean {per_client.mean():.2f}, max {per_client.max()}",
        highlight=False,
        soft_wrap=True,
    )
    if summary["beta_cib"] is not None:
        console.print(
            f"  beta_cib          {summary['beta_cib']:.3f} bits  (0 = class-balanced clients, {np.log2(summary['num_classes']):.2f} = one class each)",
            highlight=False,
            soft_wrap=True,
        )
        console.print(
            f"  beta_hetero       {summary['beta_hetero']:.3f} bits  (mean KL between clients, 0 = identical)",
            highlight=False,
            soft_wrap=True,
        )
    if show <= 0:
        return
    table = Table(
        "client",
        "size",
        "classes",
        "histogram",
        "largest classes",
        title=f"first {min(show, len(counts))} clients",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    for client, row in enumerate(counts[:show]):
        top = np.argsort(-row, kind="stable")[:3]
        largest = ", ".join(f"{names[c]}: {row[c]}" for c in top if row[c] > 0)
        histogram = _sparkline(row) if row.size <= 60 else ""
        table.add_row(str(client), str(int(row.sum())), str(int((row > 0).sum())), histogram, largest)
    print_table(console, table)


def _inline_table(text: str) -> dict[str, Any]:
    """``--flwr-kwargs``: a TOML inline table such as ``{min_partition_size = 0, self_balancing = true}``."""
    import tomllib

    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--flwr-kwargs (partition.flwr_kwargs): not a TOML inline table ({error}); e.g. '{{min_partition_size = 0}}'") from None
    if not isinstance(value, dict):
        raise ConfigError(f"--flwr-kwargs (partition.flwr_kwargs): not a TOML inline table (got {text!r}); e.g. '{{min_partition_size = 0}}'")
    return value


# The options that shape the partition; with --preset the preset's fields do, changed with --set.
SHAPING_OPTIONS = {
    "dataset": "data.dataset",
    "scheme": "partition.scheme",
    "clients": "federation.num_clients",
    "shards": "partition.shards",
    "alpha": "partition.alpha",
    "window": "partition.window",
    "sizes": "partition.sizes",
    "size_ratio": "partition.size_ratio",
    "min_size": "partition.min_size",
    "balance": "partition.balance",
    "labeled": "partition.num_labeled",
    "unlabeled": "partition.num_unlabeled",
    "labeled_in_unlabeled": "partition.labeled_in_unlabeled",
    "flwr_kwargs": "partition.flwr_kwargs",
    "flwr_shuffle": "partition.flwr_shuffle",
    "seed": "run.seed",
    "root": "data.root",
    "download": "data.download",
}


def _given_with_preset(ctx: typer.Context) -> None:
    """Refuse a partition-shaping option beside --preset: the preset's config decides, ``--set`` changes it."""
    from click.core import ParameterSource

    for name, field in SHAPING_OPTIONS.items():
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            option = next(p.opts[0] for p in ctx.command.params if p.name == name)
            raise ConfigError(f"{option}: with --preset the preset's config shapes the split; change it with --set {field}=VALUE")


def _preset_split(preset: str, overrides: list[str]) -> dict[str, Any]:
    """The clients' split of ``preset`` (with ``overrides``) exactly as its run gets it (:func:`fedprior.experiments.dry_run.planned_split`)."""
    from fedprior.algorithms.registry import algorithm_spec
    from fedprior.experiments.config import load_config
    from fedprior.experiments.dry_run import left_out, planned_split

    name, config = load_config(preset, overrides)
    data, reserved, split = planned_split(config)
    p, run_config = config.partition, split.config
    parameters = scheme_parameters(p, run_config.federation.num_clients, config.run.seed)
    if p.num_labeled:
        parameters.update(num_labeled=p.num_labeled, num_unlabeled=p.num_unlabeled, labeled_in_unlabeled=p.labeled_in_unlabeled)
    return {
        "name": name,
        "data": data,
        "scheme": "one client (centralized baseline)" if algorithm_spec(config.algorithm.name).centralized else p.scheme,
        "parameters": parameters,
        "roles": {("" if role == "train" else role): list(parts) for role, parts in split.partition.roles.items()},
        "left_out": left_out(data, reserved, split),
        "pool": int(split.pool.size),
        "domains": p.domains,
    }


def _preset_line(preset: dict[str, Any], overrides: list[str]) -> str:
    """Where the preset's clients' images come from: the training set less what its run leaves out."""
    from fedprior.experiments.dry_run import left_out_text

    left = left_out_text(preset["left_out"])
    sets = "".join(f" --set {o}" for o in overrides)
    total = int(preset["data"].train_labels.size)
    return (
        f"preset {preset['name']}{sets}: the split its run trains on; {total:,} training images"
        + (f" ({left})" if left else "")
        + f", the clients draw on {preset['pool']:,}"
    )


@app.command()
@user_errors
def partition(
    ctx: typer.Context,
    dataset: str = typer.Option(DEFAULT_DATASET, "--dataset", help="Dataset whose training split is partitioned (see data.dataset)."),
    scheme: str = typer.Option(
        "iid",
        "--scheme",
        help="iid, shard, dirichlet, window, quantity, or flwr:NAME, flwr-datasets' partitioner NAME, e.g. flwr:DirichletPartitioner (partition.scheme).",
    ),
    clients: int = typer.Option(DEFAULT_CLIENTS, "--clients", help="Number of clients (federation.num_clients)."),
    shards: int = typer.Option(DEFAULT_SHARDS, "--shards", help="scheme=shard: shards per client (partition.shards)."),
    alpha: float = typer.Option(DEFAULT_ALPHA, "--alpha", help="scheme=dirichlet: concentration; smaller is more skewed (partition.alpha)."),
    window: int = typer.Option(DEFAULT_WINDOW, "--window", help="scheme=window: classes per client (partition.window)."),
    sizes: str = typer.Option(
        DEFAULT_SIZES, "--sizes", help="scheme=quantity: client sizes linear, exponential or power-law in the client id (partition.sizes)."
    ),
    size_ratio: float = typer.Option(DEFAULT_SIZE_RATIO, "--size-ratio", help="scheme=quantity: the largest client over the smallest (partition.size_ratio)."),
    min_size: int = typer.Option(
        DEFAULT_MIN_SIZE, "--min-size", help="scheme=dirichlet: redraw until every client holds this many samples (partition.min_size)."
    ),
    balance: bool = typer.Option(False, "--balance", help="scheme=dirichlet: the FedDB code's variant (full clients get no more classes)."),
    labeled: int = typer.Option(
        DEFAULT_LABELED,
        "--labeled",
        help="Semi-supervised split: this many class-balanced labeled images, labeled and unlabeled sets partitioned separately (partition.num_labeled; 0 = no split).",
    ),
    unlabeled: int = typer.Option(
        DEFAULT_UNLABELED, "--unlabeled", help="With --labeled: keep this many other images as the unlabeled set (partition.num_unlabeled; 0 = all)."
    ),
    labeled_in_unlabeled: bool = typer.Option(
        True,
        "--labeled-in-unlabeled/--labeled-apart",
        help="With --labeled: each client's unlabeled pool also holds its labeled images without labels (partition.labeled_in_unlabeled).",
    ),
    flwr_kwargs: str = typer.Option(
        "{}",
        "--flwr-kwargs",
        help="scheme=flwr:NAME: the partitioner's other arguments as a TOML inline table, e.g. '{min_partition_size = 0}' (partition.flwr_kwargs).",
    ),
    flwr_shuffle: bool = typer.Option(
        True,
        "--flwr-shuffle/--flwr-unshuffled",
        help="scheme=flwr:NAME: shuffle the rows with the seed first, as FederatedDataset does (partition.flwr_shuffle).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the partition (run.seed)."),
    root: str | None = typer.Option(None, "--root", help="Folder holding the dataset's files (data.root)."),
    download: bool = typer.Option(False, "--download", help="Allow downloading a missing dataset (data.download)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (statistics, counts, parameters) instead of the summary."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also write a clients x classes heatmap PNG to this file (with --labeled: one per set, FILE-labeled.png and FILE-unlabeled.png)."
    ),
    show: int = typer.Option(5, "--show", help="Clients whose class histogram the summary shows."),
    view: str = typer.Option("counts", "--view", help="--plot: counts (samples per cell) or percent (each client's class shares, rows summing to 100%)."),
    scale: str = typer.Option(
        "auto", "--scale", help="--plot: colour scale, linear or log; auto takes log for counts spanning a factor of 10 or more, linear for percent."
    ),
    order: str = typer.Option(
        "auto",
        "--order",
        help="--plot: rows in client order, or clustered (grouped by each client's largest class, alike clients adjacent); auto clusters more than 100 clients.",
    ),
    preset: str | None = typer.Option(
        None,
        "--preset",
        help="Show the split a preset's run (or a TOML config's) trains on, exactly: the same images left out (an encoder's pretraining split, a subset, a validation hold-out) and the same seed. Change its fields with --set.",
    ),
    set_: list[str] = typer.Option([], "--set", help="With --preset: override a config field, section.key=value (repeatable), as `fedprior run` does."),
) -> None:
    """Partition a dataset's training labels over clients; print sizes, classes per client, beta_cib and beta_hetero.

    With --labeled N (FedDB's setting) the labeled and the unlabeled set are described
    separately, each with its own statistics and heatmap. With --preset NAME the split is
    the one `fedprior run NAME` trains on (its config decides dataset, scheme and seed).
    """
    from fedprior.data import load_dataset
    from fedprior.partition.factory import make_partitioner
    from fedprior.partition.plot import ORDERS, SCALES, VIEWS
    from fedprior.partition.statistics import class_counts, describe

    for option, value, accepted in (("--view", view, VIEWS), ("--scale", scale, SCALES), ("--order", order, ORDERS)):
        if value not in accepted:
            raise ConfigError(f"{option}: unknown value {value!r}; accepted: {', '.join(accepted)}")
    if preset is None and set_:
        raise ConfigError("--set: changes a preset's config; give the preset with --preset NAME (or set the split with --scheme, --clients, ...)")
    if plot is not None:
        check_output_file(plot, "--plot")
    from_preset = None
    if preset is not None:
        _given_with_preset(ctx)
        from_preset = _preset_split(preset, set_)
        data = from_preset["data"]
        dataset, scheme, parameters, roles = data.name, from_preset["scheme"], from_preset["parameters"], from_preset["roles"]
        labeled = parameters.get("num_labeled", 0)
        labels = data.train_labels
    else:
        # unchecked here, as before: each partitioner checks the parameters it uses, naming them (the options, through _with_option)
        fields = PartitionConfig.model_construct(
            scheme=scheme,
            shards=shards,
            alpha=alpha,
            min_size=min_size,
            window=window,
            sizes=sizes,  # type: ignore[arg-type]
            size_ratio=size_ratio,
            balance=balance,
            num_labeled=labeled,
            num_unlabeled=unlabeled,
            labeled_in_unlabeled=labeled_in_unlabeled,
            flwr_kwargs=_inline_table(flwr_kwargs),
            flwr_shuffle=flwr_shuffle,
        )
        try:
            splitter = make_partitioner(fields, clients, seed)
            data = load_dataset(dataset, root, download)
            labels = data.train_labels
            split = splitter.partition(labels)
            roles = dict(split.roles) if labeled else {"": list(split.roles["train"])}
        except ConfigError as error:
            raise _with_option(error) from None
        parameters = scheme_parameters(fields, clients, seed)
        if labeled:
            parameters.update(num_labeled=labeled, num_unlabeled=unlabeled, labeled_in_unlabeled=labeled_in_unlabeled)
    summaries, plots = {}, {}
    for role, parts in roles.items():
        counts = class_counts(labels, parts, data.num_classes)
        summaries[role] = {**describe(counts, data.class_names), "num_train_samples": int(labels.size)}
        if plot is not None:
            from fedprior.partition.plot import plot_heatmap

            path = plot.with_name(f"{plot.stem}-{role}{plot.suffix}") if role else plot
            shown = ", ".join(f"{key}={value}" for key, value in parameters.items() if key != "num_clients")
            source = f"preset {from_preset['name']}: " if from_preset else ""
            title = f"{source}{dataset}, {role + ' set, ' if role else ''}{scheme} ({shown})"
            coloured = {}
            if from_preset and from_preset["domains"] and data.train_domains is not None and role == "":  # partition.domains: bars by domain
                from fedprior.partition.domains import domain_of_clients

                coloured = {"client_domains": domain_of_clients(parts, data.train_domains), "domain_names": data.domain_names}
                title += f", domains {from_preset['domains']}"
            try:
                plots[role] = plot_heatmap(counts, path, class_names=data.class_names, title=title, view=view, scale=scale, order=order, **coloured)  # type: ignore[arg-type]
            except OSError as error:
                raise FedpriorError(f"--plot: cannot write {path} ({error.strerror or error})") from None
    if as_json:
        record: dict[str, Any] = {"dataset": dataset, "scheme": scheme, "parameters": parameters}
        if from_preset:
            record.update(preset=from_preset["name"], overrides=list(set_), left_out=from_preset["left_out"], pool=from_preset["pool"])
        if labeled:
            record.update({role: summary for role, summary in summaries.items()})
            if plots:
                record["plots"] = {role: str(path) for role, path in plots.items()}
        else:
            record.update(summaries[""])
            if plot is not None:
                record["plot"] = str(plot)
        typer.echo(json.dumps(record))
        return
    if from_preset:
        from fedprior.cli.console import make_console

        make_console().print(_preset_line(from_preset, set_), highlight=False, soft_wrap=True, markup=False)
    for role, summary in summaries.items():
        _print_summary(dataset, scheme, parameters, summary, show, role)
    for path in plots.values():
        typer.echo(f"heatmap written to {path}")
