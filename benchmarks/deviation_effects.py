"""Each kept deviation's effect on one table column (issue 30 item 2): the option that gives the paper's (or the code's)
behaviour, run on one row and column of a table, paired with that row's committed cells over the same seeds.

A deviation from a paper is kept only as a named option; its docs row says what the option changes and, from this
benchmark, what it does to one column's numbers. For each entry of :data:`DEVIATIONS` (a table, a row, a column, the
option's overrides) this runs

    fedprior table TABLE --embedded --rows ROW --columns COLUMN --seeds 3 --set OPTION ... --out RUNS/NAME

and pairs each seed's metric with the same row's cell of the committed table (``benchmarks/results/tables/TABLE.json``,
recorded on this machine kind: the baseline is not rerun). A deviation that the table's own setting cannot show
(``Deviation.setting``: FedBM's per-round synthetic data and per-epoch decay are the defaults to the bit at E = 1)
runs both the option and the default with that setting's overrides instead. Each difference is reported as mean, sd and a 95% t interval
(``reproduce.findings.paired``), option minus default: positive means the option scores higher.

    python benchmarks/deviation_effects.py [--only NAME ...] [--jobs 2] [--runs runs/deviations] [--set run.threads=1 ...]

Writes ``benchmarks/results/deviation_effects.json`` (the command, the machine, per deviation its values, the
baseline's and the paired difference), merged over the entries the file already holds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from shared import command_line, machine, run_embedded_table, save_settings

from fedprior.reproduce.findings import paired

RESULT = Path(__file__).parent / "results" / "deviation_effects.json"
TABLES = Path(__file__).parent / "results" / "tables"


@dataclass(frozen=True)
class Deviation:
    table: str
    row: str
    column: str
    overrides: tuple[str, ...]
    metrics: tuple[str, ...]
    what: str
    setting: tuple[str, ...] = ()
    """Overrides of both runs where the table's own setting cannot show the option (FedBM's E = 1 makes two of its
    options identical to the bit): the default is then rerun in this setting instead of read from the committed table."""


FEDBM_METRICS = ("selected_accuracy", "selected_macro_f1", "final_accuracy")
DEVIATIONS = {
    "fedbm-aggregation-uniform": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.aggregation=uniform",),
        FEDBM_METRICS,
        "Algorithm 1 line 14's plain mean of the clients' models (default: weighted by examples, the code)",
    ),
    "fedbm-synthetic-per-round": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.synthetic_data=per-round",),
        FEDBM_METRICS,
        "line 19's one synthetic dataset per round (default: fresh images every step, the code)",
    ),
    "fedbm-semantic-cross-entropy": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.semantic_loss=cross-entropy",),
        FEDBM_METRICS,
        "Eq. 6's cross-entropy for the generator (default: Eq. 4's loss, the code)",
    ),
    "fedbm-adam": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.optimizer=adam",),
        FEDBM_METRICS,
        "Sec. IV-A2's Adam at the paper's lr 0.01 (default: SGD at 0.01, the code)",
    ),
    "fedbm-synthetic-per-round-e2": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.synthetic_data=per-round",),
        FEDBM_METRICS,
        "line 19's one synthetic dataset per round, at E = 2 local epochs (OCT-C8's and Kvasir's): at E = 1 it is the default to the bit",
        ("federation.local_epochs=2",),
    ),
    "fedbm-lr-decay-per-epoch-e2": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.lr_decay_every=epoch",),
        FEDBM_METRICS,
        "Sec. IV-A2's lr decay per epoch, at E = 2 local epochs: at E = 1 it is the default to the bit",
        ("federation.local_epochs=2",),
    ),
    "fedbm-lr-decay-per-epoch": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.lr_decay_every=epoch",),
        FEDBM_METRICS,
        "Sec. IV-A2's lr decay of 0.99 per epoch (default: per round, the code)",
    ),
}

FEDDB_METRICS = ("best_accuracy", "final_accuracy")


def feddb(overrides: tuple[str, ...], what: str) -> Deviation:
    """A FedDB deviation (docs/feddb.md, "Deviations") on Table 2's FedDB row, embedded column delta = 0.3."""
    return Deviation("feddb-table2", "FedDB", "δ=0.3", overrides, FEDDB_METRICS, what)


def mfcl(overrides: tuple[str, ...], what: str) -> Deviation:
    """An MFCL deviation or reading (docs/mfcl.md, "The algorithm, line by line") on Table 2's MFCL(PN) row, column Sc2."""
    return Deviation("mfcl-table2", "MFCL(PN)", "Sc2", overrides, ("final_accuracy",), what)


