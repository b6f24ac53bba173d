"""Runs grouped by method for ``fedprior compare``: seeds folded, mean ± sd per group.

A *group* is the runs whose configs agree on every field that changes what a run computes:
the algorithm and every config field that differs between the compared runs, except
``run.seed`` (the seeds are what a group folds over) and the fields in :data:`PLACEMENT`,
which only say where or how a run executes. Its numbers are the mean and the sample
standard deviation (n - 1) over its runs. Its label is the algorithm and the fields that
vary among that algorithm's runs (``fixmatch num_labeled=250``), not the hyperparameters
that differ only because another algorithm lacks them; its CSV row holds every field.

A group's mean folds runs of one length: a run that recorded fewer rounds than the group's longest (a stopped sweep's
partial run beside finished ones) is left out of its numbers and listed as :class:`Shorter`.

A run given twice, or two runs of one group with the same seed (the same config and seed:
a repeat), count once: the group keeps the finished one with the most rounds (the first
given among equals), and lists the others as :class:`Repeat`, which say whether they gave
the same numbers (the summaries' ``state_sha256`` and ``round_fingerprints``,
:mod:`fedprior.results.fingerprints`). Groups are *paired* only where they ran the
same seeds, each seed on one partition, with the same budget (:data:`BUDGET`, and the
rounds each run recorded).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedprior.results.run_view import RunView

PLACEMENT = frozenset(
    {
        "description",
        "run.seed",
        "run.threads",
        "run.workers",
        "run.concurrent_clients",
        "run.compile",
        "run.start_method",
        "run.device",
        "run.runtime",
        "run.vectorize",
        "run.deterministic",
        "run.cudnn_benchmark",
        "run.mlflow",
        "run.mlflow_experiment",
        "run.wandb",
        "run.wandb_project",
        "data.root",
        "data.download",
        "encoder.download",
        "encoder.cache",
        "encoder.batch_size",
        "federation.wait_for_clients",
    }
)
"""Config fields that do not define a method (the seed, and where or how a run executes): ignored when runs are grouped.

``run.vectorize``, ``run.workers``, ``run.concurrent_clients``, ``run.runtime`` and the like give the same numbers by
design; ``run.deterministic``, ``run.cudnn_benchmark`` and ``run.compile`` change last bits, not the method; ``data.root`` and
``encoder.batch_size`` say where the files are and how many images one forward pass encodes.
"""


BUDGET = ("federation.rounds", "federation.local_epochs", "federation.batch_size", "federation.fraction", "federation.num_clients")
"""Config fields that set how much training a run gets: groups that differ in one are not paired (a budget, not a method, would differ)."""


def mean_sd(values: Sequence[float]) -> tuple[float | None, float | None, int]:
    """``(mean, sample sd with n - 1, n)`` of the values that are not NaN; None for a mean of none, an sd of fewer than two."""
    kept = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not kept:
        return None, None, 0
    # statistics sums exactly: three runs at 0.1 have mean 0.1 and sd 0.0, not 0.10000000000000002 and 1.7e-17
    return statistics.mean(kept), statistics.stdev(kept) if len(kept) > 1 else None, len(kept)


def shown_value(value: Any) -> str:
    """A config value in a group's label: strings as they are, lists and tables as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class Repeat:
    """A run left out of its group's numbers: it repeats another run of the group (the same config and seed), or is that run given twice."""

    label: str
    of: str
    """The label of the run counted instead."""
    seed: Any
    same_numbers: bool | None
    """Whether both gave the same numbers in every round and ended in the same state (their fingerprints); None where one has none
    (it has not finished)."""
    same_folder: bool = False
    """The run directory was named twice."""

    def text(self) -> str:
        if self.same_folder:
            return f"{self.label} is given twice"
        numbers = {True: "the same numbers", False: "other numbers", None: "numbers not compared"}[self.same_numbers]
        return f"{self.label} repeats {self.of} (same config and seed {self.seed}; {numbers})"


@dataclass
class Shorter:
    """A run left out of its group's numbers: it recorded fewer rounds than the group's runs counted (it stopped early)."""

    label: str
    seed: Any
    rounds: int
    counted_rounds: int
    """The rounds every counted run of the group recorded."""
    finished: bool

    def text(self) -> str:
        state = "" if self.finished else "unfinished, "
        return f"{self.label} ({state}{self.rounds} of the {self.counted_rounds} rounds the group's other runs recorded)"


