"""Each kept deviation's effect on one table column (issue 30 item 2): the option that gives the paper's (or the code's)
behaviour, run on one row and column of a table, paired with that row's committed cells over the same seeds.

A deviation from a paper is kept only as a named option; its docs row says what the option changes and, from this
benchmark, what it does to one column's numbers. For each entry of :data:`DEVIATIONS` (a table, a row, a column, the
option's overrides) this runs

    fedprior table TABLE --embedded --rows ROW --columns COLUMN --seeds 3 --set OPTION ... --out RUNS/NAME

and pairs each seed's metric with the same row's cell of the committed table (``benchmarks/results/tables/TABLE.json``,
recorded on this machine kind: the baseline is not rerun). Each difference is reported as mean, sd and a 95% t interval
(``reproduce.findings.paired``), option minus default: positive means the option scores higher.

    python benchmarks/deviation_effects.py [--only NAME ...] [--jobs 2] [--runs runs/deviations]

Writes ``benchmarks/results/deviation_effects.json`` (the command, the machine, per deviation its values, the
baseline's and the paired difference), merged over the entries the file already holds.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

from shared import machine, run_embedded_table, save_settings

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
    "fedbm-lr-decay-per-epoch": Deviation(
        "fedbm-table1",
        "FedBM",
        "beta=0.1",
        ("algorithm.lr_decay_every=epoch",),
        FEDBM_METRICS,
        "Sec. IV-A2's lr decay of 0.99 per epoch (default: per round, the code)",
    ),
}


def run(name: str, deviation: Deviation, args: argparse.Namespace) -> dict:
    (cell,) = run_embedded_table(deviation.table, deviation.row, deviation.column, 3, args.jobs, args.runs / name, deviation.overrides)["cells"]
    committed = json.loads((TABLES / f"{deviation.table}.json").read_text())
    (base,) = [c for c in committed["table"]["cells"] if c["row"] == deviation.row and c["column"] == deviation.column]
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
        "what": deviation.what,
        "baseline": f"benchmarks/results/tables/{deviation.table}.json ({committed['machine']['kind']})",
        "seconds": round(cell["seconds"], 1),
        "effects": effects,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="deviation names (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/deviations"))
    args = parser.parse_args()
    started, at_start = time.perf_counter(), machine()
    header = {"what": "each kept deviation's option on one table column: paired difference option - default over 3 seeds (points), 95% t interval"}
    for name, deviation in DEVIATIONS.items():
        if args.only is None or name in args.only:
            result = run(name, deviation, args)
            print(name, json.dumps({m: e["difference"] for m, e in result["effects"].items()}), flush=True)
            save_settings(RESULT, header, {name: result}, started, at_start)


if __name__ == "__main__":
    main()
