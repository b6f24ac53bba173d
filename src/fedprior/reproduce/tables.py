"""Papers' tables as runnable grids: every cell is a preset plus overrides, beside the paper's number.

``fedprior table NAME`` runs every cell in the paper's setting (the user's real data
and encoder); ``--embedded`` runs the same grid offline on an embedded dataset
through the offline stand-in encoder, keeping the columns whose setting can be
reproduced there, named by their setting only (the paper's numbers stay beside ours
for reference: the data and the encoder differ).

Each table also declares, before any run, the paper's qualitative **claims** it tests
(:class:`Claim`: "row A > row B on metric M in column C", quoting the paper) and its
**controls**: rows that bound what any method reaches in the setting, and the margin
between them under which the table can tell methods apart (:class:`Control`), or a number
measured on the setting itself that must reach a floor (:class:`MeasuredControl`, e.g. how
much of an image FedDB's strong views leave). Each control names what it **gates**
(``gates``: rows, or claims by name): the claims its question concerns, which a failure
withholds a verdict from; the others keep theirs. A claim or control naming a row, column,
claim or metric the table does not have is refused when the table is defined (at import).
:mod:`fedprior.reproduce.findings` evaluates them on a run's cells and measurements
(:func:`measure_controls`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedprior.errors import ConfigError
from fedprior.experiments.cell import Cell

if TYPE_CHECKING:
    from fedprior.experiments.config import ExperimentConfig


@dataclass(frozen=True)
class Column:
    dataset: str
    setting: str
    overrides: tuple[str, ...]
    embedded: bool = True
    """Whether the column is part of the embedded grid (one column per distinct setting)."""
    embedded_overrides: tuple[str, ...] | None = None
    """The column's overrides in the embedded grid, where the paper's cannot apply (e.g. a 100-class scenario on 10 classes)."""
    embedded_setting: str = ""
    """The column's name in the embedded grid when ``embedded_overrides`` change what it is."""
    real: tuple[str, ...] = ()
    """Overrides for the paper's setting only (e.g. its number of clients and rounds on that dataset)."""

    @property
    def label(self) -> str:
        """The paper's column name, e.g. 'CIFAR-10 s=2'."""
        return f"{self.dataset} {self.setting}".strip()

    def in_setting(self, embedded: bool) -> tuple[str, tuple[str, ...]]:
        """(name, overrides) of the column in the embedded grid or the paper's."""
        if embedded and self.embedded_overrides is not None:
            return self.embedded_setting or self.setting, self.embedded_overrides
        return (self.setting if embedded else self.label), self.overrides


@dataclass(frozen=True)
class Row:
    label: str
    preset: str
    overrides: tuple[str, ...] = ()
    real: tuple[str, ...] = ()
    """Overrides of the paper's setting for this row only (e.g. the full-size network of its algorithm)."""
    embedded: bool = True
    """Whether the row runs in the embedded grid (False: it needs something only the paper's setting has)."""
    paper_setting: bool = True
    """Whether the row runs in the paper's setting (False: a control defined for the embedded grid only)."""
    central: bool = False
    """A central control: the row's cell runs on one client holding every image of the column's federation, with the
    federation's budget (:func:`central_overrides`), after every other override (``--set`` included)."""
    defining: tuple[str, ...] = ()
    """Overrides that make the row what it is, applied after ``--set`` so that no table-wide override undoes them
    (an untrained network's zero rounds: ``--set federation.rounds=30`` must not train it)."""


@dataclass(frozen=True)
class Claim:
    """A qualitative claim of the paper, tested on a table's cells: ``better`` beats ``worse`` on ``metric`` in ``column``.

    Tested on the paired differences over seeds (``better - worse`` for seed s of both rows;
    ``worse - better`` when ``higher_is_better`` is False, e.g. bits sent), see
    :mod:`fedprior.reproduce.findings`.
    """

    name: str
    """What is claimed, e.g. 'FST-CBDG > FedAvg at s=2'."""
    better: str
    """The row label expected to win."""
    worse: str
    """The row label expected to lose."""
    column: str
    """A column's label in the paper ('CIFAR-10 s=2') or its name in the embedded grid ('s=2')."""
    metric: str | None = None
    """One of the table's ``metrics`` (None: its first, the paper's metric)."""
    source: str = ""
    """The paper's sentence or table cells the claim is taken from."""
    higher_is_better: bool = True
    """False for a cost (bits, seconds): then ``better`` is expected to have the lower value."""
    gap: float | None = None
    """The paper's difference for this claim (points, positive), what the seeds are planned to detect
    (:mod:`fedprior.results.power`); None: the difference of the paper's printed numbers of the two rows in the column."""


