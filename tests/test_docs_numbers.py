"""The results tables of docs/*.md and README.md quote the committed JSON, number by number (issue 44 item 4).

Each docs table below is found by its header line and mapped explicitly: which JSON record each of its rows
quotes (a table's cell, a claim's finding, a control, a kept cell's result.json) and which fields each of its
columns holds. A quoted number must be the JSON's value rounded half away from zero to the decimals the docs
print (``reproduce.table_page.rounded``, as table.md rounds it); a row or column the map does not name fails the test
(unless listed as not quoted from a committed file), so a table cannot drift from its JSON, nor grow unchecked.
Sentences outside tables that quote a number are checked as QUOTES: a pattern and the JSON values it must hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprior.reproduce.table_page import rounded
from fedprior.results.paired import paired

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "benchmarks" / "results" / "tables"
CELLS = ROOT / "benchmarks" / "results" / "cells"
NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


@cache
def table_json(name: str) -> dict[str, Any]:
    return json.loads((TABLES / f"{name}.json").read_text())["table"]


def cell(name: str, row: str, column: str, metric: str | None = None) -> list[float | None]:
    """A table cell's mean, sd and paper number on ``metric`` (the table's first by default)."""
    found = next(c for c in table_json(name)["cells"] if (c["row"], c["column"]) == (row, column))
    value = found["metrics"][metric or found["metric"]]
    return [value["mean"], value["std"], value.get("paper")]


def finding(name: str, claim: str, *fields: str) -> list[Any]:
    found = next(f for f in table_json(name)["findings"] if f["claim"] == claim)
    return [found[f] for f in fields]


def control(name: str, condition: str, column: str) -> list[Any]:
    found = next(c for c in table_json(name)["controls"] if (c["condition"], c["column"]) == (condition, column))
    return [found["difference"], found["status"]]


def kept(name: str, folder: str, *fields: str) -> list[float]:
    """Fields of a kept cell's result.json, as % (fractions times 100)."""
    result = json.loads((CELLS / name / folder / "result.json").read_text())
    return [float(Decimal(repr(result[f])) * 100) for f in fields]


Getter = Callable[[str, str], list[Any]]
"""(docs row label, docs column header) -> the JSON values the cell quotes, in the order it prints them (text: a word it must hold)."""


@dataclass(frozen=True)
class DocTable:
    doc: str
    header: str
    """The table's header line, exactly."""
    values: Getter
    rows: tuple[str, ...]
    """Every row label of the table, in order (a row added to the docs is not silently unchecked)."""
    unquoted: tuple[str, ...] = ()
    """Column headers whose numbers come from no committed table file (said in the docs beside the table)."""
    keys: int = 1
    """How many leading columns name a row (joined by ' | ' in ``rows``), e.g. a claim and its column."""


