"""``fedprior flower ...``: run an experiment on a real Flower federation (docs/flower.md).

- ``local``: start a SuperLink and N SuperNodes on this machine, run, print the summary, stop them all;
- ``export``: write the N node folders a deployment needs (each SuperNode gets one);
- ``certs``: make a CA and a SuperLink certificate for the hosts a deployment uses.
"""

from __future__ import annotations

from pathlib import Path

import typer

from fedprior.cli.app import app, stderr, user_errors

flower_app = typer.Typer(
    name="flower",
    help="Run experiments on Flower: a local federation of processes, node folders, TLS certificates.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(flower_app, name="flower")


@flower_app.command("local")
@user_errors
def local(
    preset: str = typer.Argument(..., help="A preset name (see `fedprior presets`) or a path to a TOML config."),
    nodes: int = typer.Option(3, "--nodes", min=1, help="SuperNodes to start; client c is hosted by node c mod N."),
    tls: bool = typer.Option(False, "--tls/--insecure", help="TLS with certificates made for localhost, or plain HTTP (development)."),
    auth: bool = typer.Option(
        False, "--auth", help="SuperNode authentication (needs --tls): each node's key is registered with the SuperLink, which refuses any other node."
    ),
    secagg: bool = typer.Option(
        False,
        "--secagg",
        help="Aggregate every round under Flower's SecAgg+: the server learns the sum of the nodes' updates, never one (docs/privacy-robustness.md).",
    ),
    secagg_shares: float = typer.Option(
        3, "--secagg-shares", help="SecAgg+: nodes holding shares of each node's secrets (an integer >= 3), or a fraction in (0, 1] of the round's."
    ),
    secagg_threshold: float = typer.Option(
        2, "--secagg-threshold", help="SecAgg+: shares that rebuild a secret (an integer >= 2 below the shares), or a fraction in (0, 1] of them."
    ),
    secagg_clipping_range: float = typer.Option(8.0, "--secagg-clipping-range", help="SecAgg+: each coordinate of a node's update lies in [-c, c]."),
    secagg_quantization_range: int = typer.Option(2**22, "--secagg-quantization-range", help="SecAgg+: integers per coordinate (grid step 2c / Q)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field: section.key=value (repeatable)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Where to write the run (default runs/NAME-TIMESTAMP)."),
    round_timeout: float = typer.Option(
        300.0, "--round-timeout", min=1.0, help="Seconds to wait for a round's replies; clients that miss it fail for that round."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary on stdout."),
) -> None:
    """Start a SuperLink and N SuperNodes on loopback, run the experiment across them, stop every process."""
    from fedprior.algorithms.pieces.private_aggregation import check_private_aggregation
    from fedprior.cli.run import report, with_progress
    from fedprior.errors import ConfigError
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start
    from fedprior.flower.secagg import SecAggOptions

    if auth and not tls:
        raise ConfigError("--auth: Flower authenticates SuperNodes over TLS only; add --tls")
    options_given = SecAggOptions(secagg_shares, secagg_threshold, secagg_clipping_range, secagg_quantization_range)
    if not secagg and options_given != SecAggOptions():
        raise ConfigError("--secagg-shares, --secagg-threshold, --secagg-clipping-range and --secagg-quantization-range apply with --secagg; add it")
    secure = options_given.check() if secagg else None
    if secure is not None:
        secure.nodes_fit(nodes)
    name, config = load_config(preset, [*set_, "run.runtime='flower-local'"])
    if secure is not None:  # a robust rule or a privacy.dp mode SecAgg+ cannot run: refused before any data loads
        check_private_aggregation(config.algorithm.robust_rule(), config.privacy.dp, secagg=True)
        from fedprior.flower.local import check_secagg_rounds

        check_secagg_rounds(secure, config, nodes)
    options = {"nodes": nodes, "tls": tls, "auth": auth, "secagg": secure, "round_timeout": round_timeout}
    summary = with_progress(lambda **cb: start(name, config, run_dir, runtime_options=options, **cb))
    report(summary, as_json)


@flower_app.command("export")
@user_errors
def export(
    preset: str = typer.Argument(..., help="A preset name or a path to a TOML config."),
    out: Path = typer.Option(..., "--out", help="Folder to write node-0 ... node-(N-1) into."),
    nodes: int = typer.Option(..., "--nodes", min=1, help="Number of SuperNodes; client c goes to node c mod N."),
    set_: list[str] = typer.Option([], "--set", help="Override a config field: section.key=value (repeatable)."),
) -> None:
    """Write each SuperNode's folder (the task and its clients' partitions) for a deployment."""
    from fedprior.experiments.build import build_experiment
    from fedprior.experiments.config import load_config
    from fedprior.flower.export import export_nodes

    name, config = load_config(preset, set_)
    folders = export_nodes(build_experiment(name, config), out, nodes)
    for folder in folders:
        typer.echo(str(folder))


@flower_app.command("certs")
@user_errors
def certs(
    out: Path = typer.Option(..., "--out", help="Folder for ca.pem, server.pem, server.key."),
    host: list[str] = typer.Option([], "--host", help="A name or IP address the SuperLink is reached at (repeatable); localhost is always included."),
    days: int = typer.Option(30, "--days", min=1, help="Validity in days."),
) -> None:
    """Make a CA and a SuperLink certificate (SuperNodes and `flwr` trust ca.pem)."""
    from fedprior.flower.tls import generate_certificates

    made = generate_certificates(out, tuple(host), days)
    stderr.print(f"CA {made.ca}; SuperLink certificate {made.cert} and key {made.key}", highlight=False)
