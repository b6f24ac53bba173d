"""Experiment tracking: TensorBoard event files in every run directory, MLflow when ``run.mlflow`` is set, and
Weights & Biases when ``run.wandb`` is set.

The runner hands :class:`Trackers` every round record (the lines of ``metrics.jsonl``;
round 0 is the initial model, at step 0) and, once the report is written, the summary:

- TensorBoard, always, in ``<run dir>/tensorboard/``: each number of a round as a scalar
  at its step (bytes as the round's totals over its clients), the report's figures (the PNGs of
  the run directory) as images, the summary's numbers under ``summary/``, the config as
  text and, once the run ends, as HParams with the final and best accuracy as its metrics
  (the HParams tab). Accuracy is a fraction here, as in every file a program reads (% only
  in what a person reads: the CLI, report.md, the plots). ``tensorboard --logdir runs/``
  shows every run.
- MLflow, with ``run.mlflow = "URI"`` (a local ``sqlite:///mlflow.db``, or a tracking
  server): the config as params (``section.key``), the same per-round metrics, the
  summary's numbers, and the run directory as artifacts, all but the checkpoints (the
  per-client states can be large; they stay in the run directory) and the lock. A relative
  store is made absolute when the run starts (:func:`resolve_store`), and the store is
  checked within seconds (:func:`open_store`). Needs the ``mlflow`` extra.
- Weights & Biases, with ``run.wandb = "offline"`` (the W&B run written to disk only, into
  ``<run dir>/wandb/`` or ``$WANDB_DIR``: ``wandb sync`` uploads it later) or ``"online"`` (sent to
  the W&B server; the only mode that reaches the network): the config, the same per-round
  metrics at their steps, the summary's numbers in the W&B run's summary and the report's
  figures as images. Needs the ``wandb`` extra.

An interrupted run resumes with the same records: TensorBoard's files are rewritten from
the checkpoint's history (as ``metrics.jsonl`` is), and the MLflow run named in the run
directory's ``tracking.json``, in the store recorded there, goes on from the first step it
lacks, whichever folder the resume runs in. The W&B run id is recorded there too: a resumed run logs into the
same W&B run (offline: its earlier offline files are replaced by the whole history, as TensorBoard's are;
online: from the first step the W&B run lacks).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fedprior.atomic import write_text
from fedprior.errors import ConfigError, FedpriorError
from fedprior.results.config_fields import flatten
from fedprior.results.run_dir import RunDir
from fedprior.runtime.checkpoint import Progress, blobs_path

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
    "dp_epsilon",
    "simulated_time",
)
"""The summary's numbers logged at the end of a run (those it has: ``simulated_time`` with a system model only)."""


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of a round record (bytes: the round's totals over its clients; lists, mappings, text and flags left out)."""
    out = {}
    for key, value in record.items():
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out


def step_of(record: dict[str, Any]) -> int:
    """The record's global step; the initial evaluation (which has none) is step 0."""
    return int(record.get("step") or 0)


class RunFields(Protocol):
    @property
    def mlflow(self) -> str | None: ...
    @property
    def mlflow_experiment(self) -> str: ...
    @property
    def wandb(self) -> str | None: ...
    @property
    def wandb_project(self) -> str: ...


class AlgorithmName(Protocol):
    @property
    def name(self) -> str: ...


class DatasetName(Protocol):
    @property
    def dataset(self) -> str: ...


class TrackedConfig(Protocol):
    """What the trackers read of a run's config (an :class:`~fedprior.experiments.config.ExperimentConfig`, which
    ``results/`` does not import: the layer above it builds the config)."""

    @property
    def run(self) -> RunFields: ...
    @property
    def algorithm(self) -> AlgorithmName: ...
    @property
    def data(self) -> DatasetName: ...
    def to_dict(self) -> dict[str, Any]: ...


def flat_config(name: str, config: TrackedConfig) -> dict[str, str]:
    """``{"name": ..., "section.key": value}`` for every config field (MLflow params, TensorBoard text)."""
    return {"name": name, **{tag: str(value) for tag, value in flatten(config.to_dict()).items()}}


def hparams(name: str, config: TrackedConfig) -> dict[str, float | str]:
    """The config as TensorBoard HParams (``section.key``): numbers as numbers (so the dashboard sorts and filters them),
    flags as ``true``/``false``, the rest (lists included) as text; unset fields (None) left out, as TOML leaves them."""
    out: dict[str, float | str] = {"name": name}
    for tag, value in flatten(config.to_dict()).items():
        if isinstance(value, bool):
            out[tag] = "true" if value else "false"
        elif isinstance(value, (int, float)):
            out[tag] = value
        elif value is not None:
            out[tag] = str(value)
    return out


HPARAM_METRICS = ("final_accuracy", "best_accuracy")
"""The summary's numbers the HParams dashboard shows beside each run's config (as ``summary/KEY``, fractions)."""


def replay(progress: Progress | None) -> list[dict[str, Any]]:
    """The records a resumed run has already made: the initial evaluation, then each finished round."""
    if progress is None:
        return []
    return [{"round": 0, **progress.initial}, *progress.history]


WRITER_THREAD = {"quiet": False}


def quiet_writer_thread() -> None:
    """Leave out the traceback Python prints when TensorBoard's writer thread fails (a full disk): the thread keeps the
    error for the run's own thread, which raises it at its next write and reports it in one line
    (:meth:`TensorBoardTracker.writing`). Installed once per process; other threads' errors print as before."""
    import threading

    if WRITER_THREAD["quiet"]:
        return
    WRITER_THREAD["quiet"] = True
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError):
            return
        previous(args)

    threading.excepthook = hook


