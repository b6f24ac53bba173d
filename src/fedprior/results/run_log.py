"""A run's plain-text log (``run.log``) and the one-line-per-round format it shares with the CLI.

A scheduler (SLURM, nohup, CI) reads stderr as a file: a progress bar that redraws itself
shows nothing there until the end. So every run appends plain lines to ``run.log`` in its
run directory, whoever drives it (the CLI, the Python API, a Flower ServerApp), and the
CLI prints the very same lines on stderr when stderr is not a terminal:

    2025-06-01 12:00:01 started fedavg-cnn: fedavg on fashion-mnist, 100 clients, 20 rounds, seed 0, cpu (2 workers)
    2025-06-01 12:00:01 round 0/20: initial model, accuracy 10.00%, loss 2.3026
    2025-06-01 12:00:04 round 1/20 (federated): accuracy 61.32%, loss 1.0412, train loss 1.2210, clients 10 ok 0 failed, 2.9 s
    2025-06-01 12:01:00 warning: 3 client updates failed, in rounds 7 (3); ...
    2025-06-01 12:01:00 fedavg-cnn: final accuracy 84.10% (best 84.10%, initial 10.00%) after 20 rounds in 59.2 s on cpu ...

A resume appends (``resumed fedavg-cnn after round 7/20: ...``); a run that stops says
why (``stopped after round 7/20: interrupted (SIGINT); ...``). The format is documented
in docs/runs.md.
"""

from __future__ import annotations

import signal
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol


class Started(Protocol):
    """What a start line reads of the run's experiment (:class:`fedprior.experiments.build.Experiment`, which this layer does not import)."""

    name: str
    config: Any
    task: Any
    device: Any
    workers: int


def stamped(line: str) -> str:
    """``line`` after the local date and time (``2025-06-01 12:00:04 ...``): how run.log and the CLI's batch lines begin."""
    return f"{datetime.now():%Y-%m-%d %H:%M:%S} {line}"


def _percent(value: float) -> str:
    return f"{100 * value:.2f}%"


def start_line(experiment: Started, total: int, done: int) -> str:
    """The line a run starts (``done`` = 0) or resumes with: what is trained, on what, for how long, where."""
    config = experiment.config
    workers = f"{experiment.workers} worker{'s' if experiment.workers != 1 else ''}"
    what = (
        f"{config.algorithm.name} on {config.data.dataset}, {experiment.task.num_clients} clients, "
        f"{total} rounds, seed {config.run.seed}, {experiment.device} ({workers})"
    )
    if done:
        return f"resumed {experiment.name} after round {done}/{total}: {what}"
    return f"started {experiment.name}: {what}"


def client_parts(record: dict[str, Any]) -> list[str]:
    """The per-client accuracy on the clients' local test splits (``partition.local_test_fraction``), where the record has it."""
    if "client_accuracy_mean" not in record:
        return []
    pooled = f", pooled {_percent(record['client_accuracy_pooled'])}" if "client_accuracy_pooled" in record else ""
    return [f"per client {_percent(record['client_accuracy_mean'])} (worst 10% {_percent(record['client_accuracy_worst10'])}{pooled})"]


def round_line(record: dict[str, Any], total: int) -> str:
    """One round's record (what ``metrics.jsonl`` gets, or round 0's initial evaluation) as one line.

    ``round STEP/TOTAL (STAGE[ ROUND])``: the step counts rounds over all stages (MFCL's
    server stage follows its federated one), the stage's own round is shown where it
    differs. Then test accuracy and loss (``accuracy -`` in a round without evaluation,
    ``federation.evaluate_every``), the mean and worst 10% of the clients' accuracies on their local test splits (:func:`client_parts`), the clients' mean training loss, client-level DP's epsilon so far, the sampled clients
    that answered and those that failed (and those without data), and the round's seconds.
    """
    step = record.get("step")
    if step is None:  # round 0: the initial model's evaluation
        parts = ["initial model"]
        if "accuracy" in record:
            parts.append(f"accuracy {_percent(record['accuracy'])}")
        if "loss" in record:
            parts.append(f"loss {record['loss']:.4f}")
        parts.extend(client_parts(record))
        return f"round 0/{total}: {', '.join(parts)}"
    stage, round_ = record.get("stage", ""), record.get("round", step)
    where = f"round {step}/{total} ({stage}{f' {round_}' if round_ != step else ''})"
    clients, failed = record.get("clients", []), record.get("failed_clients", [])
    if record.get("trained") is False:
        if "stopped_by" in record:  # a privacy budget (privacy.max_epsilon) ended the run before this round
            return f"{where}: not trained, {record['note']}"
        return f"{where}: not trained, none of the {len(clients)} sampled clients could be reached"
    parts = [f"accuracy {_percent(record['accuracy'])}" if "accuracy" in record else "accuracy -"]
    if "loss" in record:
        parts.append(f"loss {record['loss']:.4f}")
    parts.extend(client_parts(record))
    if "client_train_loss" in record:
        parts.append(f"train loss {record['client_train_loss']:.4f}")
    if "dp_epsilon" in record:  # client-level DP: the privacy spent so far
        parts.append(f"epsilon {record['dp_epsilon']:.3f}" + (f" ({record['dp_bound']})" if "dp_bound" in record else ""))
    if "dp_epsilon_median" in record:  # record-level DP-SGD: that was the worst client's
        parts[-1] += f" (worst client; median {record['dp_epsilon_median']:.3f})"
    if clients:
        empty = len(record.get("empty_clients", []))
        parts.append(f"clients {len(clients) - len(failed)} ok {len(failed)} failed" + (f" {empty} without data" if empty else ""))
    else:
        parts.append("server only")
    if record.get("aggregated") is False:
        parts.append("global model unchanged")
    if "seconds" in record:
        parts.append(f"{record['seconds']:.1f} s")
    return f"{where}: {', '.join(parts)}"


