"""fedprior's Python API: what the command line does, as functions that return typed results.

Everything here is exported from :mod:`fedprior` (``import fedprior; fedprior.run(...)``) and
shown in ``docs/python-api.md``, whose examples the test suite runs:

- :func:`load_config` a preset or TOML file plus overrides -> :class:`Config`;
- :func:`run` it (in this process or on Flower), :func:`resume` an interrupted run (a finished one is returned as it is),
  :func:`open_run` a finished one -> :class:`RunResult` (summary, accuracy history, per-round records, folder);
- :func:`compare` run directories, grouped by method with mean ± sd over seeds (``fedprior compare``);
- :func:`build_partition` a dataset's partition and its statistics -> :class:`PartitionResult`;
- :func:`list_algorithms`, :func:`list_presets`, :func:`list_datasets`, :func:`list_tables`;
- :func:`reproduce_table` a paper's table: its cells, controls and findings -> :class:`TableResult` (``fedprior table``);
- :func:`register_algorithm` a method written in user code, runnable by name like the shipped ones.

Bad input raises :class:`~fedprior.errors.ConfigError` (a :class:`~fedprior.errors.FedpriorError`)
with one line naming the field and what it accepts, before any long work.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedprior.errors import ConfigError
from fedprior.reproduce.pipeline import reproduce_table as reproduce_table
from fedprior.reproduce.table_result import TableResult as TableResult

if TYPE_CHECKING:
    from fedprior.algorithms.base import Algorithm
    from fedprior.algorithms.registry import AlgorithmSpec
    from fedprior.experiments.config import ExperimentConfig
    from fedprior.results.compare import Comparison
    from fedprior.runtime.sampling import ClientSampler

Overrides = Mapping[str, Any] | Sequence[str] | None
"""``{"section.key": value}`` (Python values; ``{"section": {...}}`` replaces a whole section, whose
fields not given take their defaults), or
``["section.key=value", ...]`` as on the command line."""


@dataclass(frozen=True)
class Config:
    """A named, checked experiment config: what ``fedprior run NAME --set ...`` would run."""

    name: str
    settings: ExperimentConfig
    """The eight sections (``settings.federation.rounds``, ``settings.privacy.dp``, ``settings.system.deadline``, ...); every field is documented by ``fedprior presets --fields``."""

    def override(self, overrides: Overrides) -> Config:
        """A copy with some fields changed (checked again, like the original)."""
        from fedprior.experiments.config import validate_config

        return Config(self.name, validate_config(_apply(self.settings.to_dict(), overrides)))

    def to_toml(self) -> str:
        """The config as TOML, every field (a file ``fedprior run FILE.toml`` and :func:`load_config` accept as this config)."""
        return self.settings.to_toml()


SECTION_EXAMPLES: dict[str, tuple[str, Any]] = {
    "data": ("dataset", "digits"),
    "partition": ("scheme", "iid"),
    "encoder": ("name", "none"),
    "algorithm": ("name", "fedavg"),
    "federation": ("rounds", 5),
    "run": ("seed", 1),
}
"""A field of each section and a value, to show the shape of a whole-section override in errors."""


def _apply(raw: dict[str, Any], overrides: Overrides) -> dict[str, Any]:
    from fedprior.experiments.config import SECTIONS, apply_overrides

    if overrides is None:
        return raw
    if isinstance(overrides, str) or not isinstance(overrides, (Mapping, Sequence)):
        raise ConfigError(f"overrides: expected a mapping {{'section.key': value}} or a list of 'section.key=value', got {overrides!r}")
    if not isinstance(overrides, Mapping):
        return apply_overrides(raw, list(overrides), api=True)
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    for key, value in overrides.items():
        section, _, name = str(key).partition(".")
        if section in SECTIONS and not name:  # a whole section, e.g. {"algorithm": {...}}
            if not isinstance(value, Mapping):
                field, example = SECTION_EXAMPLES[section]
                raise ConfigError(
                    f"overrides[{key!r}]: expected a table of fields such as {{{field!r}: {example!r}}} "
                    f"(or use {f'{section}.{field}'!r}: {example!r}), got {value!r}"
                )
            raw[section] = dict(value)
            continue
        if section not in SECTIONS or not name or "." in name:
            raise ConfigError(f"overrides[{key!r}]: the key must be section.key with a section among {', '.join(SECTIONS)}")
        raw.setdefault(section, {})[name] = value
    return raw


def load_config(source: str | Path | Config, overrides: Overrides = None) -> Config:
    """A preset name (``list_presets()``), a TOML file, or a :class:`Config`, with ``overrides`` applied and checked."""
    from fedprior.experiments.config import read_toml, validate_config

    if isinstance(source, Config):
        return source.override(overrides)
    name, raw = read_toml(str(source))
    return Config(name, validate_config(_apply(raw, overrides)))


@dataclass(frozen=True)
class RunResult:
    """A run's outcome: its summary (``fedprior run --json``), its per-round records and its folder.

    ``history`` is the summary's ``history``: the test accuracies (fractions) of the evaluated
    rounds, whose steps are ``evaluated_rounds``; ``records`` are the rounds' full records.
    """

    run_dir: Path
    summary: dict[str, Any]
    """final/best/initial accuracy (and macro-F1 where evaluated), bytes sent, wall time, ... (``result.json``)."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """One record per round (``metrics.jsonl``): accuracy, loss, macro_f1, clients, bytes (the round's totals), seconds, ..."""

    @property
    def final_accuracy(self) -> float:
        return self.summary["final_accuracy"]

    @property
    def best_accuracy(self) -> float:
        return self.summary["best_accuracy"]

    @property
    def history(self) -> list[float]:
        """Test accuracy (a fraction) after each evaluated round, in order: ``summary["history"]``."""
        return self.summary["history"]

    @property
    def evaluated_rounds(self) -> list[int]:
        """The round steps ``history`` was measured at: ``summary["evaluated_rounds"]``."""
        return self.summary["evaluated_rounds"]

    @property
    def curve(self) -> dict[int, float]:
        """Test accuracy by round: round 0 (the initial model) and every evaluated round."""
        from fedprior.results.report import accuracy_curve

        return accuracy_curve(self.summary)

    @classmethod
    def load(cls, run_dir: str | Path) -> RunResult:
        from fedprior.errors import FedpriorError
        from fedprior.results.run_dir import RunDir
        from fedprior.results.run_view import read_metrics

        run = RunDir.existing(Path(run_dir))
        if not run.result.is_file():
            raise FedpriorError(f"{run.path} has not finished (no result.json); resume it with fedprior.resume({str(run.path)!r})")
        return cls(run.path, json.loads(run.result.read_text()), read_metrics(run.metrics))


RoundCallback = Callable[[dict[str, Any]], None]


def run(
    config: str | Path | Config,
    overrides: Overrides = None,
    *,
    run_dir: str | Path | None = None,
    runtime: str | None = None,
    on_round: RoundCallback | None = None,
) -> RunResult:
    """Run an experiment into a run directory (default ``runs/NAME-TIMESTAMP``) and return its result.

    ``runtime``: "local" (this process, the default), "flower-sim" (Flower's simulation
    engine) or "flower-local" (a SuperLink and SuperNodes on this machine); it sets
    ``run.runtime``. ``on_round(record)`` is called after every round (round 0: the
    initial model) with the record ``metrics.jsonl`` gets.
    """
    from fedprior.experiments.runner import start

    cfg = load_config(config, overrides)
    if runtime is not None:
        cfg = cfg.override({"run.runtime": runtime})
    _check_runtime(cfg)
    summary = start(cfg.name, cfg.settings, Path(run_dir) if run_dir is not None else None, on_round=on_round)
    return RunResult.load(summary["run_dir"])


def resume(run_dir: str | Path, *, on_round: RoundCallback | None = None) -> RunResult:
    """Continue an interrupted run from its last checkpoint; it ends with the numbers of an uninterrupted run.

    A finished run (every round of its config.toml trained, result.json written) is not
    trained again: its result is returned as it is, and nothing in its folder changes.
    Raise ``federation.rounds`` in its config.toml to train it further.
    """
    from fedprior.experiments.runner import resume as resume_run

    resume_run(Path(run_dir), on_round=on_round)
    return RunResult.load(run_dir)


def open_run(run_dir: str | Path) -> RunResult:
    """The result of a finished run directory."""
    return RunResult.load(run_dir)


def compare(run_dirs: Sequence[str | Path]) -> Comparison:
    """Run directories side by side: ``.differences`` (config), ``.runs`` (numbers, curves), ``.groups`` (by method, seeds folded: mean ± sd),
    ``.group_rows()`` / ``.run_rows()``, ``.write_csv(path)``, ``.dataframe()`` (needs pandas), ``.plot(path)``, ``.to_dict()``."""
    from fedprior.results.compare import compare_runs

    return compare_runs(list(run_dirs))


def _check_runtime(cfg: Config) -> None:
    """An algorithm registered from user code lives in this process only: the Flower runtimes' nodes would not know it."""
    from fedprior.experiments.runner import check_runtime_knows_algorithm

    check_runtime_knows_algorithm(cfg.settings)


@dataclass(frozen=True)
class PartitionResult:
    """A partition of a dataset's training set over clients, with its statistics (``fedprior partition``)."""

    dataset: str
    scheme: str
    parts: list[np.ndarray]
    """Client i's training-set indices."""
    counts: np.ndarray
    """The (clients, classes) matrix of sample counts."""
    statistics: dict[str, Any]
    """Sizes, classes per client, beta_cib and beta_hetero (the MFCL paper's Appendix B), ... (see ``partition.statistics.describe``)."""
    class_names: tuple[str, ...] = ()
    client_domains: np.ndarray | None = None
    """With ``domains``: client i's domain, an index into ``domain_names`` (``partition.domains``, docs/feature-shift.md)."""
    domain_names: tuple[str, ...] = ()

    def plot(self, path: str | Path, *, view: str = "counts", scale: str = "auto", order: str = "auto") -> Path:
        """The clients x classes heatmap as a PNG, each client's size beside it.

        ``view``: counts or percent (each client's class shares); ``scale``: auto, linear or
        log (auto: log for counts spanning a factor of 10 or more); ``order``: auto, client or
        clustered (clients grouped by their largest class; auto: for more than 100 clients).
        """
        from fedprior.partition.plot import plot_heatmap

        return plot_heatmap(
            self.counts,
            path,
            class_names=self.class_names or None,
            title=f"{self.dataset}, {self.scheme}",
            view=view,  # type: ignore[arg-type]  # checked by plot_heatmap, with a message naming the accepted values
            scale=scale,  # type: ignore[arg-type]
            order=order,  # type: ignore[arg-type]
            client_domains=None if self.client_domains is None else self.client_domains.tolist(),
            domain_names=self.domain_names,
        )


def build_partition(
    dataset: str = "fashion-mnist",
    scheme: str = "iid",
    *,
    num_clients: int = 100,
    seed: int = 0,
    shards: int = 2,
    alpha: float = 0.5,
    min_size: int = 0,
    window: int = 2,
    balance: bool = False,
    sizes: str = "power-law",
    size_ratio: float = 10.0,
    root: str | Path | None = None,
    download: bool = False,
    flwr_kwargs: dict[str, Any] | None = None,
    domains: str = "",
) -> PartitionResult:
    """Split ``dataset``'s training labels over ``num_clients`` clients by ``scheme`` (the config's partition fields; ``flwr_kwargs``:
    the other arguments of a ``flwr:NAME`` scheme's flwr-datasets partitioner; ``domains``: ``partition.domains``, a feature-shift
    federation whose clients each hold one domain's images, split inside the domain by ``scheme`` as a run splits them)."""
    from fedprior.data import load_dataset
    from fedprior.experiments.domains import with_domains
    from fedprior.partition.config import PartitionConfig
    from fedprior.partition.domains import client_domains
    from fedprior.partition.factory import domain_split, make_partitioner
    from fedprior.partition.statistics import class_counts, describe

    # unchecked here, as before: each partitioner checks the parameters it uses, naming them
    fields = PartitionConfig.model_construct(
        scheme=scheme,
        shards=shards,
        alpha=alpha,
        min_size=min_size,
        window=window,
        balance=balance,
        sizes=sizes,  # type: ignore[arg-type]
        size_ratio=size_ratio,
        flwr_kwargs=dict(flwr_kwargs or {}),
        domains=domains,
    )
    data = with_domains(load_dataset(dataset, root, download), domains, images=False)  # the domains of the images, no image shifted
    if data.train_domains is None or not domains:
        split = make_partitioner(fields, num_clients, seed).partition(data.train_labels)
        owners = None
    else:
        count = len(data.domain_names)
        split = domain_split(fields, data.train_labels, data.train_domains, count, num_clients, seed)
        owners = client_domains(num_clients, count)
    parts = [np.asarray(p) for p in split.roles["train"]]
    counts = class_counts(data.train_labels, parts, data.num_classes)
    names = tuple(data.domain_names) if owners is not None else ()
    return PartitionResult(dataset, scheme, parts, counts, describe(counts, data.class_names), tuple(data.class_names), owners, names)


def list_algorithms() -> dict[str, str]:
    """Algorithm name -> its one-line summary (the shipped ones and any registered here)."""
    from fedprior.algorithms.registry import registered

    return {name: spec.summary for name, spec in registered().items()}


def list_presets() -> dict[str, str]:
    """Shipped preset name -> its description."""
    from fedprior.experiments.config import list_presets as presets

    return presets()


def list_datasets() -> dict[str, str]:
    """Dataset name -> its description (``fedprior datasets`` also says which are on this machine)."""
    from fedprior.data.registry import DATASETS

    return {name: spec.description for name, spec in DATASETS.items()}


def list_tables() -> dict[str, str]:
    """Paper table name -> its title (:func:`reproduce_table` or ``fedprior table NAME`` runs one)."""
    from fedprior.papers import all_tables

    return {name: table.title for name, table in all_tables().items()}


def register_algorithm(name: str, factory: Callable[..., Algorithm], *, centralized: bool = False, replace: bool = False) -> AlgorithmSpec:
    """Make ``factory`` runnable as ``algorithm.name = name`` in this process, like a shipped algorithm.

    ``factory(task, runtime, *, hyperparameters...) -> Algorithm``: ``runtime`` is the run's
    :class:`~fedprior.algorithms.base.Runtime` (local epochs, batch size, ``run.device`` resolved,
    precision, compile); the algorithm builds its models and the tensors it computes with on
    ``runtime.device`` (States and Replies stay on the CPU). Keyword-only hyperparameters with an
    annotation and a default become the ``[algorithm]`` config fields, checked like the shipped
    ones'. ``centralized``: train on the pooled data as one client. A factory without
    ``runtime`` (nor, written before it, ``device``) is refused with a ConfigError saying what to add.
    """
    from fedprior.algorithms.registry import AlgorithmSpec
    from fedprior.algorithms.registry import register_algorithm as register

    return register(AlgorithmSpec(name, factory, centralized=centralized), replace=replace)


def register_sampler(name: str, sampler: ClientSampler, *, replace: bool = False) -> ClientSampler:
    """Make ``sampler`` choose the clients of runs with ``federation.sampler = name``, in this process.

    ``sampler.select(draw) -> client ids``: ``draw.count`` distinct ids of ``range(draw.num_clients)``, drawn from
    ``draw.rng()`` (the round's stream of the run seed) so the same config and seed choose the same clients;
    ``draw.sizes`` are the clients' training examples and ``draw.losses(ids)`` the global model's loss on those
    clients (:mod:`fedprior.runtime.sampling`, docs/runs.md "Client sampling"). Register it in a module named by
    ``--import`` or ``run.imports``, so that ``fedprior resume`` registers it again.
    """
    from fedprior.runtime.sampling import register_sampler as register

    return register(name, sampler, replace=replace)
