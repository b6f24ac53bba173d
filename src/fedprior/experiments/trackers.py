"""Experiment tracking: TensorBoard event files in every run directory, and MLflow when ``run.mlflow`` is set.

The runner hands :class:`Trackers` every round record (the lines of ``metrics.jsonl``;
round 0 is the initial model, at step 0) and, once the report is written, the summary:

- TensorBoard, always, in ``<run dir>/tensorboard/``: each number of a round as a scalar
  at its step (``upload_bytes`` summed over the clients), the report's figures (the PNGs of
  the run directory) as images, the summary's numbers under ``summary/`` and the config as
  text. ``tensorboard --logdir runs/`` shows every run.
- MLflow, with ``run.mlflow = "URI"`` (a local ``sqlite:///mlflow.db``, or a tracking
  server): the config as params (``section.key``), the same per-round metrics, the
  summary's numbers, and the run directory as artifacts, all but the checkpoint (the
  per-client states can be large; it stays in the run directory). Needs ``fedprior[mlflow]``.

An interrupted run resumes with the same records: TensorBoard's files are rewritten from
the checkpoint's history (as ``metrics.jsonl`` is), and the MLflow run named in the run
directory's ``tracking.json`` goes on from the first step it lacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fedprior.errors import FedpriorError
from fedprior.experiments.config import ExperimentConfig
from fedprior.experiments.run_dir import RunDir
from fedprior.runtime.checkpoint import Progress

SUMMARY_KEYS = (
    "initial_accuracy",
    "final_accuracy",
    "best_accuracy",
    "initial_macro_f1",
    "final_macro_f1",
    "best_macro_f1",
    "download_bytes",
    "upload_bytes",
    "wall_seconds",
)
"""The summary's numbers logged at the end of a run."""


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of a round record (bytes uploaded summed over clients; lists, text and flags left out)."""
    out = {}
    for key, value in record.items():
        if key == "upload_bytes" and isinstance(value, dict):
            value = sum(value.values())
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out


def step_of(record: dict[str, Any]) -> int:
    """The record's global step; the initial evaluation (which has none) is step 0."""
    return int(record.get("step") or 0)


def flat_config(name: str, config: ExperimentConfig) -> dict[str, str]:
    """``{"name": ..., "section.key": value}`` for every config field (MLflow params, TensorBoard text)."""
    out = {"name": name}
    for section, values in config.to_dict().items():
        if isinstance(values, dict):
            out.update({f"{section}.{key}": str(value) for key, value in values.items()})
        else:
            out[section] = str(values)
    return out


def replay(progress: Progress | None) -> list[dict[str, Any]]:
    """The records a resumed run has already made: the initial evaluation, then each finished round."""
    if progress is None:
        return []
    return [{"round": 0, **progress.initial}, *progress.history]


