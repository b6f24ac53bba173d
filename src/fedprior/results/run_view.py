"""One run folder as a comparison sees it (:class:`RunView`): its config, numbers, curve and fingerprints, finished or not.

A finished run is read from its ``result.json``. A run that has not finished (interrupted,
or still going) is read from what its ``metrics.jsonl`` holds, with the initial accuracy
from its checkpoint, and is marked as such. Whether two runs trained on the same
partition (a paired comparison) shows as a fingerprint of each run's ``partition.npz``.
Plain files only: no config model and no torch are imported.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedprior.errors import FedpriorError
from fedprior.results.config_fields import flatten
from fedprior.results.report import accuracy_curve, simulated_time_curve
from fedprior.results.run_dir import RunDir
from fedprior.runtime.traffic import communication, upgrade_record

METRICS = (
    "initial_accuracy",
    "final_accuracy",
    "best_accuracy",
    "dp_epsilon",
    "final_macro_f1",
    "best_macro_f1",
    "final_client_accuracy_mean",
    "final_client_accuracy_pooled",
    "download_bytes",
    "upload_bytes",
    "wall_seconds",
)
"""The summary keys a comparison shows (F1 only where the algorithm's evaluation reports it; ``dp_epsilon``, the privacy spent
by the last round at ``privacy.delta``, only for a run with client-level DP; the per-client accuracies on the local test splits,
each client once (``_mean``) and pooled over their images (``_pooled``), only for a run with ``partition.local_test_fraction``)."""


@dataclass
class RunView:
    """One run as a comparison sees it."""

    path: Path
    name: str
    config: dict[str, Any]
    """The resolved config, flattened to ``section.key``."""
    finished: bool
    rounds: int
    metrics: dict[str, Any]
    """The ``METRICS`` the run has (an unfinished run: computed from metrics.jsonl)."""
    curve: dict[int, float] = field(default_factory=dict)
    """Test accuracy by round: round 0 (the initial model, NaN where unknown) and the evaluated rounds."""
    partition: str = ""
    """A fingerprint of partition.npz: equal for runs on the same partition."""
    fingerprints: str = ""
    """A finished run's round fingerprints and final-state SHA-256 (``fingerprints.py``): equal for runs that gave the same numbers; '' if none."""
    times: dict[int, float] = field(default_factory=dict)
    """Simulated seconds by round, for the rounds of ``curve`` (round 0: 0), where the run had a system model (``[system]``); else empty."""

    @property
    def status(self) -> str:
        return "finished" if self.finished else f"unfinished: {self.rounds} rounds in metrics.jsonl"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.path),
            "name": self.name,
            "finished": self.finished,
            "status": self.status,
            "rounds": self.rounds,
            **self.metrics,
            "curve": {str(k): v for k, v in self.curve.items()},
            "partition": self.partition,
            "config": self.config,
        }


def fingerprint(path: Path) -> str:
    """A short hash of the partition's index arrays (same partition, same fingerprint)."""
    if not path.is_file():
        return ""
    digest = hashlib.sha256()
    with np.load(path) as arrays:
        for key in sorted(arrays.files):
            digest.update(key.encode())
            digest.update(np.ascontiguousarray(arrays[key], dtype=np.int64).tobytes())
    return digest.hexdigest()[:10]


def initial_metrics(checkpoint: Path) -> dict[str, Any]:
    """The initial model's evaluation, from the checkpoint's metadata (no tensor is read)."""
    if not checkpoint.is_file():
        return {}
    from safetensors import safe_open

    with safe_open(str(checkpoint), framework="numpy") as handle:
        return json.loads((handle.metadata() or {}).get("progress", "{}")).get("initial", {})


def partial_metrics(records: list[dict[str, Any]], initial: dict[str, Any]) -> dict[str, Any]:
    """What a finished run's summary would say, from the rounds an unfinished run has recorded so far."""
    accuracy = [initial["accuracy"]] if "accuracy" in initial else []
    accuracy += [r["accuracy"] for r in records if "accuracy" in r]
    f1 = [initial["macro_f1"]] if "macro_f1" in initial else []
    f1 += [r["macro_f1"] for r in records if "macro_f1" in r]
    out: dict[str, Any] = {**communication(records), "wall_seconds": sum(r.get("seconds", 0.0) for r in records)}
    if "accuracy" in initial:
        out["initial_accuracy"] = initial["accuracy"]
    if accuracy:
        out.update(final_accuracy=accuracy[-1], best_accuracy=max(accuracy))
    if f1:
        out.update(final_macro_f1=f1[-1], best_macro_f1=max(f1))
    scored = [r for r in [initial, *records] if "client_accuracy_mean" in r]
    if scored:  # partition.local_test_fraction: the last evaluation's per-client accuracies, unweighted and pooled
        out.update({f"final_{k}": scored[-1][k] for k in ("client_accuracy_mean", "client_accuracy_pooled") if k in scored[-1]})
    epsilons = [r["dp_epsilon"] for r in records if "dp_epsilon" in r]
    if epsilons:  # client-level DP: the privacy spent by the last round recorded
        out["dp_epsilon"] = epsilons[-1]
    return out


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The round records of a ``metrics.jsonl`` (bytes as the rounds' totals, ``runtime/traffic.py``), skipping lines that are not one (a line cut by a kill, bytes appended to it).

    Skipped lines are one warning naming the file and how many (``fedprior resume`` rewrites
    the file from the checkpoint, which repairs it).
    """
    if not path.is_file():
        return []
    records, skipped = [], 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)  # bytes: not UTF-8 is a UnicodeDecodeError, a ValueError as JSONDecodeError is
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append(upgrade_record(record))  # an older fedprior's per-client byte counts -> the round's totals
        else:
            skipped += 1
    if skipped:
        warnings.warn(
            f"{path}: skipped {skipped} line{'s' * (skipped != 1)} that {'are' if skipped != 1 else 'is'} not a round record "
            f"(damaged or appended text); read the {len(records)} valid one{'s' * (len(records) != 1)}",
            stacklevel=2,
        )
    return records


def read_run(path: str | Path) -> RunView:
    """One run directory; a FedpriorError if ``path`` is not one."""
    path = Path(path)
    if not path.is_dir():
        raise FedpriorError(f"{path} is not a fedprior run directory (no such folder)")
    run = RunDir.existing(path)
    try:
        raw = tomllib.loads(run.config.read_text())
    except tomllib.TOMLDecodeError as error:
        raise FedpriorError(f"{run.config}: not valid TOML ({error})") from None
    name = raw.pop("name", path.name)
    if run.result.is_file():
        summary = json.loads(run.result.read_text())
        metrics = {k: summary[k] for k in METRICS if k in summary}
        curve = accuracy_curve(summary)
        times = simulated_time_curve(summary)
        finished, rounds = True, summary["rounds"]
        numbers = [summary.get("round_fingerprints"), summary.get("state_sha256")]
        fingerprints = json.dumps(numbers) if all(numbers) else ""
    else:
        initial = initial_metrics(run.checkpoint)
        records = read_metrics(run.metrics)
        metrics = partial_metrics(records, initial)
        curve = {0: initial.get("accuracy", math.nan), **{r["step"]: r["accuracy"] for r in records if "accuracy" in r}}
        timed = {r["step"]: float(r["simulated_time"]) for r in records if "accuracy" in r and "simulated_time" in r}
        times = {0: 0.0, **timed} if timed else {}
        finished, rounds, fingerprints = False, len(records), ""
    return RunView(path, name, flatten(raw), finished, rounds, metrics, curve, fingerprint(run.partition_indices), fingerprints, times)