@dataclass
class Group:
    """Runs of one method: the same algorithm and the same values of every config field that varies (seeds folded)."""

    label: str
    """The algorithm, then ``field=value`` for each varying field this group has (short names where unambiguous)."""
    algorithm: str
    setting: dict[str, Any]
    """This group's value of every varying config field but ``algorithm.name`` (None: the group's runs have no such field)."""
    style: int
    """Index of the group's setting among the comparison's settings (the fields that vary within one algorithm): its line style."""
    runs: list[RunView]
    """The runs counted: one per seed."""
    run_labels: list[str]
    repeats: list[Repeat] = field(default_factory=list)
    """Runs of this group not counted: each repeats one of ``runs`` (the same seed)."""
    shorter: list[Shorter] = field(default_factory=list)
    """Runs of this group not counted: they recorded fewer rounds than ``runs`` (a mean folds runs of one length only)."""

    @property
    def seeds(self) -> list[Any]:
        return [r.config.get("run.seed") for r in self.runs]

    def stat(self, metric: str) -> tuple[float | None, float | None, int]:
        """Mean, sample sd and n of a summary metric over the group's runs that have it."""
        return mean_sd([r.metrics[metric] for r in self.runs if r.metrics.get(metric) is not None])

    def curve(self) -> dict[int, tuple[float, float | None, int]]:
        """Test accuracy by round: ``{round: (mean, sd, n)}`` over the group's runs that evaluated that round."""
        rounds = sorted({step for r in self.runs for step in r.curve})
        out = {}
        for step in rounds:
            mean, sd, n = mean_sd([r.curve[step] for r in self.runs if step in r.curve])
            if mean is not None:
                out[step] = (mean, sd, n)
        return out

    def time_curve(self) -> dict[int, tuple[float, float, float | None, int]]:
        """Test accuracy against simulated time: ``{round: (mean simulated seconds, mean accuracy, sd, n)}`` over the group's runs that
        evaluated that round with a system model (each run's clients have their own drawn speeds, so its rounds their own times:
        a round's point is the means of both). {} where no run has simulated time."""
        out = {}
        for step, (mean, sd, _) in self.curve().items():
            times = [r.times[step] for r in self.runs if step in r.times and step in r.curve]
            if times and len(times) == len([r for r in self.runs if step in r.curve]):
                out[step] = (float(sum(times) / len(times)), mean, sd, len(times))
        return out

    def row(self, metrics: Sequence[str]) -> dict[str, Any]:
        """The group as one flat record (CSV, DataFrame, JSON): fractions stay fractions, absent values are None."""
        row: dict[str, Any] = {"group": self.label, "algorithm": self.algorithm, **self.setting}
        row.update(
            n=len(self.runs),
            finished=sum(r.finished for r in self.runs),
            rounds=min(r.rounds for r in self.runs),
            seeds=self.seeds,
        )
        for metric in metrics:
            mean, sd, _ = self.stat(metric)
            row[f"{metric}_mean"], row[f"{metric}_sd"] = mean, sd
        return row


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """Each dotted key's last part, or the whole key where two keys share that part."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (part if last.count(part) == 1 else k) for k, part in zip(keys, last, strict=True)}


def group_runs(runs: Sequence[RunView], labels: Sequence[str]) -> list[Group]:
    """The runs grouped by method, groups in the order their first run was given."""
    keys = [k for k in dict.fromkeys(k for r in runs for k in r.config) if k not in PLACEMENT]
    varying = [k for k in keys if any(r.config.get(k) != runs[0].config.get(k) for r in runs)]
    setting_keys = [k for k in varying if k != "algorithm.name"]
    members: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        key = json.dumps([run.config.get(k) for k in varying], sort_keys=True, default=str)
        members.setdefault(key, []).append(i)
    algorithm = [str(r.config.get("algorithm.name", "?")) for r in runs]
    # The fields that vary among the runs of one algorithm make its settings (line styles);
    # a field that differs only between algorithms (another's hyperparameter) belongs to the method.
    within = [
        k
        for k in setting_keys
        if any(len({json.dumps(runs[i].config.get(k), default=str) for i in range(len(runs)) if algorithm[i] == a}) > 1 for a in set(algorithm))
    ]
    short = short_names(setting_keys)
    settings: dict[str, int] = {}
    groups = []
    for indices in members.values():
        first = runs[indices[0]]
        setting = {k: first.config.get(k) for k in setting_keys}
        # named by the fields that vary among one algorithm's runs: another algorithm's hyperparameters (which
        # differ only because FedAvg has none of FixMatch's) would bury the label; the CSV row keeps every field
        parts = [f"{short[k]}={shown_value(setting[k])}" for k in within if setting[k] is not None]
        style = settings.setdefault(json.dumps([setting[k] for k in within], default=str), len(settings))
        counted, repeats = one_run_per_seed(indices, runs, labels)
        longest = max(runs[i].rounds for i in counted)
        shorter = [Shorter(labels[i], runs[i].config.get("run.seed"), runs[i].rounds, longest, runs[i].finished) for i in counted if runs[i].rounds < longest]
        counted = [i for i in counted if runs[i].rounds == longest]
        groups.append(
            Group(
                label=" ".join([algorithm[indices[0]], *parts]),
                algorithm=algorithm[indices[0]],
                setting=setting,
                style=style,
                runs=[runs[i] for i in counted],
                run_labels=[labels[i] for i in counted],
                repeats=repeats,
                shorter=shorter,
            )
        )
    return groups


def one_run_per_seed(indices: Sequence[int], runs: Sequence[RunView], labels: Sequence[str]) -> tuple[list[int], list[Repeat]]:
    """The runs of one group to count (one per seed: the finished one with the most rounds, the first given among equals), in the
    order given, and the others as repeats of it."""
    by_seed: dict[str, list[int]] = {}
    for i in indices:
        by_seed.setdefault(json.dumps(runs[i].config.get("run.seed"), default=str), []).append(i)
    kept = {seed: min(members, key=lambda i: (not runs[i].finished, -runs[i].rounds, i)) for seed, members in by_seed.items()}
    repeats = [
        Repeat(
            labels[i],
            labels[kept[seed]],
            runs[i].config.get("run.seed"),
            same_numbers(runs[i], runs[kept[seed]]),
            runs[i].path.resolve() == runs[kept[seed]].path.resolve(),
        )
        for seed, members in by_seed.items()
        for i in members
        if i != kept[seed]
    ]
    return sorted(kept.values()), repeats


def same_numbers(a: RunView, b: RunView) -> bool | None:
    """Whether two finished runs gave the same numbers: the same rounds' fingerprints and the same final state; None if either has none."""
    if not (a.fingerprints and b.fingerprints):
        return None
    return a.fingerprints == b.fingerprints