def parse(doc: str, header: str) -> list[dict[str, str]]:
    lines = (ROOT / doc).read_text().splitlines()
    if lines.count(header) != 1:
        return [{"malformed": f"the header, found {lines.count(header)} times"}]
    start = lines.index(header)
    names = [c.strip() for c in header.strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append(dict(zip(names, cells, strict=True)) if len(cells) == len(names) else {"malformed": line})
    return rows


def agrees(quoted: str, value: Any) -> bool:
    """``quoted`` (e.g. '+6.5', '2.0') is ``value`` rounded half away from zero to the decimals it prints."""
    places = len(quoted.partition(".")[2])
    return Decimal(quoted.lstrip("+")) == Decimal(rounded(float(value), places))


def mismatches(table: DocTable) -> list[str]:
    out = []
    rows = parse(table.doc, table.header)
    malformed = [r["malformed"] for r in rows if "malformed" in r]
    if malformed:
        return [f"{table.doc}: {table.header!r}: not a table of its header's columns: {line!r}" for line in malformed]
    labels = tuple(" | ".join(list(r.values())[: table.keys]).replace("*", "") for r in rows)
    if labels != table.rows:
        return [f"{table.doc} {table.header!r}: rows {labels} are not the mapped {table.rows}"]
    for label, row in zip(labels, rows, strict=True):
        for column, text in list(row.items())[table.keys :]:
            if column in table.unquoted or text in ("", "-"):
                continue
            checked = NUMBER.findall(re.sub(r"Figure \d+", "", text))
            expected = table.values(label, column)
            words = [v for v in expected if isinstance(v, str)]
            numbers = [v for v in expected if not isinstance(v, str)]
            if len(checked) > len(numbers) or any(v is None for v in numbers[: len(checked)]):
                out.append(f"{table.doc}: {label} / {column}: {text!r} quotes {len(checked)} numbers, the JSON has {numbers}")
                continue
            wrong = [(q, v) for q, v in zip(checked, numbers, strict=False) if not agrees(q, v)]
            missing = [w for w in words if w not in text]
            if wrong or missing:
                out.append(f"{table.doc}: {label} / {column}: {text!r} against the JSON's {expected}")
    return out


# ------------------------------------------------------------------------------------------------ docs/mfcl.md


def mfcl_cells(name: str, names: dict[str, str] | None = None) -> Getter:
    return lambda row, column: cell(name, (names or {}).get(row, row), column.split()[0])


T2_UPPER = ("FedAvg", "FedProx", "MOON", "FedSwAV", "Orchestra", "FedSimCLR", "MFCL(BN)", "MFCL(GN)", "MFCL(PN)")
T2_LOWER = (
    "MFCL(PN) untrained",
    "MFCL(GN) untrained",
    "MFCL(BN) untrained",
    "FedSimCLR untrained",
    "Central MFCL(PN)",
    "Central FedSimCLR",
    "raw pixels",
    "MFCL(PN) sensor (after phase 1)",
    "MFCL(PN) sensor untrained",
)
SUPERVISED = {f"{r} (supervised)": r for r in ("FedAvg", "FedProx", "MOON")}
T2_NAMES = {**SUPERVISED, "MFCL(PN) sensor (after phase 1)": "MFCL(PN) sensor"}
MFCL_CONDITIONS = {
    "MFCL(PN) - untrained": "MFCL(PN) at least 5 points above MFCL(PN) untrained",
    "MFCL(GN) - untrained": "MFCL(GN) at least 5 points above MFCL(GN) untrained",
    "MFCL(BN) - untrained": "MFCL(BN) at least 5 points above MFCL(BN) untrained",
    "FedSimCLR - untrained": "FedSimCLR at least 5 points above FedSimCLR untrained",
    "Central MFCL(PN) - untrained": "Central MFCL(PN) at least 5 points above MFCL(PN) untrained",
    "Central FedSimCLR - untrained": "Central FedSimCLR at least 5 points above FedSimCLR untrained",
    "FedAvg - raw pixels": "FedAvg at least 0 points above raw pixels",
}
T2_CLAIMS = tuple(f"MFCL(PN) > {other} ({sc})" for sc, other in (("Sc1", "MFCL(BN)"), ("Sc1", "MFCL(GN)"), ("Sc1", "FedSimCLR"), ("Sc2", "MFCL(BN)"))) + (
    "MFCL(PN) > MFCL(GN) (Sc2)",
    "MFCL(PN) > FedSimCLR (Sc2)",
    "MFCL(PN) > FedAvg (Sc2)",
    "FedAvg > MFCL(PN) (Sc10)",
)
T7_ROWS = ("FedSimCLR (BN)", "FedSimCLR (GN)", "FedSimCLR (PN)", "MFCL (BN)", "MFCL (GN)", "MFCL (PN)", "FedSimCLR (PN) untrained")
T7_CLAIMS = (
    "FedSimCLR (PN) > FedSimCLR (BN) (Sc2)",
    "FedSimCLR (PN) > FedSimCLR (BN) (Sc10)",
    "FedSimCLR (PN) > FedSimCLR (GN) (Sc2)",
    "FedSimCLR (PN) > FedSimCLR (GN) (Sc10)",
    "MFCL (PN) > MFCL (BN) (Sc2)",
    "MFCL (PN) > MFCL (GN) (Sc2)",
    "MFCL (PN) > FedSimCLR (PN) (Sc2)",
    "MFCL (PN) > FedSimCLR (PN) (Sc10)",
    "MFCL (PN) > FedSimCLR (BN) (Sc2)",
    "MFCL (PN) > FedSimCLR (BN) (Sc10)",
)
CLAIM_FIELDS = {"mean": ("mean",), "95% interval": ("low", "high"), "verdict": ("verdict",), "paper": ("paper",), "sd": ("sd",)}


def claims(name: str, names: Callable[[str, str], str] = lambda row, column: row) -> Getter:
    return lambda row, column: finding(name, names(row, column), *CLAIM_FIELDS[column])


def finals(name: str, row: str, column: str) -> list[float]:
    """A table cell's first metric per seed (seed 0 first)."""
    return next(c for c in table_json(name)["cells"] if (c["row"], c["column"]) == (row, column))["finals"]


SEQUENTIAL = {  # docs column -> the row of mfcl-table2 it quotes, per method ({} the method's own name)
    "untrained": "{} untrained",
    "federated (60 steps of 64)": "{}",
    "central, 480 steps of 64": "Central {}",
    "central, 60 steps of 640": "Central {} (sequential steps)",
}


def sequential_seed0(row: str, column: str) -> list[float]:
    """docs/mfcl.md's seed-0 table of the sequential-steps rows (Sc2): seed 0, and its difference to the untrained network."""
    value = finals("mfcl-table2", SEQUENTIAL[column].format(row), "Sc2")[0]
    untrained = finals("mfcl-table2", SEQUENTIAL["untrained"].format(row), "Sc2")[0]
    return [value] if column == "untrained" else [value, round(value - untrained, 2)]


def sequential_seeds(row: str, column: str) -> list[float]:
    """docs/mfcl.md's three-seed table of the sequential-steps rows (Sc2): the mean (± sd for the new row), the seeds; the control."""
    if column == "its control (+5)":
        return control("mfcl-table2", f"Central {row} (sequential steps) at least 5 points above {row} untrained", "Sc2")[:1]
    mean, sd, _ = cell("mfcl-table2", SEQUENTIAL[column].format(row), "Sc2")
    spread = [sd] if column == "central, 60 steps of 640" else []
    return [mean, *spread, *finals("mfcl-table2", SEQUENTIAL[column].format(row), "Sc2")]


DOCS: tuple[DocTable, ...] = (
    DocTable(
        "docs/mfcl.md",
        "| method | untrained | federated (60 steps of 64) | central, 480 steps of 64 | central, 60 steps of 640 |",
        sequential_seed0,
        ("MFCL(PN)", "FedSimCLR"),
    ),
    DocTable(
        "docs/mfcl.md",
        "| method | untrained | federated (60 steps of 64) | central, 480 steps of 64 | central, 60 steps of 640 | its control (+5) |",
        sequential_seeds,
        ("MFCL(PN)", "FedSimCLR"),
    ),
    DocTable(
        "docs/mfcl.md",
        "| row | Sc1 | Sc2 | Sc10 | Sc2, 10 server epochs |",
        mfcl_cells("mfcl-table2", T2_NAMES),
        (*SUPERVISED, *T2_UPPER[3:], *T2_LOWER),
        unquoted=("Sc2, 10 server epochs",),  # benchmarks/results/mfcl_server_epochs.json's run, not the table's
    ),
    DocTable(
        "docs/mfcl.md",
        "| control | Sc1 | Sc2 | Sc10 |",
        lambda row, column: control("mfcl-table2", MFCL_CONDITIONS[row], column),
        tuple(MFCL_CONDITIONS),
    ),
    DocTable("docs/mfcl.md", "| claim (Table 2) | mean | 95% interval | verdict | paper |", claims("mfcl-table2"), T2_CLAIMS),
    DocTable("docs/mfcl.md", "| row | Sc2 | Sc10 |", mfcl_cells("mfcl-table7"), T7_ROWS),
    DocTable("docs/mfcl.md", "| claim (Table 7) | mean | 95% interval | verdict | paper |", claims("mfcl-table7"), T7_CLAIMS),
)

# ------------------------------------------------------------------------------------------------ docs/feddb.md

FEDDB_ROWS = {"FedAvg (250 labels only)": "FedAvg", "DPL (= FixMatch-FedDPL)": "DPL"}
FEDDB_METRICS = {"best acc": "best_accuracy", "final acc": "final_accuracy", "last-10% move": "late_change", "PL acc": "mean_client_pl_accuracy"}


def feddb_cells(name: str, default_column: str = "δ=0.3") -> Getter:
    def values(row: str, column: str) -> list[Any]:
        setting, _, what = column.partition(" ") if column.startswith("δ=") else (default_column, "", column)
        return cell(name, FEDDB_ROWS.get(row, row), setting, FEDDB_METRICS[what])

    return values


FEDDB_CLAIMS = {  # (docs label, column) -> (table, claim)
    ("DPL > no DPL (Table 4; = FixMatch-FedDPL > FixMatch, Tables 2-3)", "δ=0.3"): ("feddb-table4", "DPL > no DPL (CIFAR10 δ=0.3)"),
    ("DPL > no DPL", "δ=0.1"): ("feddb-table4", "DPL > no DPL (CIFAR10 δ=0.1)"),
    ("DPL + DMA > DPL", "δ=0.3"): ("feddb-table4", "DPL + DMA > DPL (CIFAR10 δ=0.3)"),
    ("DPL + DMA > DPL", "δ=0.1"): ("feddb-table4", "DPL + DMA > DPL (CIFAR10 δ=0.1)"),
    ("FedDB > FedAvg (Table 3)", "δ=0.1"): ("feddb-table3", "FedDB > FedAvg (CIFAR10 δ=0.1)"),
    ("FedDB > FixMatch (Table 3)", "δ=0.1"): ("feddb-table3", "FedDB > FixMatch (CIFAR10 δ=0.1)"),
    ("DPL raises FixMatch's pseudo-label accuracy (PL acc)", "δ=0.3"): ("feddb-table2", "DPL raises FixMatch's pseudo-label accuracy (CIFAR10 δ=0.3)"),
    ("DPL raises FixMatch's pseudo-label accuracy (PL acc)", "δ=0.1"): ("feddb-table3", "DPL raises FixMatch's pseudo-label accuracy (CIFAR10 δ=0.1)"),
}


def feddb_claims(row: str, column: str) -> list[Any]:
    label, setting = row.split(" | ")
    name, claim = FEDDB_CLAIMS[label, setting]
    return finding(name, claim, *CLAIM_FIELDS[column])


SEED_COLUMNS = {  # docs column -> the kept cell (table, folder of seed 0 without its seed) and whether the cell quotes coverage
    "FixMatch δ=0.3": ("feddb-table4", "no_DPL_no_DMA_FixMatch_--_=0.3"),
    "DPL δ=0.3": ("feddb-table4", "DPL--_=0.3"),
    "DPL + DMA δ=0.3": ("feddb-table4", "DPL_DMA_FedDB_--_=0.3"),
    "FixMatch δ=0.1": ("feddb-table4", "no_DPL_no_DMA_FixMatch_--_=0.1"),
    "DPL δ=0.1": ("feddb-table4", "DPL--_=0.1"),
    "DPL + DMA δ=0.1": ("feddb-table4", "DPL_DMA_FedDB_--_=0.1"),
    "FedAvg δ=0.1": ("feddb-table4", "FedAvg--_=0.1"),
}


def feddb_seeds(row: str, column: str) -> list[float]:
    name, folder = SEED_COLUMNS[column]
    fields = ("best_accuracy",) if column.startswith("FedAvg") else ("best_accuracy", "mean_client_pl_accuracy", "mean_client_pl_coverage")
    return kept(name, f"{folder}--seed{row}", *fields)


CENTRAL_RUNS = {  # docs row of the capability/budget table -> (feddb-table2's row, its kept folder; None: quoted as mean ± sd)
    "Central labels only (mini-batch)": ("Central labels only (mini-batch)", "Central_labels_only_mini-batch_--_=0.3"),
    "Central FixMatch (mini-batch)": ("Central FixMatch (mini-batch)", "Central_FixMatch_mini-batch_--_=0.3"),
    "Central labels only (sequential steps)": ("Central labels only (sequential steps)", "Central_labels_only_sequential_steps_--_=0.3"),
    "Central FixMatch (sequential steps)": ("Central FixMatch (sequential steps)", "Central_FixMatch_sequential_steps_--_=0.3"),
    "Central (labels only), full batch (issue 31, 3 seeds)": ("Central (labels only)", None),
    "Central FixMatch, full batch (issue 31, 3 seeds)": ("Central FixMatch", None),
}
CENTRAL_DIFFERENCES = {"capability: difference": "mini-batch", "budget: difference": "sequential steps"}
CENTRAL_COLUMNS = {"best acc, seed 0": "best_accuracy", "final": "final_accuracy", "PL acc": "mean_client_pl_accuracy"}


def central_runs(row: str, column: str) -> list[Any]:
    """docs/feddb.md's capability/budget table: seed 0 of a kept cell beside the cell's mean ± sd, or a full-batch cell's
    mean ± sd; a difference row: the paired differences of best accuracy per seed, their mean, sd and 95% interval."""
    metric = CENTRAL_COLUMNS[column]
    if row in CENTRAL_DIFFERENCES:
        steps = CENTRAL_DIFFERENCES[row]
        fixmatch = [kept("feddb-table2", f"{CENTRAL_RUNS[f'Central FixMatch ({steps})'][1]}--seed{s}", metric)[0] for s in range(3)]
        labels = [kept("feddb-table2", f"{CENTRAL_RUNS[f'Central labels only ({steps})'][1]}--seed{s}", metric)[0] for s in range(3)]
        stats = paired(np.subtract(fixmatch, labels))
        return [*(round(f - lab, 2) for f, lab in zip(fixmatch, labels, strict=True)), stats.mean, stats.sd, 95, stats.low, stats.high]  # "95% interval"
    name, folder = CENTRAL_RUNS[row]
    mean, sd, _ = cell("feddb-table2", name, "δ=0.3", metric)
    if folder is None:
        return [mean] if metric == "mean_client_pl_accuracy" else [mean, sd]
    seed0 = kept("feddb-table2", f"{folder}--seed0", metric)
    return [*seed0, mean, sd] if metric == "best_accuracy" else seed0


DOCS += (
    DocTable(
        "docs/feddb.md",
        "| row (δ = 0.3 column; the same run in every column) | steps | best acc, seed 0 | final | PL acc | wall s |",
        central_runs,
        (*list(CENTRAL_RUNS)[:2], "capability: difference", *list(CENTRAL_RUNS)[2:4], "budget: difference", *list(CENTRAL_RUNS)[4:]),
        unquoted=("steps", "wall s"),  # the step counts come from the presets (tests/algorithms/test_central.py), the seconds are timings
    ),
    DocTable(
        "docs/feddb.md",
        "| row | best acc | final acc | last-10% move | PL acc |",
        feddb_cells("feddb-table2"),
        (
            "FedAvg (250 labels only)",
            "FedAvg (all labels)",
            "Central (labels only)",
            "Central FixMatch",
            "FixMatch",
            "FixMatch-FedDPL",
            "FedDB",
        ),
    ),  # fmt: skip
    DocTable(
        "docs/feddb.md",
        "| row | δ=0.3 best acc | δ=0.3 PL acc | δ=0.1 best acc | δ=0.1 final acc | δ=0.1 last-10% move | δ=0.1 PL acc |",
        feddb_cells("feddb-table4"),
        (
            "FedAvg (250 labels only)",
            "FedAvg (all labels)",
            "Central (labels only)",
            "Central FixMatch",
            "no DPL, no DMA (FixMatch)",
            "DPL (= FixMatch-FedDPL)",
            "DPL + DMA (FedDB)",
        ),
    ),  # fmt: skip
    DocTable(
        "docs/feddb.md",
        "| seed | FixMatch δ=0.3 | DPL δ=0.3 | DPL + DMA δ=0.3 | FixMatch δ=0.1 | DPL δ=0.1 | DPL + DMA δ=0.1 | FedAvg δ=0.1 |",
        feddb_seeds,
        ("0", "1", "2"),
    ),
    DocTable(
        "docs/feddb.md",
        "| claim | column | mean | 95% interval | verdict | paper |",
        feddb_claims,
        tuple(" | ".join(key) for key in FEDDB_CLAIMS),
        keys=2,
    ),
)

# ------------------------------------------------------------------------------------------------ docs/fedbm.md

FEDBM_COLUMNS = {"sel. acc": "selected_accuracy", "sel. F1": "selected_macro_f1", "last acc": "final_accuracy"}
FEDBM_HEADER = "| method | beta 0.05 sel. acc | sel. F1 | last acc | beta 0.1 sel. acc | sel. F1 | last acc |"


# ------------------------------------------------------------------------------------------------ docs/fst-cbdg.md


def fst_cells(name: str) -> Getter:
    return lambda row, column: cell(name, row, column)


DOCS += (
    DocTable("docs/fst-cbdg.md", "| method | iid |", fst_cells("fst-cbdg-table1"), ("CLIP-ZS", "CLIP-FC-Centralized", "FedAvg", "FedNTD", "FST-CBDG")),
    DocTable(
        "docs/fst-cbdg.md",
        "| method | s=2 | s=3 | s=5 | s=10 | a=0.05 | a=0.1 | a=0.3 | a=0.5 |",
        fst_cells("fst-cbdg-table2"),
        ("FedAvg", "FedNTD", "FST-CBDG"),
    ),
    DocTable("docs/fst-cbdg.md", "| method | s=2 | iid |", fst_cells("fst-cbdg-table3"), ("L_iST", "L_tSamp", "L_tSamp (Centralized)", "L_iST + L_tSamp")),
    DocTable(
        "docs/fst-cbdg.md",
        "| method | s=10 | iid |",
        fst_cells("fst-cbdg-table4"),
        ("Equal sampling", "Balanced sampling", "Balanced sampling, counted per epoch"),
    ),
)


def fedbm_mismatches(name: str, rows: tuple[str, ...]) -> list[str]:
    """FedBM's tables repeat column names per beta; read them by position (beta 0.05's three, then beta 0.1's)."""
    lines = (ROOT / "docs/fedbm.md").read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line == FEDBM_HEADER]
    out = []
    for start in starts:
        body = []
        for line in lines[start + 2 :]:
            if not line.startswith("|"):
                break
            body.append([c.strip() for c in line.strip("|").split("|")])
        if tuple(b[0] for b in body) != rows:
            continue
        for label, *texts in body:
            for (beta, metric), text in zip([(b, m) for b in ("0.05", "0.1") for m in FEDBM_COLUMNS], texts, strict=True):
                quoted = NUMBER.findall(text)
                expected = cell(name, label, f"beta={beta}", FEDBM_COLUMNS[metric])
                if len(quoted) > 3 or any(e is None or not agrees(q, e) for q, e in zip(quoted, expected, strict=False)):
                    out.append(f"docs/fedbm.md: {label} / beta {beta} {metric}: {text!r} against the JSON's {expected}")
        return out
    return [f"docs/fedbm.md: no table with rows {rows}"]