class TensorBoardTracker:
    """Scalars, figures and the config in ``<run dir>/tensorboard`` (torch's SummaryWriter from the tensorboard package)."""

    def __init__(self, folder: Path, text: dict[str, str], done: list[dict[str, Any]], hparam_values: dict[str, float | str] | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        quiet_writer_thread()
        self.folder = folder
        for old in folder.glob("events.out.tfevents.*"):  # a resumed run rewrites its history, as metrics.jsonl
            old.unlink()
        self.hparams = hparam_values or {}
        with self.writing():
            self.writer = SummaryWriter(log_dir=str(folder))
            self.writer.add_text("config", "\n".join(f"    {k} = {v}" for k, v in text.items()), 0)
        for record in done:
            self.record(record)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """An OSError of the writer (a full disk: raised without a file name, by its thread) names the event file."""
        try:
            yield
        except OSError as error:
            if error.filename:
                raise
            writer = getattr(self, "writer", None)
            name = getattr(writer.file_writer.event_writer, "_file_name", None) if writer is not None and writer.file_writer else None
            raise OSError(error.errno, error.strerror or str(error), str(name or self.folder)) from error

    def record(self, record: dict[str, Any]) -> None:
        with self.writing():
            for key, value in scalars(record).items():
                self.writer.add_scalar(key, value, step_of(record))
            self.writer.flush()  # a dashboard watching the run sees each round as it ends

    def finish(self, summary: dict[str, Any], figures: list[Path], step: int) -> None:
        import numpy as np
        from PIL import Image

        with self.writing():
            for key in SUMMARY_KEYS:
                if key in summary:
                    self.writer.add_scalar(f"summary/{key}", float(summary[key]), step)
            if self.hparams:
                self.write_hparams({f"summary/{key}": float(summary[key]) for key in HPARAM_METRICS if key in summary})
            for path in figures:
                with Image.open(path) as image:
                    self.writer.add_image(f"figures/{path.stem}", np.asarray(image.convert("RGB")), step, dataformats="HWC")
            self.writer.close()

    def write_hparams(self, metrics: dict[str, float]) -> None:
        """The config as HParams of this run's event file, with ``metrics`` (scalars logged here) as its metrics.

        Written into the run's own folder, not the sub-run ``SummaryWriter.add_hparams`` makes, so
        that ``tensorboard --logdir runs/`` shows one row per run directory in the HParams tab.
        """
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        writer = self.writer._get_file_writer()
        for proto in hparams_summaries(self.hparams, metrics):
            writer.add_summary(proto)


STORE_TIMEOUT = 3.0
"""Seconds the check at start waits for a tracking server (to connect, then to answer), and SQLite for its file."""

QUICK_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0"}
"""MLflow's HTTP settings while the store is checked: one try, a short timeout (MLflow's own, seven retries with
growing back-off, keep a run going through a server's short outage, but at start they hide a wrong URI for minutes)."""


def resolve_store(uri: str, base: Path | None = None) -> str:
    """``uri`` with a relative local store made absolute against ``base`` (default: the working directory).

    A run resumed from another folder must log to the store it started with, so what is used
    and recorded (``tracking.json``) is absolute: ``sqlite:///mlflow.db`` becomes
    ``sqlite:////abs/mlflow.db``; a path (``./mlruns``) or a ``file:`` URI with a relative path
    (``file:mlruns``) becomes absolute. Servers (``http(s)://``), databases and in-memory SQLite
    stay as they are.
    """
    from urllib.parse import urlsplit

    folder = Path(base) if base is not None else Path.cwd()
    parts = urlsplit(uri)
    if uri in ("databricks", "databricks-uc", "uc"):  # MLflow's names for Databricks' stores, not folders
        return uri
    if parts.scheme == "sqlite" or parts.scheme.startswith("sqlite+"):
        database = sqlite_file(uri)
        if database is None or Path(database).is_absolute():
            return uri
        from sqlalchemy import make_url

        return make_url(uri).set(database=os.path.abspath(folder / database)).render_as_string(hide_password=False)
    if parts.scheme == "file" and not parts.netloc and not parts.path.startswith("/"):
        return Path(os.path.abspath(folder / parts.path)).as_uri()
    if parts.scheme == "" and not Path(uri).expanduser().is_absolute():
        return os.path.abspath(folder / uri)
    if parts.scheme == "":
        return str(Path(uri).expanduser())
    return uri


def sqlite_file(uri: str) -> str | None:
    """The database file of a SQLite URI; None for an in-memory store (``sqlite://``, ``:memory:``, URI filenames)."""
    from sqlalchemy import make_url

    url = make_url(uri)
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:") or url.query.get("uri") == "true":
        return None
    return database


@dataclass(frozen=True)
class MlflowTarget:
    """Where a run logs to MLflow: the store's absolute URI, and the MLflow run to go on with (None: a new one)."""

    uri: str
    run_id: str | None = None
    recorded_in: Path | None = None
    """The ``tracking.json`` that names ``run_id``."""


def mlflow_target(config: TrackedConfig, run: RunDir | None = None) -> MlflowTarget | None:
    """The store and MLflow run for ``run.mlflow``; None when it is unset.

    The run directory's ``tracking.json`` records the store's absolute URI, the value as the
    config gave it, and the MLflow run's id. While ``run.mlflow`` is the value recorded (as
    written, or the same store), the run goes on logging into that MLflow run, in that store,
    from whatever folder it is resumed; a different ``run.mlflow`` starts a new MLflow run there.
    """
    given = config.run.mlflow
    if given is None:
        return None
    uri = resolve_store(given)
    if run is not None and run.tracking.is_file():
        known = recorded_tracking(run, "mlflow")
        same_store = given in (known.get("given"), known.get("uri")) or uri == known.get("uri")
        if known.get("run_id") and known.get("uri") and same_store:
            return MlflowTarget(resolve_store(known["uri"]), known["run_id"], run.tracking)
    return MlflowTarget(uri)


@contextmanager
def quick_checks() -> Iterator[None]:
    """While the store is checked: MLflow's HTTP client tries once with a short timeout, and MLflow's database
    retries (were they reached) print nothing."""
    saved = {key: os.environ.get(key) for key in QUICK_HTTP}
    quiet = [logging.getLogger(name) for name in ("mlflow.store.db.utils", "urllib3.connectionpool")]
    levels = [logger.level for logger in quiet]
    os.environ.update(QUICK_HTTP)
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)


