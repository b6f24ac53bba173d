"""Runs side by side (``fedprior compare``): grouped by method (seeds folded), mean ± sd of accuracy, F1, bytes sent, wall time, curves.

Each run folder is read by :mod:`fedprior.results.run_view` (a finished run from its ``result.json``,
an unfinished one from its ``metrics.jsonl``, marked as such). Runs are grouped by method
(:mod:`fedprior.results.compare_groups`); each group's rows, per run or per group, go to CSV
or a pandas DataFrame with accuracy as fractions.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from fedprior.atomic import write_text
from fedprior.errors import FedpriorError
from fedprior.results.compare_groups import PLACEMENT, Group, Repeat, Shorter, budget_differences, group_runs, paired
from fedprior.results.paired import paired as paired_stats
from fedprior.results.paired import verdict
from fedprior.results.run_view import METRICS, RunView, read_run

DIFFERENCE_METRICS = ("final_accuracy", "best_accuracy")
"""The metrics of which ``compare`` gives paired differences between groups."""


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

    def paired_differences(self, metrics: Sequence[str] = DIFFERENCE_METRICS) -> list[dict[str, Any]]:
        """Where the groups are paired (:attr:`paired`): each group's difference from the first group, seed by seed, on each of
        ``metrics`` the runs have: ``{"metric", "group", "minus", "n", "mean", "sd", "low", "high", "verdict"}``, the mean,
        sample sd and 95% t interval of d_s = group_s - first_s (fractions, as the metrics), and holds (interval above 0),
        reversed (below 0) or not resolved (:mod:`fedprior.results.paired`). Empty where the groups are not paired."""
        if not self.paired:
            return []
        first, out = self.groups[0], []
        for metric in (m for m in metrics if m in self.metrics):
            base = {str(r.config.get("run.seed")): r.metrics.get(metric) for r in first.runs}
            for group in self.groups[1:]:
                pairs = [(r.metrics.get(metric), base[str(r.config.get("run.seed"))]) for r in group.runs]
                differences = [a - b for a, b in pairs if a is not None and b is not None]
                if len(differences) < len(pairs):  # a run without the metric: no pairing for it
                    continue
                stats = paired_stats(differences)
                out.append({"metric": metric, "group": group.label, "minus": first.label, **asdict(stats), "verdict": verdict(stats)})
        return out

    @property
    def repeats(self) -> list[Repeat]:
        """The runs not counted: each repeats a counted run of its group (the same config and seed), or is one given twice."""
        return [repeat for group in self.groups for repeat in group.repeats]

    @property
    def shorter(self) -> list[Shorter]:
        """The runs not counted because they recorded fewer rounds than their group's other runs (they stopped early)."""
        return [run for group in self.groups for run in group.shorter]

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
            "paired_differences": self.paired_differences(),
            "budget_differences": self.budget_differences,
            "repeats": [vars(repeat) for repeat in self.repeats],
            "shorter": [vars(run) for run in self.shorter],
            "ignored_fields": sorted(PLACEMENT),
        }

    def plot(self, path: str | Path, x: str = "round") -> Path:
        """Each group's mean accuracy curve with a shaded ±sd band, in one PNG at ``path`` (legend outside the axes); against rounds,
        or with ``x = 'time'`` against simulated seconds (runs with a system model, ``[system]``)."""
        from fedprior.results.compare_plot import plot_groups

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        plot_groups(self.groups, path, "test accuracy against simulated time" if x == "time" else "test accuracy per round", x)
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