@dataclass(frozen=True)
class Control:
    """A condition on two control rows under which a table can tell methods apart, checked in every column.

    Informative where the mean (over seeds) of ``above - below`` on ``metric`` is at least ``margin``.
    """

    above: str
    """The row that bounds from above (a centralized probe, all labels, central learning, a trained network)."""
    below: str
    """The row it must clear (zero-shot, labeled-only, FedAvg, the untrained network)."""
    margin: float
    """Points (the metric's unit) by which ``above`` must exceed ``below``."""
    metric: str | None = None
    """One of the table's ``metrics`` (None: its first)."""
    note: str = ""
    """Why this condition (and any caveat, e.g. a row that stands in for a missing one)."""
    settled_within: float | None = None
    """Also: ``above`` has converged, the mean over seeds of ``|late_change|`` (points its accuracy moved over the
    last 10% of rounds, ``runner.late_change``) below this (None: not checked). Needs ``late_change`` among the metrics."""
    gates: tuple[str, ...] = ()
    """The rows (labels) or claims (names) whose claims this control concerns: where it fails, those claims, and only
    those, read 'setting not informative'. Chosen by the question the control answers, not by the rows it compares
    (a central FixMatch control gates the federated semi-supervised rows); every control names at least one."""

    @property
    def condition(self) -> str:
        settled = "" if self.settled_within is None else f", and converged (last 10% of rounds move it less than {self.settled_within:g} points)"
        on = "" if self.metric is None else f" on {self.metric}"  # a control on another metric than the table's first names it
        return f"{self.above} at least {self.margin:g} points above {self.below}{on}{settled}"


@dataclass(frozen=True)
class MeasuredControl:
    """A condition on a column's setting itself rather than on two rows' cells: a number measured there must reach a floor.

    ``measure(name, config)`` gets the config of ``row``'s cell in the column (seed 0, the
    run's ``--set`` included: its data, network and augmentation) and returns (value, what it
    measured); the column is informative where the value is at least ``at_least``. The table
    command measures it once per column, beside the cells, whether or not ``row`` runs: it
    must be cheap (seconds to a few minutes), and it trains nothing a cell trains.
    """

    condition: str
    """What must hold, e.g. 'a model trained on clean images keeps at least 60% on the strong views'."""
    row: str
    """The row whose cell config is measured (a row that uses what is measured, e.g. the strong views)."""
    measure: Callable[[str, ExperimentConfig], tuple[float, str]]
    """(preset name, the cell's config) -> (value, a line saying what was measured)."""
    at_least: float
    """The floor, in the value's unit."""
    note: str = ""
    """Why this condition."""
    gates: tuple[str, ...] = ()
    """The rows (labels) or claims (names) whose claims this control concerns, as :attr:`Control.gates`."""