def summary_line(summary: dict[str, Any]) -> str:
    """The run's last line: final, best and initial accuracy, rounds, time, device, run directory."""
    workers = summary["workers"]
    return (
        f"{summary['name']}: final accuracy {_percent(summary['final_accuracy'])} "
        f"(best {_percent(summary['best_accuracy'])}, initial {_percent(summary['initial_accuracy'])}) "
        f"after {summary['rounds']} rounds in {summary['wall_seconds']:.1f} s on {summary['device']} "
        f"({workers} worker{'s' if workers != 1 else ''}); run directory {summary['run_dir']}"
    )


def stop_reason(error: BaseException) -> str:
    """Why a run stopped, in a few words (``interrupted (SIGTERM)``, or the error's message)."""
    if isinstance(error, KeyboardInterrupt):
        signum, where = getattr(error, "signum", signal.SIGINT), getattr(error, "run_dir", None)
        return f"interrupted ({signal.Signals(signum).name})" + (f"; resume with `fedprior resume {where}`" if where else "")
    return str(error) or type(error).__name__


def failure_warning(summary: dict[str, Any]) -> str:
    """One line saying which rounds lost client updates, or '' when none did."""
    per_round = summary.get("failed_clients_per_round") or {}
    if not per_round:
        return ""
    rounds = ", ".join(f"{step} ({n})" for step, n in per_round.items())
    return (
        f"warning: {summary['failed_updates']} client updates failed, in rounds {rounds}; "
        f"those rounds aggregated the others (metrics.jsonl: failed_clients, failures)"
    )


def summary_warnings(summary: dict[str, Any]) -> list[str]:
    """The warning lines of a run summary: failed updates, clients without data, rounds that changed nothing."""
    lines = [failure_warning(summary)]
    empty = summary.get("empty_clients_per_round") or {}
    if empty:
        lines.append(
            f"warning: {summary['empty_updates']} of {summary.get('client_updates', '?')} sampled clients held no "
            f"data and trained nothing, in rounds {', '.join(f'{step} ({n})' for step, n in empty.items())}"
        )
    unchanged = summary.get("rounds_without_update") or []
    if unchanged:
        lines.append(f"warning: no client trained in rounds {', '.join(map(str, unchanged))}: the global model was not updated there")
    return [line for line in lines if line]


class RunLog:
    """Appends time-stamped lines to a run directory's ``run.log``.

    Lines written before :meth:`start` (the Python warnings of the run's setup) wait
    until it, so a resume that finds nothing to do leaves run.log unchanged. Every line
    is appended and flushed at once; a log that cannot be written is one warning, and
    the run goes on without it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.total = 0
        self.last_step = 0
        self.started = False
        self.broken = False
        self.pending: list[str] = []

    def write(self, line: str) -> None:
        if self.broken:
            return
        if not self.started:
            self.pending.append(stamped(line))
            return
        self._append([stamped(line)])

    def _append(self, lines: list[str]) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write("".join(f"{line}\n" for line in lines))
        except OSError as error:
            self.broken = True
            warnings.warn(f"cannot write {self.path} ({error.strerror or error}); the run goes on without its log", stacklevel=2)

    def start(self, experiment: Started, total: int, done: int) -> None:
        """Write the waiting lines and the start (or resume) line."""
        self.total, self.last_step, self.started = total, done, True
        pending, self.pending = self.pending, []
        self._append([*pending, stamped(start_line(experiment, total, done))])

    def round(self, record: dict[str, Any]) -> None:
        self.last_step = record.get("step") or self.last_step
        self.write(round_line(record, self.total))

    def finish(self, summary: dict[str, Any]) -> None:
        """The summary's warnings (failed or empty clients) and the summary line."""
        for line in summary_warnings(summary):
            self.write(line)
        self.write(summary_line(summary))

    @contextmanager
    def recording(self) -> Iterator[None]:
        """While the body runs, Python warnings go to run.log too, and a run that stops says why there."""
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            self.write(f"warning: {message}")
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        try:
            yield
        except BaseException as error:
            if self.started:
                self.write(f"stopped after round {self.last_step}/{self.total}: {stop_reason(error)}")
            raise
        finally:
            warnings.showwarning = shown
            self.pending, self.started = [], False
