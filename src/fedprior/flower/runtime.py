"""The experiment runner's entry into Flower: pick the way the run reaches its SuperNodes."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from fedprior.errors import ConfigError, FedpriorError
from fedprior.runtime.checkpoint import RunState
from fedprior.runtime.simulation import SimulationResult

FLOWER_RUNTIMES = ("flower-sim", "flower-local")


def require_flower() -> None:
    try:
        import flwr  # noqa: F401
    except ImportError:
        raise FedpriorError(
            'the Flower runtimes need Flower (flwr[simulation]==1.41.0): in the fedprior clone, pip install -c requirements.lock -e ".[flower]"'
        ) from None


def train_on_flower(
    experiment,
    run,
    *,
    start: RunState | None,
    on_round: Callable[[dict[str, Any]], None] | None,
    grid=None,
    run_config: dict[str, Any] | None = None,
    checkpoint_metadata: dict[str, str] | None = None,
    **options: Any,
) -> SimulationResult:
    """Train ``experiment`` on Flower, writing checkpoints into ``run``; returns what ``simulate`` returns.

    - inside a ServerApp (``grid`` given, ``flwr run``): the round loop on that grid;
    - ``run.runtime = "flower-sim"``: Flower's simulation engine, one virtual SuperNode per client;
    - ``run.runtime = "flower-local"``: a SuperLink and SuperNodes as processes on this machine
      (their ServerApp writes the checkpoints, with its own ``checkpoint_metadata``).

    ``checkpoint_metadata`` goes into every checkpoint this process writes (the run's config).
    """
    require_flower()
    runtime = experiment.config.run.runtime
    if grid is not None:
        from fedprior.flower.export import export_all
        from fedprior.flower.server_app import federate_experiment, run_key, settings_from_run_config

        run_config = run_config or {}
        data_dir = run.path / "flower" / "data"
        if run_config.get("export-data", True):  # for simulated nodes, which have no data folder of their own
            export_all(experiment, data_dir)
        settings = settings_from_run_config(run_config, data_hint=str(data_dir) if data_dir.exists() else "", run_key=run_key(run))
        result = federate_experiment(grid, experiment, run, start, on_round, settings, checkpoint_metadata)
        shutil.rmtree(data_dir, ignore_errors=True)  # finished: the exported data and simulated nodes' states
        if data_dir.parent.is_dir() and not any(data_dir.parent.iterdir()):
            data_dir.parent.rmdir()
        return result
    if runtime == "flower-sim":
        from fedprior.flower.simulation import run_flower_simulation

        return run_flower_simulation(experiment, run, start=start, on_round=on_round, checkpoint_metadata=checkpoint_metadata, **options)
    if runtime == "flower-local":
        from fedprior.flower.local import run_local_federation

        return run_local_federation(experiment, run, start=start, on_round=on_round, **options)
    raise ConfigError(f"run.runtime: '{runtime}' is not a Flower runtime; accepted: {', '.join(FLOWER_RUNTIMES)}")