def probe_store(uri: str, must_exist: bool) -> str | None:
    """Why the store at ``uri`` cannot be used (None: go on to MLflow), found in seconds.

    A tracking server must accept a connection within :data:`STORE_TIMEOUT` seconds; a SQLite
    store's folder must be writable (it is created, as MLflow would) and its file a SQLite
    database, opened here with ``sqlite3`` before SQLAlchemy, which retries a bad file for
    100 s. ``must_exist`` (a resumed run's recorded store): a local store must already be there,
    never made anew.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return probe_server(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80), parts.scheme)
    if parts.scheme == "sqlite" or parts.scheme.startswith("sqlite+"):
        database = sqlite_file(uri)
        return None if database is None else probe_sqlite(Path(database), must_exist)
    if parts.scheme in ("", "file") and must_exist:
        from urllib.request import url2pathname

        folder = Path(url2pathname(parts.path) if parts.scheme else uri).expanduser()
        return None if folder.is_dir() else f"no folder {folder}"
    return None


def probe_server(host: str, port: int, scheme: str) -> str | None:
    """Why no connection to ``host:port`` opens within :data:`STORE_TIMEOUT` seconds (None: it does, or a proxy is in the way)."""
    import socket
    from urllib.request import getproxies, proxy_bypass

    if not host:
        return "no host in the URI"
    if getproxies().get(scheme) and not proxy_bypass(host):  # the connection goes through the proxy: MLflow's check decides
        return None
    try:
        socket.create_connection((host, port), timeout=STORE_TIMEOUT).close()
    except TimeoutError:
        return f"no answer from {host}:{port} within {STORE_TIMEOUT:g} s"
    except OSError as error:
        return f"cannot connect to {host}:{port} ({error.strerror or error})"
    return None


def probe_sqlite(path: Path, must_exist: bool) -> str | None:
    """Why ``path`` cannot hold a SQLite store (None: it can)."""
    import sqlite3

    if must_exist and not path.is_file():
        return f"no file {path}"
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create the folder {folder} ({error.strerror or error})"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    try:
        connection = sqlite3.connect(path, timeout=STORE_TIMEOUT)
        try:
            connection.execute("PRAGMA schema_version").fetchone()  # reads the header: a file that is not a database fails here
        finally:
            connection.close()
    except sqlite3.Error as error:
        return f"{path}: {error}"
    return None


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def open_store(target: MlflowTarget):
    """MLflow's client for the target's store, checked within seconds; one-line errors for MLflow missing, a store
    that cannot be opened, and a recorded MLflow run that is not in its store."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise FedpriorError('run.mlflow: logging to MLflow needs MLflow: in the fedprior clone, pip install -c requirements.lock -e ".[mlflow]"') from None
    run_id = target.run_id
    resumed = run_id is not None
    where = f" (the store of MLflow run {target.run_id}, named in {target.recorded_in})" if resumed else ""
    hint = f"; put the store back, or delete {target.recorded_in} to log into a new MLflow run" if resumed else ""
    with quick_checks():
        reason = probe_store(target.uri, must_exist=resumed)
        if reason is None:
            try:
                client = MlflowClient(tracking_uri=target.uri)
                client.search_experiments(max_results=1)  # opens (for sqlite, creates) the store now, before any training
            except Exception as error:  # MLflow raises its own, SQLAlchemy's or OS errors for a bad store
                reason = first_line(error)
        if reason is not None:
            raise FedpriorError(f"run.mlflow: cannot open the MLflow store {target.uri!r}{where}: {reason}{hint}")
        if run_id is not None:
            try:
                found = client.get_run(run_id)
            except Exception as error:
                raise FedpriorError(
                    f"run.mlflow: the MLflow run {target.run_id} named in {target.recorded_in} is not in the store {target.uri!r} ({first_line(error)}){hint}"
                ) from None
            if found.info.lifecycle_stage == "deleted":
                raise FedpriorError(
                    f"run.mlflow: the MLflow run {target.run_id} named in {target.recorded_in} is deleted in the store {target.uri!r}; "
                    f"restore it (`mlflow runs restore --run-id {target.run_id}`), or delete {target.recorded_in} to log into a new MLflow run"
                )
    return client


