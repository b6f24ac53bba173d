"""Runs side by side (``fedprior compare``): grouped by method (seeds folded), mean ± sd of accuracy, F1, bytes sent, wall time, curves.

A finished run is read from its ``result.json``. A run that has not finished (interrupted,
or still going) is read from what its ``metrics.jsonl`` holds, with the initial accuracy
from its checkpoint, and is marked as such. Whether two runs trained on the same
partition (a paired comparison) shows as a fingerprint of each run's ``partition.npz``.
Runs are grouped by method (:mod:`fedprior.experiments.compare_groups`); each group's rows,
per run or per group, go to CSV or a pandas DataFrame with accuracy as fractions.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import tomllib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from fedprior.atomic import write_text
from fedprior.errors import FedpriorError
from fedprior.experiments.compare_groups import PLACEMENT, Group, Repeat, budget_differences, group_runs, paired
from fedprior.experiments.config_fields import flatten
from fedprior.experiments.report import accuracy_curve
from fedprior.experiments.run_dir import RunDir
from fedprior.runtime.traffic import upgrade_record

METRICS = ("initial_accuracy", "final_accuracy", "best_accuracy", "final_macro_f1", "best_macro_f1", "download_bytes", "upload_bytes", "wall_seconds")
"""The summary keys a comparison shows (F1 only where the algorithm's evaluation reports it)."""


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
    from fedprior.experiments.runner import communication

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
        finished, rounds = True, summary["rounds"]
        numbers = [summary.get("round_fingerprints"), summary.get("state_sha256")]
        fingerprints = json.dumps(numbers) if all(numbers) else ""
    else:
        initial = initial_metrics(run.checkpoint)
        records = read_metrics(run.metrics)
        metrics = partial_metrics(records, initial)
        curve = {0: initial.get("accuracy", math.nan), **{r["step"]: r["accuracy"] for r in records if "accuracy" in r}}
        finished, rounds, fingerprints = False, len(records), ""
    return RunView(path, name, flatten(raw), finished, rounds, metrics, curve, fingerprint(run.partition_indices), fingerprints)


def labels(runs: list[RunView]) -> list[str]:
    """A distinct label per run: its folder name (with its parent where two folders share a name)."""
    names = [r.path.name for r in runs]
    return [f"{r.path.parent.name}/{r.path.name}" if names.count(r.path.name) > 1 else r.path.name for r in runs]


@dataclass
class Comparison:
    """Runs side by side: their labels, config differences, numbers and curves."""

    runs: list[RunView]

    @property
    def labels(self) -> list[str]:
        return labels(self.runs)

    @property
    def differences(self) -> dict[str, list[Any]]:
        """Config keys (but the description) whose values differ between the runs, with each run's value (None: no such key)."""
        out = {}
        for key in dict.fromkeys(k for r in self.runs for k in r.config if k != "description"):
            values = [r.config.get(key) for r in self.runs]
            if any(v != values[0] for v in values):
                out[key] = values
        return out

    @property
    def same_partition(self) -> bool:
        """Whether every run trained on the same partition (a paired comparison)."""
        return bool(self.runs[0].partition) and len({r.partition for r in self.runs}) == 1

    @cached_property
    def groups(self) -> list[Group]:
        """The runs grouped by method: same algorithm, same values of every varying field but the seed and :data:`PLACEMENT`'s."""
        return group_runs(self.runs, self.labels)

    @property
    def paired(self) -> bool:
        """Whether the groups are paired: the same seeds and budget in each, and one partition per seed across groups."""
        return paired(self.groups)

    @property
    def repeats(self) -> list[Repeat]:
        """The runs not counted: each repeats a counted run of its group (the same config and seed), or is one given twice."""
        return [repeat for group in self.groups for repeat in group.repeats]

    @property
    def budget_differences(self) -> dict[str, list[Any]]:
        """The budget fields (rounds, local epochs, ...; ``compare_groups.BUDGET``) whose values differ between groups, with their values."""
        return budget_differences(self.groups) if len(self.groups) > 1 else {}

    @property
    def method_differences(self) -> dict[str, list[Any]]:
        """:attr:`differences` without the fields that do not define a method (``PLACEMENT``: the seed, threads, device, ...)."""
        return {key: values for key, values in self.differences.items() if key not in PLACEMENT}

    @property
    def metrics(self) -> list[str]:
        """The :data:`METRICS` at least one run has, in that order."""
        return [m for m in METRICS if any(m in r.metrics for r in self.runs)]

    def group_rows(self) -> list[dict[str, Any]]:
        """One flat record per group: label, algorithm, its varying fields, n, finished, rounds (its shortest run), seeds, ``<metric>_mean``/``_sd``."""
        return [g.row(self.metrics) for g in self.groups]

    def run_rows(self) -> list[dict[str, Any]]:
        """One flat record per run: label, group, run directory, status, seed, partition, its metrics and its varying fields."""
        rows = []
        for group in self.groups:
            for label, run in zip(group.run_labels, group.runs, strict=True):
                rows.append(
                    {
                        "label": label,
                        "group": group.label,
                        "algorithm": group.algorithm,
                        **group.setting,
                        "seed": run.config.get("run.seed"),
                        "run_dir": str(run.path),
                        "finished": run.finished,
                        "rounds": run.rounds,
                        "partition": run.partition,
                        **{m: run.metrics.get(m) for m in self.metrics},
                    }
                )
        return rows

    def rows(self, per: str = "group") -> list[dict[str, Any]]:
        if per not in ("group", "run"):
            raise FedpriorError(f"per must be 'group' or 'run', not {per!r}")
        return self.group_rows() if per == "group" else self.run_rows()

    def csv(self, per: str = "group") -> str:
        """The rows (``per`` 'group' or 'run') as CSV text: accuracy as fractions, an empty cell where a value is absent, seeds space-separated."""
        rows = self.rows(per)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: cell(v) for k, v in row.items()})
        return out.getvalue()

    def write_csv(self, path: str | Path, per: str = "group") -> Path:
        """Write :meth:`csv` to ``path`` (atomically); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, self.csv(per))
        return path

    def dataframe(self, per: str = "group"):
        """The rows (``per`` 'group' or 'run') as a pandas DataFrame (pandas is optional: ``.venv/bin/pip install -c requirements.lock pandas``, the lock keeping torch and numpy)."""
        try:
            import pandas as pd
        except ImportError:
            raise FedpriorError(
                "Comparison.dataframe needs pandas, which is not installed: .venv/bin/pip install -c requirements.lock pandas "
                "(without it, Comparison.group_rows() and run_rows() give the same rows as dicts)"
            ) from None
        return pd.DataFrame.from_records(self.rows(per))

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": [{"label": label, **run.to_dict()} for label, run in zip(self.labels, self.runs, strict=True)],
            "differences": self.differences,
            "same_partition": self.same_partition,
            "groups": [
                {**row, "runs": g.run_labels, "curve": {str(k): dict(zip(("mean", "sd", "n"), v, strict=True)) for k, v in g.curve().items()}}
                for g, row in zip(self.groups, self.group_rows(), strict=True)
            ],
            "paired": self.paired,
            "budget_differences": self.budget_differences,
            "repeats": [vars(repeat) for repeat in self.repeats],
            "ignored_fields": sorted(PLACEMENT),
        }

    def plot(self, path: str | Path) -> Path:
        """Each group's mean accuracy curve with a shaded ±sd band, in one PNG at ``path`` (legend outside the axes)."""
        from fedprior.experiments.compare_plot import plot_groups

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        plot_groups(self.groups, path, "test accuracy per round")
        return path


