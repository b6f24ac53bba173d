"""FedDB's embedded setting chosen by its controls alone, before any method is compared (issue 17 item 4).

Two controls per candidate setting, on the δ = 0.3 column of FedDB's Table 2 (Fashion-MNIST,
100 clients, 10% per round, the labeled and the 20,000 unlabeled images split by their own
Dirichlet(0.3) draws):

- **labeled-only**: FedAvg on the labeled images alone (preset ``fedavg-labeled``);
- **all labels**: the same FedAvg with the unlabeled images labeled too
  (``partition.num_labeled = labels + 20000``): same network, partition scheme and rounds.

A setting is informative when (1) all labels reach at least 10 points more best accuracy
than labeled-only, and (2) the all-labels run has converged: its test accuracy moved less
than 0.5 point over the last 10% of its rounds (``late_change`` of the run summary).
The third rule, a clean-trained model keeping 60% on strong views, does not depend on
these settings: ``benchmarks/strong_views.py``.

The candidates (:data:`SETTINGS`) vary the network width, the rounds (with the learning
rate decayed over them, as the presets do), the labels and the local epochs; each is run
with seed 0 (one seed chooses; the 3-seed tables then report). A run's wall seconds are
printed beside it: the issue allows up to 15 CPU-minutes a run on this machine. Runs go
to ``--runs/SETTING`` and are planned and run as a table's cells are
(``experiments.table_runs``): a finished one is read back, a stopped one resumed, a folder
holding a run of another config refused; ``--jobs`` at a time, each in its own process.

    python benchmarks/feddb_setting.py [--jobs 2] [--runs runs/feddb-setting] [--only w8-r40-l4000-e5 ...] [--set run.device=cuda]

Writes ``benchmarks/results/feddb_setting.json``: the command, the machine, and per
setting the two controls (best, final, late change, seconds) and whether each rule passes.

**The central controls (issue 31), ``--central``.** The controls above ask whether labels help; they cannot say
whether the setting lets FixMatch learn from unlabeled images at all. ``--central`` runs, for each candidate of
:data:`CENTRAL_SETTINGS` (overrides of the table's embedded δ = 0.3 column), the table's own central rows with
``fedprior table feddb-table2 --embedded --columns δ=0.3``: ``Central (labels only)`` and ``Central FixMatch`` (one
client holding the labeled and unlabeled pool, the federation's budget: ``reproduce.tables.central_overrides``),
and the strong-view control measured in the FedDB row's setting. A candidate is informative when both table
controls pass: central FixMatch at least 5 points above central labels-only, and a clean-trained network keeping at
least 60% on the strong views. The labeled-only row runs in a table of its own, given only the candidate's overrides
that it knows (the weak view's: ``flip``, ``weak_shift``; the network and optimizer), as the strong view's fields are
unknown to ``fedavg-labeled``; the script then applies the table's central control to the two rows' cells.

    python benchmarks/feddb_setting.py --central [--jobs 2] [--runs runs/feddb-setting] [--only mild-views ...] [--set run.device=cuda]

Writes ``benchmarks/results/feddb_setting_central.json``: per candidate its overrides, both rows' best accuracy,
the two controls with their numbers and status, and the cells' wall seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared import machine, run_embedded_table, save_settings

from fedprior.experiments.cell import Cell
from fedprior.experiments.config import load_config
from fedprior.experiments.table_runs import CellRun, execute_runs, plan_cell
from fedprior.papers.feddb.tables import PAPER_STRONG_VIEWS, PAPER_WEAK_VIEWS

RESULT = Path(__file__).parent / "results" / "feddb_setting.json"
CENTRAL_RESULT = Path(__file__).parent / "results" / "feddb_setting_central.json"
UNLABELED = 20000
GAP, SETTLED = 10.0, 0.5


@dataclass(frozen=True)
class Setting:
    width: int
    rounds: int
    labels: int
    local_epochs: int = 5
    evaluate_every: int = 1
    """Long runs score the 10,000 test images every k rounds (and at the last): best accuracy is then over those rounds."""

    @property
    def name(self) -> str:
        every = f"-v{self.evaluate_every}" if self.evaluate_every > 1 else ""
        return f"w{self.width}-r{self.rounds}-l{self.labels}-e{self.local_epochs}{every}"

    def overrides(self, all_labels: bool) -> list[str]:
        labeled = self.labels + UNLABELED if all_labels else self.labels
        return [
            "partition.scheme=dirichlet",
            "partition.alpha=0.3",
            f"partition.num_labeled={labeled}",
            f"partition.num_unlabeled={UNLABELED}",
            f"algorithm.width={self.width}",
            f"federation.rounds={self.rounds}",
            f"algorithm.lr_decay_rounds={self.rounds}",
            f"federation.local_epochs={self.local_epochs}",
            f"federation.evaluate_every={self.evaluate_every}",
            *PAPER_WEAK_VIEWS,  # the views this search ran with: the presets' before issue 31 (they now have milder ones)
            "run.seed=0",
        ]


SETTINGS = (
    # measured first (benchmarks/results/feddb_setting.json): the presets' setting, a wider network, fewer local epochs
    Setting(8, 40, 4000),
    Setting(8, 40, 1000),
    Setting(16, 40, 1000),
    Setting(16, 100, 1000, local_epochs=1),
    # a client's epochs are full-batch steps (the FedDB paper, Sec. 5.1), so the global model's steps are 5 x rounds: more rounds
    # (the paper: 800), the test set scored every few rounds to keep their cost down
    Setting(8, 200, 1000, evaluate_every=5),
    Setting(16, 200, 1000, evaluate_every=5),
    Setting(8, 400, 1000, evaluate_every=10),
    Setting(16, 400, 1000, evaluate_every=10),
    # measured: w8-r200-l1000 all labels ~3.5 s a round on 2 busy cores, so 400 rounds of w8 and any w16 beyond ~60 rounds
    # pass the 15 CPU-minute limit; the lever left is labels (fewer labels lower the labeled-only control)
    Setting(8, 200, 500, evaluate_every=5),
    Setting(8, 200, 250, evaluate_every=5),
)
CONTROLS = {"labeled-only": False, "all labels": True}


def plan(runs: Path, setting: Setting, control: str, extra: list[str]) -> CellRun:
    """One control run of ``setting``, as a table cell (row: the control, column: the setting, seed 0)."""
    overrides = [*setting.overrides(CONTROLS[control]), *extra]
    name, config = load_config("fedavg-labeled", overrides)
    return plan_cell(runs / setting.name, Cell(control, setting.name, "fedavg-labeled", overrides, None), 0, name, config, "--runs")


def figures(summary: dict[str, Any]) -> dict[str, float]:
    return {k: round(100 * summary[k], 2) for k in ("best_accuracy", "final_accuracy", "late_change")} | {"seconds": round(summary["wall_seconds"], 1)}


def verdict(controls: dict[str, dict]) -> dict:
    labeled, every = controls["labeled-only"], controls["all labels"]
    gap = round(every["best_accuracy"] - labeled["best_accuracy"], 2)
    rules = {
        f"all labels >= labeled-only + {GAP:g}": gap >= GAP,
        f"all labels converged (|late change| < {SETTLED:g})": abs(every["late_change"]) < SETTLED,
    }
    return {"gap": gap, "rules": rules, "informative": all(rules.values())}


MILD_VIEWS = ("algorithm.flip=false", "algorithm.weak_shift=0.07", "algorithm.strong_ops=1", "algorithm.cutout=0.25")
"""Views a network trained on clean Fashion-MNIST still reads (benchmarks/strong_views.py's rule, >= 60% on the strong
views): no flip, a 2-pixel shift, one RandAugment operation, Cutout a quarter of the side (FixMatch: flip, 4 pixels
at 32, two operations, half the side)."""
CENTRAL_SETTINGS: dict[str, tuple[str, ...]] = {
    # name: overrides of the embedded δ = 0.3 column (both rows; the strong view's fields reach the FixMatch row only)
    "preset": (*PAPER_WEAK_VIEWS, *PAPER_STRONG_VIEWS),  # the presets before issue 31: FixMatch's views (now the paper setting's)
    "mild-views": MILD_VIEWS,
    "mild-views-lr0.03": (*MILD_VIEWS, "algorithm.lr=0.03"),
    "mild-views-w16": (*MILD_VIEWS, "algorithm.width=16"),
    "mild-views-r400": (*MILD_VIEWS, "federation.rounds=400", "algorithm.lr_decay_rounds=400", "federation.evaluate_every=10"),
}
STRONG_ONLY = ("algorithm.strong_ops", "algorithm.cutout", "algorithm.strong_augment", "algorithm.threshold")
"""Fields of the strong view and the pseudo-labels: unknown to ``fedavg-labeled``, which trains on weak views of the labels."""
COLUMN = "δ=0.3"


def table_rows(rows: str, out: Path, overrides: tuple[str, ...], args: argparse.Namespace) -> dict:
    """``fedprior table feddb-table2 --embedded --columns δ=0.3 --rows ROWS`` in ``out``, seed 0; its table.json."""
    return run_embedded_table("feddb-table2", rows, COLUMN, 1, args.jobs, out, (*overrides, *args.extra))


def run_central(name: str, overrides: tuple[str, ...], args: argparse.Namespace) -> dict:
    """One candidate: its two central rows (two tables, see the module docstring) and the table's controls on them."""
    from fedprior.papers.feddb.tables import CENTRAL_CONTROL, TABLE2
    from fedprior.reproduce.findings import evaluate

    labeled = table_rows(CENTRAL_CONTROL.below, args.runs / name / "labeled", tuple(o for o in overrides if not o.startswith(STRONG_ONLY)), args)
    fixmatch = table_rows(CENTRAL_CONTROL.above, args.runs / name / "fixmatch", overrides, args)
    both = [*labeled["cells"], *fixmatch["cells"]]
    cells = {c["row"]: c for c in both}
    measured = [c for c in fixmatch["controls"] if c.get("kind") == "measured"]  # the strong views: measured in the FixMatch table
    measurements = {(c["condition"], c["column"]): (c["value"], c["measured"]) for c in measured}
    evaluated = evaluate(TABLE2, both, embedded=True, measurements=measurements)["controls"]  # the table's own controls on both rows
    keys = ("condition", "above", "below", "difference", "value", "measured", "status")
    controls = [{k: c[k] for k in keys if k in c} for c in evaluated if c["status"] != "not run"]
    return {
        "overrides": list(overrides),
        "rows": {
            row: {"best_accuracy": c["ours"], "final_accuracy": c["metrics"]["final_accuracy"]["mean"], "seconds": round(c["seconds"], 1)}
            for row, c in cells.items()
        },
        "controls": controls,
        "informative": len(controls) == 2 and all(c["status"] == "passed" for c in controls),
    }


