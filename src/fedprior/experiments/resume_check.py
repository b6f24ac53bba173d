"""What a resume checks before it continues a run: the same config, and rounds that can still be reached.

The checkpoint records the run's resolved config (every field, as JSON). A resume
compares it with the run directory's ``config.toml``, and refuses any change except:

- fields that do not change the training: ``RESUME_MAY_CHANGE`` (where the data is, the
  cache, threads, workers, concurrent clients, compilation, device, how often to evaluate, the description, and
  ``run.imports``: which modules define the algorithm is where its code is, like
  ``data.root``; the algorithm's name and hyperparameters are still compared, and an
  edit of a module's code could not be seen either way);
- ``federation.rounds``, on purpose: raise it to train a finished run further (the
  result equals a run started with the larger number), or lower it down to the rounds
  already trained. Fewer rounds than the checkpoint holds are refused, and so is a
  change to the rounds of a stage the run has already left, so the summary never
  claims rounds that did not run.

A run that has trained every round its config asks for and written its result.json has
finished: a resume of it trains nothing and rewrites nothing (:func:`finished_summary`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from fedprior.algorithms.base import Algorithm
from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig
from fedprior.privacy.config import LEGACY, PrivacyConfig
from fedprior.results.config_fields import config_differences, flatten
from fedprior.runtime.checkpoint import Progress
from fedprior.runtime.simulation import stage_plan, total_rounds

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
        "run.concurrent_clients",
        "run.compile",
        "run.start_method",
        "run.device",
        "run.deterministic",
        "run.cudnn_benchmark",
        "run.checkpoint_every",
        "run.client_state_memory_mb",
        "run.mlflow",
        "run.mlflow_experiment",
        "run.wandb",
        "run.wandb_project",
        "federation.evaluate_every",
        "run.test_metrics",
        "federation.wait_for_clients",
        "run.imports",
    }
)
"""Fields a resume may find changed: where the data is, caching, tracking, how the work is spread (threads,
workers, device, evaluation cadence, which rounds the test set is scored on), how long a round waits for its clients, and the
modules imported for the algorithm (a package renamed or moved). ``run.device`` may change because 'auto' resolves per machine anyway;
``run.compile``, ``run.deterministic`` and ``run.cudnn_benchmark`` change the last bits of the numbers (compiled or other kernels), not what the config means."""


def checkpoint_metadata(config: ExperimentConfig) -> dict[str, str]:
    """What every checkpoint of a run records about its config."""
    return {CONFIG_KEY: json.dumps(config.to_dict(), sort_keys=True)}


def _show(value: Any) -> str:
    return "unset" if value is None else repr(value)


def changes_that_matter(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{"section.key": (before, after)}`` for the fields of two resolved configs (as dicts) that differ, but
    those that do not change the numbers (``RESUME_MAY_CHANGE``) and fields added to fedprior after ``before``
    was recorded that hold their default now (absent from an older checkpoint's config: it ran with that behaviour)."""
    defaults = flatten(ExperimentConfig().to_dict())
    before = read_as_now(before)
    return {
        field: (old, new)
        for field, (old, new) in config_differences(before, after).items()
        if field not in RESUME_MAY_CHANGE
        and not (old is None and field in defaults and new == defaults[field])
        and not same_server_step(field, old, new, after)
    }


def read_as_now(config: dict[str, Any]) -> dict[str, Any]:
    """A recorded config as fedprior reads it now: ``privacy.accountant`` = 'poisson' of a run with DP off (every run written before
    the accountant named the method; meaningless without DP) is the default now (``PrivacyConfig._legacy_accountant``)."""
    privacy = config.get("privacy")
    if not isinstance(privacy, dict) or privacy.get("accountant") not in LEGACY or privacy.get("dp", "none") != "none":
        return config
    return {**config, "privacy": {**privacy, "accountant": PrivacyConfig().accountant}}


def same_server_step(field: str, old: Any, new: Any, after: dict[str, Any]) -> bool:
    """Whether ``algorithm.<field>`` of the server optimizer option, at its fixed default of before each rule had its own (``old``) and unset now
    (``new`` None: the rule's own), steps alike: the rule of ``after`` does not read it, or its own default is that value."""
    from fedprior.algorithms.pieces.server_optimizers import FIELDS, RULE_DEFAULTS, USED, WRITTEN_BEFORE

    key = field.removeprefix("algorithm.")
    rule = after.get("algorithm", {}).get("server_optimizer")
    if new is not None or rule not in USED or key not in WRITTEN_BEFORE or old != WRITTEN_BEFORE[key]:
        return False
    read = {FIELDS[attr] for attr in USED[rule]}
    return key not in read or RULE_DEFAULTS[rule][key] == old


def describe_changes(changed: dict[str, tuple[Any, Any]], before: str, after: str = "now") -> str:
    """``run.seed (0 in the checkpoint, 7 now), ...``: each field with its two values."""
    return ", ".join(f"{field} ({_show(old)} {before}, {_show(new)} {after})" for field, (old, new) in changed.items())


def check_same_config(metadata: dict[str, str], config: ExperimentConfig, config_path: Path) -> None:
    """Refuse ``config`` (from config.toml) if it differs from the checkpoint's beyond what may change."""
    if CONFIG_KEY not in metadata:
        return  # a checkpoint of Flower's standalone ServerApp or an older fedprior: nothing recorded to compare
    changed = changes_that_matter(json.loads(metadata[CONFIG_KEY]), config.to_dict())
    changed.pop("federation.rounds", None)
    if changed:
        listed = describe_changes(changed, "in the checkpoint")
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


def finished_summary(result: Path, algorithm: Algorithm, rounds: int, progress: Progress) -> dict[str, Any] | None:
    """The summary in ``result`` (result.json) if the run is finished, else None.

    Finished: the checkpoint holds every round ``federation.rounds`` plans, and result.json
    was written after the last of them (its ``rounds`` match). A result.json left from
    before ``federation.rounds`` was raised, or none (a run killed between its last
    checkpoint and its result), is not finished: the resume trains on, or writes the result.
    """
    done = len(progress.history)
    if total_rounds(algorithm, rounds) != done or not result.is_file():
        return None
    try:
        summary = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable or damaged: the resume writes it again
        return None
    return summary if isinstance(summary, dict) and summary.get("rounds") == done else None


def finished_message(run_dir: Path, summary: dict[str, Any]) -> str:
    """What a resume of a finished run says instead of training."""
    return f"{run_dir} has finished ({summary['rounds']} rounds; result.json); nothing to do. Raise federation.rounds in its config.toml to train further"
