"""What a resume checks before it continues a run: the same config, and rounds that can still be reached.

The checkpoint records the run's resolved config (every field, as JSON). A resume
compares it with the run directory's ``config.toml``, and refuses any change except:

- fields that do not change the training: ``RESUME_MAY_CHANGE`` (where the data is, the
  cache, threads, workers, device, how often to evaluate, the description);
- ``federation.rounds``, on purpose: raise it to train a finished run further (the
  result equals a run started with the larger number), or lower it down to the rounds
  already trained. Fewer rounds than the checkpoint holds are refused, and so is a
  change to the rounds of a stage the run has already left, so the summary never
  claims rounds that did not run.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from fedprior.algorithms.base import Algorithm
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.config_fields import config_differences
from fedprior.runtime.checkpoint import Progress
from fedprior.runtime.simulation import stage_plan

CONFIG_KEY = "config"
RESUME_MAY_CHANGE = frozenset(
    {
        "description",
        "data.root",
        "data.download",
        "encoder.download",
        "encoder.cache",
        "run.threads",
        "run.vectorize",
        "run.workers",
        "run.start_method",
        "run.device",
        "run.deterministic",
        "run.mlflow",
        "run.mlflow_experiment",
        "federation.evaluate_every",
        "federation.wait_for_clients",
    }
)
"""Fields a resume may find changed: where the data is, caching, tracking, how the work is spread (threads,
workers, device, evaluation cadence) and how long a round waits for its clients. ``run.device`` may change
because 'auto' resolves per machine anyway."""


def checkpoint_metadata(config: ExperimentConfig) -> dict[str, str]:
    """What every checkpoint of a run records about its config."""
    return {CONFIG_KEY: json.dumps(config.to_dict(), sort_keys=True)}


def _show(value: Any) -> str:
    return "unset" if value is None else repr(value)


def check_same_config(metadata: dict[str, str], config: ExperimentConfig, config_path: Path) -> None:
    """Refuse ``config`` (from config.toml) if it differs from the checkpoint's beyond what may change."""
    if CONFIG_KEY not in metadata:
        return  # a checkpoint of Flower's standalone ServerApp or an older fedprior: nothing recorded to compare
    changed = {
        field: values
        for field, values in config_differences(json.loads(metadata[CONFIG_KEY]), config.to_dict()).items()
        if field not in RESUME_MAY_CHANGE and field != "federation.rounds"
    }
    if changed:
        listed = ", ".join(f"{field} ({_show(old)} in the checkpoint, {_show(new)} now)" for field, (old, new) in changed.items())
        raise ConfigError(
            f"{config_path} differs from the run's checkpoint: {listed}; a run resumes only with the config it started "
            f"with (federation.rounds may change): undo the edit, or start a new run with `fedprior run {config_path} --run-dir NEW_FOLDER`"
        )


def check_rounds(algorithm: Algorithm, rounds: int, progress: Progress) -> None:
    """Refuse a ``federation.rounds`` that would drop rounds already trained or change a finished stage."""
    done = Counter(r.get("stage") for r in progress.history)
    for index, (stage, planned, _) in enumerate(stage_plan(algorithm, rounds, 1.0)):
        if index < progress.stage_index and planned != done[stage.name]:
            raise ConfigError(
                f"federation.rounds: stage '{stage.name}' already finished after {done[stage.name]} rounds and the run "
                f"moved on; its rounds cannot change now (set federation.rounds back)"
            )
        if index == progress.stage_index and planned < progress.round:
            raise ConfigError(
                f"federation.rounds: the checkpoint already holds {progress.round} rounds"
                f"{'' if stage.name == 'federated' else f' of stage {stage.name!r}'}; on resume the rounds can grow "
                f"or stay, not drop below that (set at least {progress.round})"
            )