class MlflowTracker:
    """Params, per-round metrics, the summary and the run directory in an MLflow run (one per run directory).

    A failure to log (the server gone for longer than MLflow's retries) stops the run with one line; the
    checkpoint keeps its rounds, and the resume logs what the MLflow run lacks.
    """

    def __init__(self, target: MlflowTarget, run: RunDir, config: TrackedConfig, params: dict[str, str], done: list[dict[str, Any]]) -> None:
        self.uri, self.run_dir = target.uri, run
        self.client = open_store(target)
        self.logged_until = -1
        """Steps up to this one are in the MLflow run already (a resumed run skips them)."""
        with self.logging():
            if target.run_id is not None:
                from mlflow.entities import RunStatus

                self.run_id = target.run_id
                self.client.update_run(self.run_id, status=RunStatus.to_string(RunStatus.RUNNING))
                self.logged_until = max((m.step for m in self.client.get_metric_history(self.run_id, "round")), default=-1)
            else:
                self.run_id = self.create(run, config, params)
                run.path.mkdir(parents=True, exist_ok=True)
                record_tracking(run, "mlflow", {"uri": target.uri, "given": config.run.mlflow, "run_id": self.run_id})
            for record in done:
                self.record(record)

    def create(self, run: RunDir, config: TrackedConfig, params: dict[str, str]) -> str:
        """A new MLflow run under ``run.mlflow_experiment`` (made if new), named after the run directory, with the config as params."""
        from mlflow.entities import Param

        name = config.run.mlflow_experiment
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        tags = {"fedprior.run_dir": str(run.path.resolve()), "algorithm": config.algorithm.name, "dataset": config.data.dataset}
        run_id = self.client.create_run(experiment_id, run_name=run.path.name, tags=tags).info.run_id
        self.client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()])
        return run_id

    @contextmanager
    def logging(self) -> Iterator[None]:
        """MLflow's errors while logging as one line that says the run can be resumed."""
        try:
            yield
        except FedpriorError:
            raise
        except Exception as error:  # MLflow's, SQLAlchemy's, requests' or OS errors
            raise FedpriorError(
                f"run.mlflow: logging to the MLflow store {self.uri!r} failed ({first_line(error)}); "
                f"`fedprior resume {self.run_dir.path}` goes on from the last checkpoint and logs what the MLflow run lacks"
            ) from None

    def log(self, values: dict[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        with self.logging():
            self.client.log_batch(self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in values.items()])

    def record(self, record: dict[str, Any]) -> None:
        if step_of(record) > self.logged_until:
            self.log(scalars(record), step_of(record))

    def finish(self, summary: dict[str, Any], run: RunDir, step: int) -> None:
        self.log({key: float(summary[key]) for key in SUMMARY_KEYS if key in summary}, step)
        with self.logging():
            for path in artifacts(run):
                folder = path.parent.relative_to(run.path).as_posix()
                self.client.log_artifact(self.run_id, str(path), None if folder == "." else folder)
            self.client.set_terminated(self.run_id, "FINISHED")


def recorded_tracking(run: RunDir, key: str) -> dict[str, Any]:
    """What the run directory's ``tracking.json`` records under ``key`` (``mlflow``, ``wandb``); empty when nothing."""
    if not run.tracking.is_file():
        return {}
    try:
        known = json.loads(run.tracking.read_text()).get(key, {})
    except (OSError, ValueError, AttributeError):
        raise FedpriorError(f"{run.tracking} is damaged; delete it to log this run into a new MLflow or W&B run") from None
    return known if isinstance(known, dict) else {}


def record_tracking(run: RunDir, key: str, record: dict[str, Any]) -> None:
    """Write ``record`` under ``key`` in the run directory's ``tracking.json``, keeping what the other trackers recorded."""
    everything = json.loads(run.tracking.read_text()) if run.tracking.is_file() else {}
    run.path.mkdir(parents=True, exist_ok=True)
    write_text(run.tracking, json.dumps({**everything, key: record}, indent=1) + "\n")


WANDB_MISSING = 'run.wandb: logging to Weights & Biases needs wandb: in the fedprior clone, pip install -c requirements.lock -e ".[wandb]"'


def import_wandb() -> Any:
    """The wandb package, or one line naming the install command."""
    try:
        import wandb
    except ImportError:
        raise FedpriorError(WANDB_MISSING) from None
    return wandb


WANDB_NO_LOGIN = (
    "run.wandb: 'online' needs a W&B login, and none is here: run `wandb login` or set WANDB_API_KEY, or use run.wandb = 'offline' "
    "(written to disk for `wandb sync`); run.wandb is the mode whatever WANDB_MODE says"
)


def check_wandb_login() -> None:
    """One line (:data:`WANDB_NO_LOGIN`) where ``run.wandb = 'online'`` finds no W&B credentials (``WANDB_API_KEY``, or
    ``wandb login``'s netrc entry for the W&B host), before any data loads; without the check ``wandb.init`` fails once
    the run has started (``UsageError: No API key configured``). Looked up without the network and without prompting, by
    wandb's own lookup (``authenticate_session(prompt=False)``, wandb 0.31); where that is not there (another wandb
    version) or raises (a key of a bad format), the check is left to ``wandb.init``."""
    if os.environ.get("WANDB_API_KEY"):
        return
    try:
        import wandb
        from wandb.sdk.lib.wbauth.authenticate import authenticate_session

        found = authenticate_session(host=wandb.Settings().base_url, source="fedprior", prompt=False, update_session=False)
    except Exception:
        return
    if found is None:
        raise ConfigError(WANDB_NO_LOGIN)


class WandbTracker:
    """The config, per-round metrics, the summary and the figures in a W&B run (one per run directory).

    ``run.wandb`` is W&B's mode, passed to ``wandb.init`` whatever ``$WANDB_MODE`` says, so that only
    ``"online"`` reaches the network. The W&B console capture is off (fedprior's own lines stay as they are).
    """

    def __init__(self, run: RunDir, name: str, config: TrackedConfig, done: list[dict[str, Any]]) -> None:
        wandb = import_wandb()
        mode = config.run.wandb
        folder = Path(os.environ.get("WANDB_DIR") or run.path)
        known = recorded_tracking(run, "wandb")
        resumed = bool(known.get("id")) and known.get("project") == config.run.wandb_project
        run_id = known["id"] if resumed else None
        if resumed and mode == "offline":  # the whole history is written again, as TensorBoard's
            for old in (folder / "wandb").glob(f"offline-run-*-{run_id}*"):
                if old.name.split("-")[3] == run_id:
                    shutil.rmtree(old)
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=config.run.wandb_project,
            id=run_id,
            name=run.path.name,
            resume="allow" if resumed else None,
            mode=mode,
            dir=str(folder),
            config={"name": name, **config.to_dict()},
            tags=[config.algorithm.name, config.data.dataset],
            settings=wandb.Settings(silent=True, console="off", x_save_requirements=False),
        )
        if not resumed:
            record_tracking(run, "wandb", {"id": self.run.id, "project": config.run.wandb_project})
        self.logged_until = self.run.step - 1 if resumed and mode == "online" else -1
        """Steps up to this one are in the W&B run already (an online resume skips them)."""
        for record in done:
            self.record(record)

    def record(self, record: dict[str, Any]) -> None:
        if step_of(record) > self.logged_until:
            self.run.log(scalars(record), step=step_of(record))

    def stop(self) -> None:
        """The run stopped before its end (an error, Ctrl-C): the W&B run ends as failed; a resume goes on with it."""
        self.run.finish(exit_code=1)

    def finish(self, summary: dict[str, Any], figures: list[Path], step: int) -> None:
        """The figures as images at the last step, the summary's numbers in the W&B run's summary."""
        wandb = import_wandb()
        if figures:
            self.run.log({f"figures/{path.stem}": wandb.Image(str(path)) for path in figures}, step=step)
        self.run.summary.update({key: float(summary[key]) for key in SUMMARY_KEYS if key in summary})
        self.run.finish()