@dataclass(frozen=True)
class PaperTable:
    name: str
    title: str
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    paper: dict[tuple[str, str], float] = field(default_factory=dict)
    """(row label, column label) -> the paper's number (%); missing cells were not reported."""
    real: tuple[str, ...] = ()
    """Overrides of the paper's setting (dataset-independent), e.g. the encoder."""
    embedded: tuple[str, ...] = ()
    """Overrides of the embedded setting (dataset and encoder)."""
    real_datasets: dict[str, str] = field(default_factory=dict)
    """Column dataset label -> fedprior dataset name, for the paper's setting."""
    metrics: tuple[str, ...] = ("final_accuracy",)
    """Run-summary keys reported per cell (fractions, shown as %); the first is the paper's metric
    (``ours``), e.g. ("best_accuracy", "final_accuracy") for FedDB or ("final_accuracy", "final_macro_f1") for FedBM."""
    paper_metrics: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """(row label, column label, metric) -> the paper's number for a metric other than the first (e.g. its F1)."""
    embedded_note: str = ""
    """What the embedded setting is, next to what the paper's numbers are (printed by ``fedprior table --embedded``)."""
    scales: dict[str, float] = field(default_factory=dict)
    """Factor from a summary value to the table's unit, by metric (default 100: fractions shown as %)."""
    derived: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Metrics computed from a cell's run summary, added to it before the table reads its metrics."""
    preset_overrides: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(row preset, column label) -> overrides in the paper's setting for the rows of that preset, before the row's own
    (the authors' per-dataset settings of their method, e.g. FedBM's temperature on OCT-C8 at beta 0.05)."""
    claims: tuple[Claim, ...] = ()
    """The paper's qualitative claims this table tests, declared before any run."""
    controls: tuple[Control | MeasuredControl, ...] = ()
    """The conditions under which the table is informative (none: nothing bounds it, e.g. bits sent)."""

    def __post_init__(self) -> None:
        """Refuse claims and controls that name a row, column or metric the table does not have."""
        labels = [r.label for r in self.rows]
        for claim in self.claims:
            where = f"{self.name}: claim {claim.name!r}"
            self._check_rows(where, (claim.better, claim.worse), labels)
            if claim.better == claim.worse:
                raise ValueError(f"{where}: compares {claim.better!r} with itself")
            if self.find_column(claim.column) is None:
                raise ValueError(f"{where}: unknown column {claim.column!r}; accepted: {', '.join(self.column_names())}")
            self._check_metric(where, claim.metric)
        claim_names = [claim.name for claim in self.claims]
        for control in self.controls:
            where = f"{self.name}: control {control.condition!r}"
            if not control.gates:
                raise ValueError(f"{where}: gates no row or claim; name in gates the rows or claims whose verdicts it decides")
            unknown = [g for g in control.gates if g not in labels and g not in claim_names]
            if unknown:
                raise ValueError(
                    f"{where}: gates unknown row(s) or claim(s) {', '.join(map(repr, unknown))}; accepted: rows {', '.join(labels)}; claims {', '.join(claim_names)}"
                )
            if isinstance(control, MeasuredControl):
                self._check_rows(where, (control.row,), labels)
                continue
            self._check_rows(where, (control.above, control.below), labels)
            self._check_metric(where, control.metric)
            if control.settled_within is not None:
                self._check_metric(where, "late_change")

    @staticmethod
    def _check_rows(where: str, names: tuple[str, ...], labels: list[str]) -> None:
        unknown = [n for n in names if n not in labels]
        if unknown:
            raise ValueError(f"{where}: unknown row(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(labels)}")

    def _check_metric(self, where: str, metric: str | None) -> None:
        if metric is not None and metric not in self.metrics:
            raise ValueError(f"{where}: unknown metric {metric!r}; accepted: {', '.join(self.metrics)}")

    def gating(self, claim: Claim) -> list[Control | MeasuredControl]:
        """The controls that gate ``claim``: those naming it, or one of its two rows, in ``gates``."""
        return [c for c in self.controls if {claim.name, claim.better, claim.worse} & set(c.gates)]

    def column_names(self) -> list[str]:
        """Every name a claim may give a column by: the paper's labels, then the embedded grid's names."""
        embedded = [c.in_setting(True)[0] for c in self.columns if c.embedded]
        return list(dict.fromkeys([*(c.label for c in self.columns), *embedded]))

    def find_column(self, name: str) -> Column | None:
        """The column whose paper label is ``name``, else the one embedded column named ``name`` in the embedded grid."""
        for column in self.columns:
            if column.label == name:
                return column
        embedded = [c for c in self.columns if c.embedded and c.in_setting(True)[0] == name]
        return embedded[0] if len(embedded) == 1 else None

    def column_in_setting(self, name: str, embedded: bool) -> str | None:
        """What the grid of the setting calls the column ``name`` (a claim's), or None if that grid has no such column."""
        column = self.find_column(name)
        if column is None or (embedded and not column.embedded):
            return None
        return column.in_setting(embedded)[0]


def select_rows(table: PaperTable, rows: list[str] | None) -> tuple[Row, ...]:
    """The table's rows (``rows`` None), or those named in ``rows`` (ConfigError listing the accepted labels otherwise).

    An empty selection (``--rows ""``, e.g. an empty shell variable) is an error, not the whole grid.
    """
    if rows is None:
        return table.rows
    labels = [r.label for r in table.rows]
    if not rows:
        raise ConfigError(f"--rows: no row named (got an empty list); accepted: {', '.join(labels)} (leave --rows out to run them all)")
    unknown = [r for r in rows if r not in labels]
    if unknown:
        raise ConfigError(f"--rows: unknown row(s) {', '.join(map(repr, unknown))} of {table.name}; accepted: {', '.join(labels)}")
    return tuple(r for r in table.rows if r.label in rows)