def main_central(args: argparse.Namespace) -> None:
    started, at_start = time.perf_counter(), machine()
    header = {
        "what": f"FedDB Table 2's central controls in its embedded {COLUMN} column under each candidate setting, seed 0: best accuracy (%)",
        "rules": [
            "Central FixMatch at least 5 points above Central (labels only) (one client holding the labeled and unlabeled pool, the federation's budget)",
            "a network trained on clean images keeps at least 60% accuracy on the strong views",
        ],
    }
    for name, overrides in CENTRAL_SETTINGS.items():
        if args.only is None or name in args.only:  # written as each candidate finishes: a stopped search keeps what it measured
            result = run_central(name, overrides, args)
            print(name, json.dumps({"informative": result["informative"], "controls": result["controls"]}), flush=True)
            save_settings(CENTRAL_RESULT, header, {name: result}, started, at_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/feddb-setting"))
    parser.add_argument("--only", nargs="*", default=None, help="setting names (default: all)")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="an override for every run (e.g. run.device=cuda)")
    parser.add_argument("--central", action="store_true", help="the central controls' candidates (CENTRAL_SETTINGS) instead of the labels control's")
    args = parser.parse_args()
    if args.central:
        return main_central(args)
    chosen = [s for s in SETTINGS if args.only is None or s.name in args.only]
    started, load_at_start = time.perf_counter(), machine()
    header = {
        "what": "FedDB embedded setting (δ = 0.3): FedAvg on the labels alone vs every image labeled, seed 0, accuracy in %",
        "rules": [f"all labels best accuracy >= labeled-only + {GAP:g} points", f"all labels |late_change| < {SETTLED:g} point (last 10% of rounds)"],
    }
    done: dict[str, dict[str, dict]] = {s.name: {} for s in chosen}

    def on_done(run: CellRun, summary: dict[str, Any]) -> None:  # written as each setting finishes: a stopped grid keeps what it measured
        controls = done[run.cell.column]
        controls[run.cell.row] = figures(summary)
        if len(controls) == len(CONTROLS):
            result = {"controls": {c: controls[c] for c in CONTROLS}, **verdict(controls)}
            print(run.cell.column, json.dumps(result), flush=True)
            save_settings(RESULT, header, {run.cell.column: result}, started, load_at_start)

    execute_runs([plan(args.runs, s, c, args.extra) for s in chosen for c in CONTROLS], args.jobs, on_done)


if __name__ == "__main__":
    main()