def budget_differences(groups: Sequence[Group]) -> dict[str, list[Any]]:
    """The :data:`BUDGET` fields whose values differ between the groups' runs, each with its distinct values in the order met,
    or else ``recorded_rounds`` where the runs recorded different numbers of rounds (one has not finished); empty where every
    run had the same budget."""
    runs = [r for g in groups for r in g.runs]
    values = {key: [r.config.get(key) for r in runs] for key in BUDGET}
    distinct = {key: list({json.dumps(v, default=str): v for v in vs}.values()) for key, vs in values.items()}
    out = {key: vs for key, vs in distinct.items() if len(vs) > 1}
    recorded: list[Any] = list(dict.fromkeys(r.rounds for r in runs))
    if len(recorded) > 1 and "federation.rounds" not in out:
        out["recorded_rounds"] = recorded
    return out


def paired(groups: Sequence[Group]) -> bool:
    """Whether the groups are paired: each ran the same seeds with the same budget, and the runs of one seed all trained on one partition."""
    if len(groups) < 2 or any(sorted(map(str, g.seeds)) != sorted(map(str, groups[0].seeds)) for g in groups):
        return False
    if budget_differences(groups):
        return False
    by_seed: dict[str, set[str]] = {}
    for group in groups:
        for run in group.runs:
            by_seed.setdefault(str(run.config.get("run.seed")), set()).add(run.partition)
    return all(len(parts) == 1 and "" not in parts for parts in by_seed.values())