class TensorBoardTracker:
    """Scalars, figures and the config in ``<run dir>/tensorboard`` (torch's SummaryWriter from the tensorboard package)."""

    def __init__(self, folder: Path, text: dict[str, str], done: list[dict[str, Any]]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        for old in folder.glob("events.out.tfevents.*"):  # a resumed run rewrites its history, as metrics.jsonl
            old.unlink()
        self.writer = SummaryWriter(log_dir=str(folder))
        self.writer.add_text("config", "\n".join(f"    {k} = {v}" for k, v in text.items()), 0)
        for record in done:
            self.record(record)

    def record(self, record: dict[str, Any]) -> None:
        for key, value in scalars(record).items():
            self.writer.add_scalar(key, value, step_of(record))
        self.writer.flush()  # a dashboard watching the run sees each round as it ends

    def finish(self, summary: dict[str, Any], figures: list[Path], step: int) -> None:
        import numpy as np
        from PIL import Image

        for key in SUMMARY_KEYS:
            if key in summary:
                self.writer.add_scalar(f"summary/{key}", float(summary[key]), step)
        for path in figures:
            with Image.open(path) as image:
                self.writer.add_image(f"figures/{path.stem}", np.asarray(image.convert("RGB")), step, dataformats="HWC")
        self.writer.close()


def require_mlflow(uri: str):
    """MLflow's client for ``uri``; a one-line error if MLflow is missing or the store cannot be opened."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise FedpriorError("run.mlflow: logging to MLflow needs MLflow: pip install 'fedprior[mlflow]'") from None
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # opens (and for sqlite, creates) the store now, before any training
    except Exception as error:  # MLflow raises its own, SQLAlchemy's or OS errors for a bad store
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FedpriorError(f"run.mlflow: cannot open the MLflow store {uri!r}: {first}") from None
    return client


class MlflowTracker:
    """Params, per-round metrics, the summary and the run directory in an MLflow run (one per run directory)."""

    def __init__(self, run: RunDir, config: ExperimentConfig, params: dict[str, str], done: list[dict[str, Any]]) -> None:
        from mlflow.entities import Param, RunStatus

        settings = config.run
        assert settings.mlflow is not None, "an MLflow tracker is made only when run.mlflow is set"
        self.client = require_mlflow(settings.mlflow)
        known = json.loads(run.tracking.read_text()).get("mlflow", {}) if run.tracking.is_file() else {}
        self.logged_until = -1
        """Steps up to this one are in the MLflow run already (a resumed run skips them)."""
        if known.get("uri") == settings.mlflow and known.get("run_id"):
            self.run_id = known["run_id"]
            self.client.update_run(self.run_id, status=RunStatus.to_string(RunStatus.RUNNING))
            self.logged_until = max((m.step for m in self.client.get_metric_history(self.run_id, "round")), default=-1)
        else:
            experiment = self.client.get_experiment_by_name(settings.mlflow_experiment)
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(settings.mlflow_experiment)
            tags = {"fedprior.run_dir": str(run.path.resolve()), "algorithm": config.algorithm.name, "dataset": config.data.dataset}
            self.run_id = self.client.create_run(experiment_id, run_name=run.path.name, tags=tags).info.run_id
            self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in params.items()])
            run.path.mkdir(parents=True, exist_ok=True)
            run.tracking.write_text(json.dumps({"mlflow": {"uri": settings.mlflow, "run_id": self.run_id}}))
        for record in done:
            self.record(record)

    def log(self, values: dict[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in values.items()])

    def record(self, record: dict[str, Any]) -> None:
        if step_of(record) > self.logged_until:
            self.log(scalars(record), step_of(record))

    def finish(self, summary: dict[str, Any], run: RunDir, step: int) -> None:
        self.log({key: float(summary[key]) for key in SUMMARY_KEYS if key in summary}, step)
        for path in sorted(p for p in run.path.rglob("*") if p.is_file() and p != run.checkpoint):
            folder = path.parent.relative_to(run.path).as_posix()
            self.client.log_artifact(self.run_id, str(path), None if folder == "." else folder)
        self.client.set_terminated(self.run_id, "FINISHED")


class Trackers:
    """Every tracker of a run: TensorBoard always, MLflow when ``run.mlflow`` is set."""

    def __init__(self, run: RunDir, name: str, config: ExperimentConfig, progress: Progress | None = None) -> None:
        """Open the trackers; ``progress``: the checkpoint's progress when the run resumes (its records are replayed)."""
        done = replay(progress)
        params = flat_config(name, config)
        self.run = run
        self.step = max((step_of(r) for r in done), default=0)
        self.tensorboard = TensorBoardTracker(run.tensorboard, params, done)
        self.mlflow = MlflowTracker(run, config, params, done) if config.run.mlflow else None

    def record(self, record: dict[str, Any]) -> None:
        self.step = max(self.step, step_of(record))
        self.tensorboard.record(record)
        if self.mlflow:
            self.mlflow.record(record)

    def finish(self, summary: dict[str, Any]) -> None:
        """After the report: the summary's numbers, the figures, and (MLflow) the run directory as artifacts."""
        figures = sorted(self.run.path.glob("*.png"))
        self.tensorboard.finish(summary, figures, self.step)
        if self.mlflow:
            self.mlflow.finish(summary, self.run, self.step)


def check_trackers(config: ExperimentConfig) -> None:
    """Fail before any long work if a tracker the config asks for cannot work (MLflow missing, a bad store)."""
    if config.run.mlflow:
        require_mlflow(config.run.mlflow)