FEDBM_TABLES = {
    "fedbm-table1": ("Central Learning", "FedAvg", "FedProx", "FedNH", "FedETF", "FedBM", "FedBM + balanced softmax", "FedETF (plain CE)"),
    "fedbm-table6": ("w/o LKCC", "w/o CGDE", "FedBM"),
}

# ------------------------------------------------------------------------------------------------ docs/system-heterogeneity.md
# (issue 54 item 5: benchmarks/system_heterogeneity.py's table; one self-contained block)


@cache
def system_heterogeneity() -> dict[str, Any]:
    return json.loads((ROOT / "benchmarks" / "results" / "system_heterogeneity.json").read_text())


SYSTEM_COLUMNS = {  # docs column -> the fields of the JSON's table[devices][method] it quotes
    "final accuracy %": ("final_accuracy_mean", "final_accuracy_sd"),
    "simulated time s": ("simulated_time_mean",),
    "time to FedAvg's final s": ("time_to_fedavg_final_mean",),
    "updates dropped": ("deadline_dropped_updates",),
    "updates shortened": ("partial_work_updates",),
}
SYSTEM_ROWS = tuple(f"{d} | {m}" for d in ("lognormal", "constant") for m in ("fedavg", "fedavg-drop", "fedprox-partial", "fedbuff"))