def cells(table: PaperTable, embedded: bool, extra: list[str] | None = None, rows: list[str] | None = None, columns: list[str] | None = None) -> list[Cell]:
    """The cells to run, in row-major order, with every override resolved (only ``rows`` and ``columns`` if given).

    ``rows``/``columns`` None: all of them; an empty list is an error (ConfigError naming the option).
    """
    out = []
    chosen = [c for c in table.columns if not (embedded and not c.embedded)]
    names = [c.in_setting(embedded)[0] for c in chosen]
    if columns is not None and not columns:
        raise ConfigError(f"--columns: no column named (got an empty list); accepted: {', '.join(names)} (leave --columns out to run them all)")
    unknown = [c for c in columns or [] if c not in names]
    if unknown:
        raise ConfigError(f"--columns: unknown column(s) {', '.join(map(repr, unknown))} of {table.name}; accepted: {', '.join(names)}")
    selected_rows = select_rows(table, rows)
    for column, name in zip(chosen, names, strict=True):
        if columns is not None and name not in columns:
            continue
        setting = list(table.embedded) if embedded else [*table.real, f"data.dataset={table.real_datasets[column.dataset]}", *column.real]
        _, column_overrides = column.in_setting(embedded)
        for row in selected_rows:
            if (embedded and not row.embedded) or (not embedded and not row.paper_setting):
                continue
            tuned = () if embedded else table.preset_overrides.get((row.preset, column.label), ())
            overrides = [*setting, *column_overrides, *tuned, *row.overrides, *([] if embedded else row.real), *(extra or []), *row.defining]
            if row.central:
                overrides += central_overrides(row.preset, overrides)
            out.append(
                Cell(
                    row=row.label,
                    column=name,
                    preset=row.preset,
                    overrides=overrides,
                    paper=table.paper.get((row.label, column.label)),
                    paper_metrics={
                        m: table.paper_metrics[(row.label, column.label, m)] for m in table.metrics[1:] if (row.label, column.label, m) in table.paper_metrics
                    },
                )
            )
    order = {r.label: i for i, r in enumerate(table.rows)}
    return sorted(out, key=lambda c: order[c.row])


def central_overrides(preset: str, overrides: list[str]) -> list[str]:
    """The overrides that turn a federated cell into its central control, with the same budget.

    One client holds every image the federation's clients hold (``federation.num_clients = 1``, sampled every
    round), and the rounds shrink by the federation's participation (``rounds x fraction``, at least 1): the
    central client then processes as many images, as many times, as the federation's sampled clients together
    (a round of one client holding everything costs ``1 / fraction`` federated rounds). A cosine decay over
    ``algorithm.lr_decay_rounds`` and the test cadence ``federation.evaluate_every`` shrink by the same factor. A named
    ``partition.scenario`` (MFCL's, defined for its number of clients) is cleared.
    """
    from fedprior.experiments.config import load_config

    _, config = load_config(preset, overrides)
    federation, scale = config.federation, config.federation.fraction

    def shrink(value: int) -> int:
        return max(1, round(value * scale))

    out = ["federation.num_clients=1", "federation.fraction=1.0", f"federation.rounds={shrink(federation.rounds)}"]
    if config.partition.scenario:  # a named scenario fixes its number of clients: one client holds every image anyway
        out += ["partition.scenario=", "partition.scheme=iid"]
    out.append(f"federation.evaluate_every={shrink(federation.evaluate_every)}")
    decay = config.algorithm.hyperparameters().get("lr_decay_rounds")
    if isinstance(decay, int) and decay > 0:
        out.append(f"algorithm.lr_decay_rounds={shrink(decay)}")
    return out