def cell(value: Any) -> Any:
    """A CSV cell: None empty, a list space-separated, anything else as the csv module writes it."""
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(map(str, value))
    return value


def compare_runs(paths: Sequence[str | Path]) -> Comparison:
    """Read the run directories ``paths`` (finished or not) for a side-by-side comparison; a folder of runs (a sweep's or a
    table's ``--out``) stands for the run directories in it."""
    if not paths:
        raise FedpriorError("compare: name at least one run directory")
    return Comparison([read_run(p) for p in run_folders(paths)])


def run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """``paths`` with each folder that is no run directory but holds some (``fedprior run --seeds/--sweep``'s or ``fedprior
    table``'s ``--out``) replaced by them, in the order of their values (lr=0.05 before lr=0.2, seed2 before seed10); other
    paths as they are."""
    out = []
    for path in map(Path, paths):
        holds = path.is_dir() and not (path / "config.toml").exists()
        inner = [p for p in path.iterdir() if (p / "config.toml").is_file()] if holds else []
        out += sorted(inner, key=by_values) or [path]
    return out


def by_values(path: Path) -> list[tuple[str, float]]:
    """A sort key for a folder named ``lr=0.05--seed2``: each ``--`` part as (its text, the number it ends with, else 0)."""
    key = []
    for part in path.name.split("--"):
        match = re.fullmatch(r"(.*?)(\d+(?:\.\d*)?(?:e-?\d+)?)", part)
        key.append((match.group(1), float(match.group(2))) if match else (part, 0.0))
    return key