def system_methods(row: str, column: str) -> list[Any]:
    devices, _, method = row.partition(" | ")
    entry = system_heterogeneity()["table"][devices][method]
    if column == "reached":
        return [entry["reached_in_seeds"], len(system_heterogeneity()["seeds"])]
    return [entry[f] for f in SYSTEM_COLUMNS[column]]


SYSTEM_CLAIMS = {  # docs row -> the judged differences it quotes (a path into the JSON's verdicts)
    "fedbuff-faster (s)": ("fedbuff-faster", "difference"),
    "partial-beats-drop (points)": ("partial-beats-drop",),
    "straggler-effect-vanishes (control; points)": ("straggler-effect-vanishes (control)", "gap_lognormal_minus_gap_constant"),
    "headroom (control; points)": ("headroom (control)",),
    "deadline-cost (measured; points)": ("deadline-cost (measured)",),
}
SYSTEM_RATIOS = {  # docs row -> (a path to the per-seed entries or values, the mean's key)
    "FedBuff speed-up, log-normal (x)": ("fedbuff-faster",),
    "FedBuff speed-up, constant (x)": ("time-per-round-differs (control)", "fedbuff_vs_fedavg_on_constant_devices"),
    "FedAvg round, log-normal over constant (x)": ("time-per-round-differs (control)",),
}