def control_configs(
    table: PaperTable, embedded: bool, extra: list[str] | None = None, columns: list[str] | None = None, imports: list[str] | None = None
) -> dict[tuple[str, str], tuple[MeasuredControl, str, ExperimentConfig]]:
    """What each :class:`MeasuredControl` of ``table`` measures in each column of the run: (condition, column) -> (control, preset, config).

    The config is the one the control's row would run in the column with seed 0 (``extra``:
    the run's ``--set``), whether or not the row itself is run. Loading it checks it, so a
    table command calls this before any cell runs.
    """
    from fedprior.experiments.config import load_config

    out = {}
    for control in table.controls:
        if isinstance(control, MeasuredControl):
            for cell in cells(table, embedded, extra, [control.row], columns):
                name, config = load_config(cell.preset, [*cell.overrides, "run.seed=0"], imports or [])
                out[control.condition, cell.column] = (control, name, config)
    return out


def measure_controls(
    table: PaperTable, embedded: bool, extra: list[str] | None = None, columns: list[str] | None = None, imports: list[str] | None = None
) -> dict[tuple[str, str], tuple[float, str]]:
    """Each :class:`MeasuredControl` of ``table`` measured in every column of the run (:func:`control_configs`): (condition, column) -> (value, what)."""
    return {key: control.measure(name, config) for key, (control, name, config) in control_configs(table, embedded, extra, columns, imports).items()}


def cell_value(table: PaperTable, summary: dict[str, Any], metric: str) -> float:
    """A run summary's ``metric`` in the table's unit (% unless ``scales`` say otherwise), derived metrics included."""
    if table.derived is not None:
        summary = {**summary, **table.derived(summary)}
    return table.scales.get(metric, 100.0) * summary[metric]


def aggregate_table(
    table: PaperTable,
    embedded: bool,
    extra: list[str] | None,
    summary: Callable[[Cell, int], dict[str, Any]],
    on_cell: Callable[[Cell, dict], None] | None = None,
    seeds: int = 1,
    rows: list[str] | None = None,
    columns: list[str] | None = None,
    seeds_of: Callable[[Cell], int] | None = None,
) -> list[dict[str, Any]]:
    """One result per cell, from the run summaries ``summary(cell, seed)`` of seeds 0..seeds-1 (it runs nothing itself).

    ``seeds_of(cell)``: the seeds of a cell that runs more than ``seeds`` (a seed plan); its ``seeds`` says how many.

    ``ours`` is the mean over the seeds of the table's first metric (% unless the table's
    ``scales`` say otherwise), ``std`` their sample standard deviation (n - 1; 0 for one
    seed), ``finals`` the per-seed values (seed 0 first); ``metrics`` holds the same for
    every metric of the table (``{name: {"scale", "mean", "std", "values", "paper"}}``) that
    every seed's summary has (a metric some rows do not produce is left out of their cells).
    A table is read against the paper's printed numbers, so its numbers are in the paper's
    unit (accuracy in %); ``scale`` says so for a program: the run summary's value (a
    fraction for accuracy, as in ``result.json``) times ``scale``. The typed form of a
    result is :class:`~fedprior.reproduce.table_result.CellResult`.
    """
    results = []
    for cell in cells(table, embedded, extra, rows, columns):
        n = seeds if seeds_of is None else seeds_of(cell)
        summaries = [summary(cell, seed) for seed in range(n)]
        if table.derived is not None:
            summaries = [{**s, **table.derived(s)} for s in summaries]
        metrics = {}
        for name in table.metrics:
            if not all(name in s for s in summaries):  # a row's own metric (FedDB's pseudo-label accuracy: not FedAvg's)
                continue
            values = np.array([table.scales.get(name, 100.0) * s[name] for s in summaries], dtype=float)
            metrics[name] = {
                "scale": table.scales.get(name, 100.0),  # the summary's value (a fraction for accuracy) times this
                "mean": round(float(values.mean()), 2),
                "std": round(float(values.std(ddof=1)), 2) if values.size > 1 else 0.0,
                "values": [round(float(v), 2) for v in values],
                "paper": cell.paper if name == table.metrics[0] else cell.paper_metrics.get(name),
            }
        primary = metrics[table.metrics[0]]
        result = {
            "row": cell.row,
            "column": cell.column,
            "metric": table.metrics[0],
            "ours": primary["mean"],
            "std": primary["std"],
            "paper": cell.paper,
            "seeds": n,
            "finals": primary["values"],
            "metrics": metrics,
            "initial": round(100 * summaries[0]["initial_accuracy"], 2),
            "preset": cell.preset,
            "overrides": cell.overrides,
            "seconds": round(sum(s["wall_seconds"] for s in summaries), 2),
        }
        results.append(result)
        if on_cell:
            on_cell(cell, result)
    return results
