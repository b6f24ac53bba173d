"""The Flower ServerApp that ``flwr run`` loads: it builds the experiment its run config names and trains it.

``pyproject.toml`` names the module-level ``app`` (``[tool.flwr.app.components]``). It
composes experiments (configs, run directories, the runner) with the Flower runtime
(:mod:`fedprior.flower`), so it lives here, above both; the runtime never imports it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedprior.algorithms.pieces.private_aggregation import check_private_aggregation
from fedprior.errors import FedpriorError
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.resume_check import checkpoint_metadata
from fedprior.experiments.run_config import read_config
from fedprior.experiments.runner import execute
from fedprior.flower.runtime import train_on_flower
from fedprior.flower.server_app import SERVER_DONE
from fedprior.results.run_dir import RunDir
from fedprior.runtime.checkpoint import load_checkpoint

log = logging.getLogger("fedprior.flower")


def split_overrides(text: str) -> list[str]:
    """``"data.dataset=digits; federation.rounds=3"`` -> ``["data.dataset=digits", "federation.rounds=3"]``."""
    return [part.strip() for part in str(text or "").replace("\n", ";").split(";") if part.strip()]


def serve_run_dir(grid: Grid, run_config: dict[str, Any]) -> dict[str, Any]:
    """Train the experiment of an existing run directory (prepared by ``fedprior flower local``).

    Resumes from the run directory's checkpoint if there is one; writes checkpoints
    only (the process that prepared the run writes metrics, summary and report). The
    SuperNodes hold their own data (``export-data`` is off).
    """
    run = RunDir.existing(Path(str(run_config["run-dir"])))
    name, config = read_config(run)
    experiment = build_experiment(name, config)
    start = load_checkpoint(run.checkpoint) if run.checkpoint.is_file() else None
    result = train_on_flower(
        experiment, run, start=start, on_round=None, grid=grid, run_config={**run_config, "export-data": False}, checkpoint_metadata=checkpoint_metadata(config)
    )
    return {"rounds": len(result.progress.history)}


def standalone(grid: Grid, run_config: dict[str, Any]) -> dict[str, Any]:
    """``flwr run .``: build the experiment named by the run config and run it into a new run directory.

    Given a ``run-dir`` that holds a checkpoint, continue that run (a restarted server).
    """
    run = RunDir(Path(str(run_config["run-dir"]))) if run_config.get("run-dir") else None
    resume = run is not None and run.checkpoint.is_file() and run.config.is_file()
    if run is not None and resume:  # a restarted server: the run directory's own config, from its last checkpoint
        name, config = read_config(run)
    else:
        overrides = split_overrides(run_config.get("overrides", ""))
        runtime = str(run_config.get("runtime") or "flower-sim")
        name, config = load_config(str(run_config.get("preset") or "fedavg-cnn"), [*overrides, f"run.runtime='{runtime}'"])
        run = run or RunDir.new(name, base=Path(str(run_config.get("runs-dir") or "runs")))
    if str(run_config.get("secagg", False)).lower() in ("true", "1"):  # before any data loads
        check_private_aggregation(config.algorithm.robust_rule(), config.privacy.dp, secagg=True)
    options = {"grid": grid, "run_config": dict(run_config)}
    with run.journal.recording():  # warnings, and why the run stopped, in its run.log
        summary = execute(name, config, run, resume=resume, runtime_options=options)
    log.info("fedprior: %s", json.dumps(summary))
    return summary


def main(grid: Grid, context: Context) -> None:
    """The ServerApp's entry point; run config (``flwr run . -c "key=value ..."``):

    - ``preset``: a preset name or a TOML path (default fedavg-cnn);
    - ``overrides``: ``section.key=value`` overrides separated by ``;``;
    - ``run-dir``: the run directory (default a new ``runs/NAME-TIMESTAMP`` under ``runs-dir``);
    - ``mode``: ``standalone`` (default: the ServerApp builds, trains, writes the whole run
      directory) or ``serve`` (train the experiment of a prepared ``run-dir``; what
      ``fedprior flower local`` uses);
    - ``round-timeout``, ``min-nodes``, ``node-wait``: see :class:`fedprior.flower.server_app.Settings`;
    - ``export-data``: write every client's data where simulated nodes find it (default
      true; a deployment whose SuperNodes have their own ``data-dir`` sets it false).
    """
    run_config = dict(context.run_config)
    mode = str(run_config.get("mode") or "standalone")
    # in serve mode, the process that prepared the run learns from this file that the ServerApp is done
    done_file = Path(str(run_config["run-dir"])) / "flower" / SERVER_DONE if mode == "serve" and run_config.get("run-dir") else None
    try:
        if mode == "serve":
            outcome = serve_run_dir(grid, run_config)
        elif mode == "standalone":
            outcome = {"summary": standalone(grid, run_config)}
        else:
            raise FedpriorError(f"run config mode: unknown mode '{mode}'; accepted: standalone, serve")
        status = {"status": "finished", **outcome}
    except BaseException as error:
        status = {"status": "failed", "error": f"{type(error).__name__}: {error}", "kind": type(error).__name__, "message": str(error)}
        raise
    finally:
        if done_file is not None:
            done_file.parent.mkdir(parents=True, exist_ok=True)
            done_file.write_text(json.dumps(status))


app = ServerApp()
"""The ServerApp that ``flwr run`` loads (``fedprior.experiments.flower_app:app``)."""
app.main()(main)