def system_claims(row: str, column: str) -> list[Any]:
    found: Any = system_heterogeneity()["verdicts"]
    if row in SYSTEM_RATIOS:
        for key in SYSTEM_RATIOS[row]:
            found = found[key]
        per_seed = found.get("lognormal_over_constant") or [p["ratio"] for p in found["per_seed"]]
        return {"per seed": per_seed, "mean": [found["mean_ratio"]]}[column]
    for key in SYSTEM_CLAIMS[row]:
        found = found[key]
    return {"per seed": found["per_seed"], "mean": [found["mean"]], "95% interval": found["interval_95"], "verdict": [found["verdict"]]}[column]


DOCS += (
    DocTable(
        "docs/system-heterogeneity.md",
        "| devices | method | final accuracy % | simulated time s | time to FedAvg's final s | reached | updates dropped | updates shortened |",
        system_methods,
        SYSTEM_ROWS,
        keys=2,
    ),
    DocTable(
        "docs/system-heterogeneity.md", "| claim or control | per seed | mean | 95% interval | verdict |", system_claims, (*SYSTEM_CLAIMS, *SYSTEM_RATIOS)
    ),
)

# ------------------------------------------------------------------------------------------------ sentences


def fixmatch_under_fedavg(metric: str) -> float:
    fedavg, fixmatch = cell("feddb-table4", "FedAvg", "δ=0.1", metric)[0], cell("feddb-table4", "no DPL, no DMA (FixMatch)", "δ=0.1", metric)[0]
    assert fedavg is not None and fixmatch is not None
    return round(fedavg - fixmatch, 2)