DEVIATIONS |= {
    "feddb-d3-eval-batch-250": feddb(("algorithm.eval_batch_size=250",), "D3: the code's 250-image passes that do not train (default 1024)"),
    "feddb-d4-appu-confident": feddb(("algorithm.appu_subset=confident",), "D4: APP-U over the confident images only, the code (default: all, A3 l.14)"),
    "feddb-d5-unlabeled-mean-confident": feddb(
        ("algorithm.unlabeled_mean=confident",), "D5: the unlabeled loss divided by the confident count, the code (default: all)"
    ),
    "feddb-d6-fallback-64": feddb(("algorithm.fallback_batch_size=64",), "D6: the code's 64-image fallback batch (default 0)"),
    "feddb-d7-constant-lr": feddb(("algorithm.lr_decay_rounds=0",), "D7: the paper's constant eta (default: the code's cosine decay)"),
    "feddb-d8-plain-sgd": feddb(
        ("algorithm.nesterov=false", "algorithm.weight_decay=0", "algorithm.clip=0"),
        "D8: SGD without the code's Nesterov, weight decay 5e-4 and clipping at 1 (the paper names none)",
    ),
    "feddb-d9-fresh-momentum": feddb(
        ("algorithm.keep_optimizer_state=false",), "D9: every update from zero momentum buffers (default: each client's kept, the code)"
    ),
    "feddb-d10-server-momentum": feddb(("algorithm.server_momentum=0.5",), "D10: the code's server momentum 0.5 (default 0, Eq. 17)"),
    "feddb-d11-dma-mse-code": feddb(("algorithm.dma_loss=mse-code",), "D11: the code's MSE and optimizer for DMA (default: Eq. 16's norm, Algorithm 2's step)"),
    "feddb-d13-evaluate-every-1": feddb(
        ("federation.evaluate_every=1",), "D13: the paper's test after every round (default: every 5th round in the embedded tables)"
    ),
    "feddb-d14-lr-0.03": feddb(("algorithm.lr=0.03",), "D14: the paper's eta 0.03 (default: the presets' 0.1)"),
    "feddb-d15-code-randaugment": feddb(("algorithm.strong_augment=feddb-code",), "D15: the code's RandAugment (default: FixMatch's)"),
    "feddb-d16-capped-dirichlet": feddb(("partition.balance=true",), "D16: the code's capped Dirichlet draw with redraws (default: the paper's plain draw)"),
    "mfcl-pn-eq3": mfcl(("algorithm.norm=pn-eq3",), "row 7: Eq. 3 as printed, a per-pixel mean (default: GN-like scalar statistics per sample and group)"),
    "mfcl-eval-input-views": mfcl(
        ("algorithm.eval_input=views",), "row 25: the evaluation encodes two views together, as the upload (default: each image alone)"
    ),
    "mfcl-disc-width-16": mfcl(("algorithm.disc_width=16",), "row 19: a discriminator as wide as the sensor module's output (default 8, a CPU choice)"),
}


def run(name: str, deviation: Deviation, args: argparse.Namespace) -> dict:
    def table(overrides: tuple[str, ...], folder: str) -> dict:
        (cell,) = run_embedded_table(deviation.table, deviation.row, deviation.column, 3, args.jobs, args.runs / folder, (*overrides, *args.set))["cells"]
        return cell

    cell = table((*deviation.setting, *deviation.overrides), name)
    if deviation.setting:  # one folder per setting: deviations sharing it share the default's runs
        base = table(deviation.setting, "default " + " ".join(deviation.setting))
        baseline = f"rerun here with {' '.join(deviation.setting)}"
    else:
        committed = json.loads((TABLES / f"{deviation.table}.json").read_text())
        (base,) = [c for c in committed["table"]["cells"] if c["row"] == deviation.row and c["column"] == deviation.column]
        baseline = f"benchmarks/results/tables/{deviation.table}.json ({committed['machine']['kind']})"
    effects = {}
    for metric in deviation.metrics:
        option, default = cell["metrics"][metric]["values"], base["metrics"][metric]["values"]
        p = paired([a - b for a, b in zip(option, default, strict=True)])
        effects[metric] = {
            "option": option,
            "default": default,
            "difference": {"mean": round(p.mean, 2), "sd": round(p.sd, 2), "low": round(p.low, 2), "high": round(p.high, 2)},
        }
    return {
        "table": deviation.table,
        "row": deviation.row,
        "column": deviation.column,
        "overrides": list(deviation.overrides),
        "setting": list(deviation.setting),
        "also_set": list(args.set),
        "command": command_line(),
        "what": deviation.what,
        "baseline": baseline,
        "seconds": round(cell["seconds"], 1),
        "effects": effects,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="deviation names (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/deviations"))
    parser.add_argument(
        "--set", action="append", default=[], help="passed to every run as --set, e.g. run.threads=1 (settings that leave the numbers as they are)"
    )
    args = parser.parse_args()
    started, at_start = time.perf_counter(), machine()
    header = {"what": "each kept deviation's option on one table column: paired difference option - default over 3 seeds (points), 95% t interval"}
    unknown = sorted(set(args.only or ()) - set(DEVIATIONS))
    if unknown:
        parser.error(f"unknown deviation(s) {unknown}; known: {sorted(DEVIATIONS)}")
    failed = []
    for name in args.only or DEVIATIONS:  # in the order given
        try:
            result = run(name, DEVIATIONS[name], args)
        except subprocess.CalledProcessError as error:  # one deviation that cannot run does not stop the others
            deviation = DEVIATIONS[name]
            note = f"not measured: fedprior table exited with status {error.returncode} (its error is in the log)"
            print(f"{name}: {note}; going on", file=sys.stderr, flush=True)
            where = {"table": deviation.table, "row": deviation.row, "column": deviation.column, "overrides": list(deviation.overrides)}
            save_settings(RESULT, header, {name: {**where, "what": deviation.what, "command": command_line(), "not_measured": note}}, started, at_start)
            failed.append(name)
            continue
        print(name, json.dumps({m: e["difference"] for m, e in result["effects"].items()}), flush=True)
        save_settings(RESULT, header, {name: result}, started, at_start)
    if failed:
        sys.exit(f"not measured: {', '.join(failed)}")


if __name__ == "__main__":
    main()