def artifacts(run: RunDir) -> list[Path]:
    """The run directory's files logged as MLflow artifacts: all but the checkpoints and their parts (the per-client
    states can be large; they stay in the run directory), the lock and any half-written temporary file."""
    left_out = {run.checkpoint, run.previous_checkpoint, run.lock_file}
    parts = blobs_path(run.checkpoint)
    return sorted(p for p in run.path.rglob("*") if p.is_file() and p not in left_out and parts not in p.parents and not p.name.endswith(".tmp"))


class Trackers:
    """Every tracker of a run: TensorBoard always, MLflow when ``run.mlflow`` is set, W&B when ``run.wandb`` is."""

    def __init__(self, run: RunDir, name: str, config: TrackedConfig, progress: Progress | None = None) -> None:
        """Open the trackers; ``progress``: the checkpoint's progress when the run resumes (its records are replayed)."""
        done = replay(progress)
        params = flat_config(name, config)
        self.run = run
        self.step = max((step_of(r) for r in done), default=0)
        target = mlflow_target(config, run)
        if target is not None:  # the store as used, absolute (the config keeps the value as written)
            params["run.mlflow"] = target.uri
        self.tensorboard = TensorBoardTracker(run.tensorboard, params, done, hparams(name, config))
        self.mlflow = MlflowTracker(target, run, config, params, done) if target is not None else None
        self.wandb = WandbTracker(run, name, config, done) if config.run.wandb else None

    def record(self, record: dict[str, Any]) -> None:
        self.step = max(self.step, step_of(record))
        self.tensorboard.record(record)
        if self.mlflow:
            self.mlflow.record(record)
        if self.wandb:
            self.wandb.record(record)

    def stop(self) -> None:
        """The run stopped before its end: end the W&B run (TensorBoard's files and the MLflow run stay as they are)."""
        if self.wandb:
            self.wandb.stop()

    def finish(self, summary: dict[str, Any]) -> None:
        """After the report: the summary's numbers, the figures, and (MLflow) the run directory as artifacts."""
        figures = sorted(self.run.path.glob("*.png"))
        self.tensorboard.finish(summary, figures, self.step)
        if self.mlflow:
            self.mlflow.finish(summary, self.run, self.step)
        if self.wandb:
            self.wandb.finish(summary, figures, self.step)


def check_trackers(config: TrackedConfig, run: RunDir | None = None) -> None:
    """Fail within seconds, before any long work, if a tracker the config asks for cannot work: MLflow or wandb missing,
    a store that cannot be opened, or (``run``'s ``tracking.json`` naming one) an MLflow run not in its store."""
    if config.run.wandb:
        import_wandb()
        if config.run.wandb == "online":
            check_wandb_login()
    target = mlflow_target(config, run)
    if target is not None:
        open_store(target)