QUOTES: tuple[tuple[str, str, Callable[[], list[Any]]], ...] = (
    # (file, a pattern whose groups are the numbers, what they quote)
    ("docs/feddb.md", r"it ends (\S+) points\s+under FedAvg \(final accuracy; (\S+) best\)",
     lambda: [fixmatch_under_fedavg("final_accuracy"), fixmatch_under_fedavg("best_accuracy")]),
    ("docs/fedbm.md", r"without it FedETF falls to\s+FedAvg's level \((\S+) vs (\S+) at beta 0.05, (\S+) vs (\S+) at beta 0.1\)",
     lambda: [cell("fedbm-table1", "FedETF (plain CE)", "beta=0.05")[0], cell("fedbm-table1", "FedAvg", "beta=0.05")[0],
              cell("fedbm-table1", "FedETF (plain CE)", "beta=0.1")[0], cell("fedbm-table1", "FedAvg", "beta=0.1")[0]]),
    ("README.md", r"(\S+) ± (\S+)% at the chosen round over 3 seeds \(FedAvg (\S+) ± (\S+)%, FedETF (\S+) ± (\S+)%\), macro-F1 (\S+) ± (\S+)%; "
     r"last round (\S+) ± (\S+)%",
     lambda: [*cell("fedbm-table1", "FedBM", "beta=0.05")[:2], *cell("fedbm-table1", "FedAvg", "beta=0.05")[:2],
              *cell("fedbm-table1", "FedETF", "beta=0.05")[:2], *cell("fedbm-table1", "FedBM", "beta=0.05", "selected_macro_f1")[:2],
              *cell("fedbm-table1", "FedBM", "beta=0.05", "final_accuracy")[:2]]),
    ("README.md", r"\| (\S+) ± (\S+)% over 5 seeds \(the seeds its plan gave it\) with the paper's linear evaluation, (\S+) points above the same network untrained on the 3 seeds both have \((\S+) ± (\S+)%\)",
     lambda: [*cell("mfcl-table2", "MFCL(PN)", "Sc2")[:2], control("mfcl-table2", MFCL_CONDITIONS["MFCL(PN) - untrained"], "Sc2")[0],
              *cell("mfcl-table2", "MFCL(PN) untrained", "Sc2")[:2]]),
    ("README.md", r"\| (\S+) ± (\S+)% over 3 seeds, with FedAvg on the labels alone \((\S+) ± (\S+)%\) and above FixMatch \((\S+) ± (\S+)%",
     lambda: [*cell("feddb-table2", "FedDB", "δ=0.3")[:2], *cell("feddb-table2", "FedAvg", "δ=0.3")[:2], *cell("feddb-table2", "FixMatch", "δ=0.3")[:2]]),
)  # fmt: skip


