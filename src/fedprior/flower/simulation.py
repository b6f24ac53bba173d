"""``run.runtime = "flower-sim"``: the experiment on Flower's simulation engine (Ray).

One virtual SuperNode per fedprior client (its ``partition-id`` is the client id) up to
:data:`VIRTUAL_NODES` clients; a larger population of N clients gets K = ``nodes`` virtual nodes
(default :data:`VIRTUAL_NODES`), node k hosting the clients c with c mod K = k, a range it
reports to the server as three numbers (``client_app.hosted_clients``): no per-client node, no
list of N ids, and a client's node is found when a round samples it. Each ClientApp call runs
in a Ray actor with ``num_cpus=1``; the numbers are those of one node per client. The ServerApp runs
in this process (Flower runs it in a thread), so it uses the experiment already
built and reports every round as it ends. The clients' data is exported once to
``<run dir>/flower/data`` (what each virtual node reads: its own tensors only); the
nodes keep their client states under ``<run dir>/flower/data/state``, so an
interrupted run resumes with them. Both are deleted when the run finishes.

Telemetry, update checks and Ray's usage statistics are turned off.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fedprior.errors import FedpriorError
from fedprior.flower.environment import quiet_environment
from fedprior.runtime.checkpoint import RunState
from fedprior.runtime.simulation import SimulationResult

if TYPE_CHECKING:
    from fedprior.flower.secagg import SecAggOptions


VIRTUAL_NODES = 100
"""Virtual SuperNodes of a flower-sim run at most, by default (one per client below it)."""


def virtual_nodes(num_clients: int, nodes: int | None = None) -> int:
    """How many virtual SuperNodes simulate ``num_clients`` clients: ``nodes`` (1..num_clients), else min(num_clients, VIRTUAL_NODES)."""
    if nodes is None:
        return min(num_clients, VIRTUAL_NODES)
    if not 1 <= nodes <= num_clients:
        raise FedpriorError(f"nodes: {nodes} virtual SuperNodes for {num_clients} clients; accepted: 1..{num_clients}")
    return nodes


def backend_config(num_cpus_per_client: float = 1.0) -> dict[str, Any]:
    return {
        "client_resources": {"num_cpus": num_cpus_per_client, "num_gpus": 0.0},
        "init_args": {"logging_level": "ERROR", "log_to_driver": False, "include_dashboard": False},
    }


def run_flower_simulation(
    experiment,
    run,
    *,
    start: RunState | None,
    on_round: Callable[[dict[str, Any]], None] | None,
    client_app=None,
    num_cpus_per_client: float = 1.0,
    round_timeout: float = 600.0,
    keep_files: bool = False,
    checkpoint_metadata: dict[str, str] | None = None,
    secagg: SecAggOptions | None = None,
    nodes: int | None = None,
) -> SimulationResult:
    """Run ``experiment`` on Flower's simulation engine; checkpoints go to ``run.checkpoint``.

    ``nodes``: virtual SuperNodes (:func:`virtual_nodes`; default one per client up to :data:`VIRTUAL_NODES`);
    ``client_app``: a ClientApp to use instead of fedprior's (tests wrap it with fault mods);
    ``secagg``: every round under SecAgg+ with these options (:mod:`fedprior.flower.secagg`).
    """
    supernodes = virtual_nodes(experiment.task.num_clients, nodes)
    if secagg is not None:
        secagg.check().nodes_fit(supernodes)
        from fedprior.algorithms.pieces.private_aggregation import check_private_aggregation

        check_private_aggregation(experiment.config.algorithm.robust_rule(), experiment.config.privacy.dp, secagg=True)
    quiet_environment()
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from fedprior.flower.client_app import client_app as make_client_app
    from fedprior.flower.export import export_all
    from fedprior.flower.server_app import Settings, federate_experiment, run_key

    data_dir = export_all(experiment, run.path / "flower" / "data")
    settings = Settings(round_timeout=round_timeout, min_nodes=supernodes, data_hint=str(data_dir), run_key=run_key(run), secagg=secagg)
    outcome: dict[str, SimulationResult] = {}

    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        outcome["result"] = federate_experiment(grid, experiment, run, start, on_round, settings, checkpoint_metadata)

    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR)  # not Flower's per-round INFO lines, nor run_simulation's deprecation notice
    try:
        run_simulation(
            server_app=server,
            client_app=client_app if client_app is not None else make_client_app(),
            num_supernodes=supernodes,
            backend_config=backend_config(num_cpus_per_client),
        )
    finally:
        flwr_logger.setLevel(level)
    if "result" not in outcome:
        raise FedpriorError("Flower's simulation ended without finishing the run (see the Flower log above)")
    if not keep_files:
        shutil.rmtree(run.path / "flower", ignore_errors=True)
    return outcome["result"]