def quote_mismatches() -> list[str]:
    out = []
    for doc, pattern, values in QUOTES:
        found = re.search(pattern, (ROOT / doc).read_text())
        if found is None:
            out.append(f"{doc}: no sentence matches {pattern!r}")
            continue
        expected = values()
        wrong = [(q, v) for q, v in zip(found.groups(), expected, strict=True) if not agrees(q, v)]
        if wrong:
            out.append(f"{doc}: {found.group(0)!r} quotes {list(found.groups())}, the JSON has {expected}")
    return out


def every_mismatch() -> list[str]:
    out = [m for table in DOCS for m in mismatches(table)]
    out += [m for name, rows in FEDBM_TABLES.items() for m in fedbm_mismatches(name, rows)]
    return out + quote_mismatches()


def test_every_results_table_of_the_docs_quotes_its_json():
    assert every_mismatch() == []


def test_a_number_that_disagrees_with_its_json_is_found(monkeypatch):
    """The check is not vacuous: one digit changed in a docs table, and rounding the other way, are both caught."""
    original = Path.read_text

    def changed(self: Path, *args: Any, **kwargs: Any) -> str:
        text = original(self, *args, **kwargs)
        return text.replace("| FedSimCLR | 55.6 ± 3.6 (71) |", "| FedSimCLR | 55.7 ± 3.6 (71) |") if self.name == "mfcl.md" else text

    monkeypatch.setattr(Path, "read_text", changed)
    assert [m for m in every_mismatch() if "FedSimCLR / Sc1" in m]
    assert agrees("2.0", 1.95) and not agrees("1.9", 1.95) and agrees("+6.55", 6.55) and not agrees("+6.54", 6.55)


@pytest.mark.parametrize("table", DOCS, ids=lambda t: f"{t.doc}:{t.header[:30]}")
def test_each_mapped_table_is_found_with_its_rows(table):
    rows = parse(table.doc, table.header)
    assert len(rows) == len(table.rows) and not any("malformed" in r for r in rows)
