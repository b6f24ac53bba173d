"""The results tables of docs/*.md and README.md quote the committed JSON, number by number (issue 44 item 4).

Each docs table below is found by its header line and mapped explicitly: which JSON record each of its rows
quotes (a table's cell, a claim's finding, a control, a kept cell's result.json) and which fields each of its
columns holds. A quoted number must be the JSON's value rounded half away from zero to the decimals the docs
print (``reproduce.table_page.rounded``, as table.md rounds it); a row or column the map does not name fails the test
(unless listed as not quoted from a committed file), so a table cannot drift from its JSON, nor grow unchecked.
Sentences outside tables that quote a number are checked as QUOTES: a pattern and the JSON values it must hold.

Every table of numbers in docs/*.md and README.md (issue 52 item 5) is either checked here or exempt, with a one-line
reason, in ``tests/support/docs_tables.py``; a table added to the docs without that decision fails
(:func:`undecided_tables`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from itertools import takewhile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprior.reproduce.table_page import rounded
from fedprior.results.paired import paired
from tests.support.docs_tables import EXEMPT

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "benchmarks" / "results" / "tables"
CELLS = ROOT / "benchmarks" / "results" / "cells"
NUMBER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[+-]?\d+(?:\.\d+)?")  # 1,047 is one number


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
"""(docs row label, docs column header) -> the JSON values the cell quotes, in the order it prints them (text: a word it must
hold; ``...``: a number the cell quotes from no committed file, e.g. an older run in brackets)."""


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
    first: str | None = None
    """Where several tables of a page have this header: the first cell of this one's first row."""
    unquoted_rows: tuple[str, ...] = ()
    """Rows whose numbers come from no committed file (an earlier run the file no longer holds; said beside the table)."""


def parse(doc: str, header: str, first: str | None = None) -> list[dict[str, str]]:
    """The rows of the table under ``header`` in ``doc``, each a dict column -> text; where several tables have that
    header, the one whose first row's first cell is ``first``."""
    lines = (ROOT / doc).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line == header and (first is None or lines[i + 2 : i + 3] and cells_of(lines[i + 2])[0] == first)]
    if len(starts) != 1:
        return [{"malformed": f"the header{'' if first is None else f' above a first row {first!r}'}, found {len(starts)} times"}]
    names = [name if name not in cells_of(header)[:i] else f"{name} ({i + 1})" for i, name in enumerate(cells_of(header))]  # repeated names stay apart
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        cells = cells_of(line)
        rows.append(dict(zip(names, cells, strict=True)) if len(cells) == len(names) else {"malformed": line})
    return rows


def cells_of(line: str) -> list[str]:
    """A table line's cells (an escaped ``\\|`` stays in its cell)."""
    text = line.strip().removeprefix("|")
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    return [c.strip() for c in re.split(r"(?<!\\)\|", text)]


def agrees(quoted: str, value: Any) -> bool:
    """``quoted`` (e.g. '+6.5', '2.0') is ``value`` rounded half away from zero to the decimals it prints."""
    places = len(quoted.partition(".")[2])
    return Decimal(quoted.lstrip("+").replace(",", "")) == Decimal(rounded(float(value), places))


def mismatches(table: DocTable) -> list[str]:
    out = []
    rows = parse(table.doc, table.header, table.first)
    malformed = [r["malformed"] for r in rows if "malformed" in r]
    if malformed:
        return [f"{table.doc}: {table.header!r}: not a table of its header's columns: {line!r}" for line in malformed]
    labels = tuple(" | ".join(list(r.values())[: table.keys]).replace("*", "") for r in rows)
    if labels != table.rows:
        return [f"{table.doc} {table.header!r}: rows {labels} are not the mapped {table.rows}"]
    for label, row in zip(labels, rows, strict=True):
        if label in table.unquoted_rows:
            continue
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
            wrong = [(q, v) for q, v in zip(checked, numbers, strict=False) if v is not ... and not agrees(q, v)]
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

# ------------------------------------------------------------------------------------------------ findings tables


def fedbm_claim(label: str) -> str:
    """docs/fedbm.md's claim label ('FedBM > FedETF, F1, beta 0.05 (+10.1)') -> the claim ('FedBM > FedETF, F1 (beta=0.05)')."""
    found = re.fullmatch(r"(.*), beta (\S+) \(\S+\)", label)
    assert found, label
    return f"{found.group(1)} (beta={found.group(2)})"


def fedbm_claims(name: str) -> Getter:
    """'today' quotes the mean, the interval and (where more than 3) the seeds; the verdict its word."""

    def values(row: str, column: str) -> list[Any]:
        if column == "verdict":
            return finding(name, fedbm_claim(row), "verdict")
        return finding(name, fedbm_claim(row), "mean", "low", "high", "n")

    return values


FEDBM_CLAIM_HEADER = "| claim (paper) | today: paired difference, mean [95% interval] | verdict | older code |"
FST_TABLES = {"1": "fst-cbdg-table1", "2": "fst-cbdg-table2", "3": "fst-cbdg-table3", "4": "fst-cbdg-table4"}


def fst_claims(row: str, column: str) -> list[Any]:
    number, claim = row.split(" | ")
    return finding(FST_TABLES[number], claim, *CLAIM_FIELDS[column])


def fst_claim_rows() -> tuple[str, ...]:
    return tuple(f"{n} | {f['claim']}" for n, name in FST_TABLES.items() for f in table_json(name)["findings"])


DOCS += (
    DocTable(
        "docs/fedbm.md",
        FEDBM_CLAIM_HEADER,
        fedbm_claims("fedbm-table1"),
        (
            "FedBM > FedETF, F1, beta 0.05 (+10.1)",
            "FedBM > FedETF, F1, beta 0.1 (+6.5)",
            "FedBM > FedETF, beta 0.05 (+7.0)",
            "FedBM > FedNH, beta 0.1 (+5.8)",
            "FedBM > FedProx, beta 0.1 (+9.9)",
        ),
        unquoted=("older code",),  # the cells before issue 30, in git history only
        first="FedBM > FedETF, F1, beta 0.05 (+10.1)",
    ),
    DocTable(
        "docs/fedbm.md",
        FEDBM_CLAIM_HEADER,
        fedbm_claims("fedbm-table6"),
        (
            "FedBM > w/o LKCC, F1, beta 0.05 (+1.6)",
            "FedBM > w/o LKCC, F1, beta 0.1 (+3.2)",
            "FedBM > w/o CGDE, beta 0.05 (+5.7)",
            "FedBM > w/o CGDE, beta 0.1 (+3.3)",
        ),
        unquoted=("older code",),
        first="FedBM > w/o LKCC, F1, beta 0.05 (+1.6)",
    ),
    DocTable("docs/fst-cbdg.md", "| table | claim | mean | sd | 95% interval | verdict | paper |", fst_claims, fst_claim_rows(), keys=2),
)

# ------------------------------------------------------------------------------------------------ benchmarks/results/*.json

RESULTS = ROOT / "benchmarks" / "results"


@cache
def result_json(path: str) -> Any:
    return json.loads((RESULTS / path).read_text())


def percent(value: float) -> float:
    """A fraction as % (exactly: 0.7245 -> 72.45)."""
    return float(Decimal(repr(value)) * 100)


FEDBM_TIMING = {  # docs/fedbm.md's timing row: column -> its cell in fedbm_table_timing.json
    "Central": "Central_Learning",
    "FedAvg": "FedAvg",
    "FedProx": "FedProx",
    "FedNH": "FedNH",
    "FedETF": "FedETF",
    "FedBM": "FedBM",
    "FedBM + BS": "FedBM_balanced_softmax",
    "FedETF (CE)": "FedETF_plain_CE_",
    "FedDyn": "FedDyn",
    "SCAFFOLD": "Scaffold",
    "FedREP": "FedREP",
    "FedROD": "FedROD",
    "FedProto": "FedProto",
}


def fedbm_timing(row: str, column: str) -> list[float]:
    return [result_json("fedbm_table_timing.json")["cells"][f"{FEDBM_TIMING[column]}--beta=0.05--seed0"]["wall_seconds"]]


FEDDB_SETTINGS = {  # docs/feddb.md's setting table: row -> its key in feddb_setting.json
    "width 8, 40 rounds, 4000 labels, E = 5 (the former presets)": "w8-r40-l4000-e5",
    "width 8, 40 rounds, 1000 labels, E = 5": "w8-r40-l1000-e5",
    "width 16, 40 rounds, 1000 labels, E = 5": "w16-r40-l1000-e5",
    "width 16, 100 rounds, 1000 labels, E = 1": "w16-r100-l1000-e1",
    "width 8, 200 rounds, 1000 labels, E = 5": "w8-r200-l1000-e5-v5",
    "width 8, 200 rounds, 500 labels, E = 5": "w8-r200-l500-e5-v5",
    "width 8, 200 rounds, 250 labels, E = 5": "w8-r200-l250-e5-v5",
}


def feddb_setting(row: str, column: str) -> list[Any]:
    setting = result_json("feddb_setting.json")["settings"][FEDDB_SETTINGS[row]]
    controls = setting["controls"]
    return {
        "labeled-only": [controls["labeled-only"]["best_accuracy"]],
        "all labels": [controls["all labels"]["best_accuracy"]],
        "gap": [setting["gap"]],
        "all labels' last-10% move": [controls["all labels"]["late_change"]],
        "informative": ["yes" if setting["informative"] else "no"],
    }[column]


FEDDB_CENTRAL = {
    "the presets (FixMatch's views; lr 0.1)": "preset",
    "mild views: no flip, `weak_shift = 0.07` (2 pixels), `strong_ops = 1`, `cutout = 0.25`": "mild-views",
    "mild views, lr 0.03 (the paper's)": "mild-views-lr0.03",
    "mild views, width 16": "mild-views-w16",
}


def feddb_setting_central(row: str, column: str) -> list[Any]:
    setting = result_json("feddb_setting_central.json")["settings"][FEDDB_CENTRAL[row]]
    central, views = setting["controls"]
    return {
        "Central (labels only)": [setting["rows"]["Central (labels only)"]["best_accuracy"]],
        "Central FixMatch": [setting["rows"]["Central FixMatch"]["best_accuracy"]],
        "difference (>= 5)": [central["difference"]],
        "strong views (>= 60)": [views["value"]],
        "informative": ["yes" if setting["informative"] else "no"],
    }[column]


def standin_recipe(row: str, column: str) -> list[Any]:
    record = result_json("standin_recipes.json")
    recipe = row.replace("*", "").split(" = ")[0].split(",")[0].split(" ")[0]
    seed = 1 if "seed check" in row else 0
    found = (
        record["reference"]
        if recipe == "v1"
        else next(c for c in [*record["candidates"], *record["seed_check"]] if (c["recipe"], c["pretrain_seed"]) == (recipe, seed))
    )
    fields = {
        "epochs": found["settings"]["epochs"],
        "caption_noise": found["settings"]["caption_noise"],
        "pretrain seed": found["pretrain_seed"],
        "zero-shot": found["zero_shot"],
        "entropy": found["entropy"],
        "probe (preset)": found["probe_preset"],
        "probe (logreg)": found["probe_logreg"],
        "headroom": found["headroom"],
        "build s": found["build_seconds"],
    }
    return [] if column == "build s" and recipe == "v1" else [fields[column]]


def table_budget(row: str, column: str) -> list[float]:
    found = next(t for t in result_json("table_budgets.json")["tables"] if t["table"] == row)
    return {
        "cells (own)": [found["cells"], found["own_cells"]],
        "core-minutes (own)": [found["core_minutes"], found["own_core_minutes"]],
        "wall minutes at --jobs 2: alone / after shared cells": [found["wall_minutes_alone"], found["wall_minutes_after_shared"]],
        "slowest cell, s": [found["slowest_cell_seconds"]],
        "a seed plan's cells (core-minutes)": [found["plan_cells"], found["plan_core_minutes"]],
    }[column]


ROBUST_RULES = {"FedAvg (mean)": "fedavg", "median": "median", "trimmed mean": "trimmed_mean", "Krum": "krum", "Multi-Krum": "multi_krum"}
ROBUST_COLUMNS = {  # column -> the attack in robust_aggregation.json's summary
    "no attack": "no_attack",
    "sign flip x4": "sign_flip:4",
    "vs FedAvg under sign flip": "sign_flip:4",
    "Gaussian s = 1": "gaussian:1",
    "vs FedAvg under Gaussian": "gaussian:1",
}


def robust_aggregation(row: str, column: str) -> list[Any]:
    """A rule's final accuracy, mean ± sd over seeds (%; a run that diverged counts at chance), or its paired difference
    to FedAvg under the same attack, mean [95% interval]."""
    summary = result_json("robust_aggregation.json")["summary"]
    found = summary[f"{ROBUST_COLUMNS[column]}/{ROBUST_RULES[row]}"]
    if column.startswith("vs FedAvg"):
        versus = found["vs_fedavg_under_attack"]
        return [percent(versus["mean"]), *(percent(v) for v in versus["ci95"])]
    if found["diverged_seeds"]:
        return [len(found["diverged_seeds"]), len(found["seeds"]), 10.0, "diverged"]
    return [percent(found["mean"]), percent(found["sd"])]


SYNTHETIC_SETTINGS = {"Synthetic(1, 1)": "synthetic(1,1)", "Synthetic IID": "synthetic-iid"}
SYNTHETIC_ALGORITHMS = {"FedAvg": "fedavg", "FedProx, mu = 1": "fedprox(mu=1)"}


def synthetic_runs(row: str, column: str) -> list[float]:
    """docs/synthetic.md's runs, per seed 0 / 1 / 2: the training loss's mean over rounds 6-10, its mean |round-to-round
    change| over the rounds, the test accuracy after round 10 (%)."""
    setting, algorithm = row.split(" | ")
    runs = result_json("synthetic_fedprox.json")["runs"][SYNTHETIC_SETTINGS[setting]][SYNTHETIC_ALGORITHMS[algorithm]]
    seeds = [runs[s] for s in ("0", "1", "2")]
    if column.startswith("training loss"):
        return [float(np.mean(r["training_loss"][5:])) for r in seeds]
    if column.startswith("mean round-to-round"):
        return [float(np.mean(np.abs(np.diff(r["training_loss"])))) for r in seeds]
    return [percent(r["final_test_accuracy"]) for r in seeds]


NO_GAP = "no paper gap: detectable only"


def power_columns(found: dict[str, Any]) -> dict[str, list[Any]]:
    """A judged difference's power (issue 52): what it detects, the paper's gap (or the words saying there is none) and its seeds."""
    gap = found["gap"]
    return {
        "detects (80% power)": [found["detectable"]],
        "paper gap": [NO_GAP] if gap is None else [gap],
        "seeds for gap": [] if gap is None else [found["seeds_needed"]],
    }


def synthetic_verdicts(row: str, column: str) -> list[Any]:
    verdict = result_json("synthetic_fedprox.json")["verdicts"][row]
    return {
        "paired difference per seed (FedAvg - FedProx)": verdict["per_seed"],
        "mean (sd)": [verdict["mean"], verdict["sd"]],
        **power_columns(verdict),
        "verdict": [verdict["verdict"].replace("reversed", "fails"), verdict["holds_in_seeds"], len(verdict["per_seed"])] if verdict["holds_in_seeds"] else [],
    }[column]


DOCS += (
    DocTable("docs/fedbm.md", "| " + " | ".join(FEDBM_TIMING) + " |", fedbm_timing, ("",), keys=0),  # one row, no label
    DocTable("docs/feddb.md", "| setting | labeled-only | all labels | gap | all labels' last-10% move | informative |", feddb_setting, tuple(FEDDB_SETTINGS)),
    DocTable(
        "docs/feddb.md",
        "| candidate (overrides of the δ = 0.3 column) | Central (labels only) | Central FixMatch | difference (>= 5) | strong views (>= 60) | informative |",
        feddb_setting_central,
        tuple(FEDDB_CENTRAL),
    ),
    DocTable(
        "docs/fst-cbdg.md",
        "| recipe | epochs | caption_noise | pretrain seed | zero-shot | entropy | probe (preset) | probe (logreg) | headroom | build s |",
        standin_recipe,
        ("v1 (reference, shipped)", "e40-n0.4", "e50-n0.4", "e60-n0.4", "e30-n0.5 = v2-headroom", "e40-n0.5", "e30-n0.5, seed check"),
    ),
    DocTable(
        "docs/runs.md",
        "| table | cells (own) | core-minutes (own) | wall minutes at --jobs 2: alone / after shared cells | slowest cell, s | a seed plan's cells (core-minutes) |",
        table_budget,
        tuple(t["table"] for t in result_json("table_budgets.json")["tables"]),
    ),
    DocTable(
        "docs/privacy-robustness.md",
        "| rule | no attack | sign flip x4 | vs FedAvg under sign flip | Gaussian s = 1 | vs FedAvg under Gaussian |",
        robust_aggregation,
        tuple(ROBUST_RULES),
    ),
    DocTable(
        "docs/synthetic.md",
        "| setting | algorithm | training loss, mean of rounds 6-10 | mean round-to-round change | test accuracy after round 10 |",
        synthetic_runs,
        tuple(f"{s} | {a}" for s in SYNTHETIC_SETTINGS for a in SYNTHETIC_ALGORITHMS),
        keys=2,
    ),
    DocTable(
        "docs/synthetic.md",
        "| claim | paired difference per seed (FedAvg - FedProx) | mean (sd) | detects (80% power) | paper gap | verdict |",
        synthetic_verdicts,
        ("lower-loss", "steadier", "iid-alike (control)"),
    ),
)

# ------------------------------------------------------------------------------------------------ docs/mfcl.md's setting runs


def mfcl_setting(name: str, row: str, seed: int | None = None) -> float:
    """A row's linear accuracy in one candidate setting of mfcl_setting.json: its mean over seeds, or one seed's."""
    found = result_json("mfcl_setting.json")["settings"][name]["rows"][row]
    return found["mean"] if seed is None else found["values"][seed]


def mfcl_setting_control(name: str, above: str) -> float:
    """The difference of a trained row's control in one candidate setting (trained minus the same network untrained)."""
    return next(c for c in result_json("mfcl_setting.json")["settings"][name]["controls"] if c["condition"].startswith(f"{above} at least"))["difference"]


MFCL_6K_ROWS = {"MFCL(PN) sensor (after phase 1)": "MFCL(PN) sensor", "FedAvg (supervised)": "FedAvg"}


def mfcl_first_setting(row: str, column: str) -> list[Any]:
    """docs/mfcl.md's first setting table, column 6k-e2 (seed 0; the trained rows with their wall seconds; the controls)."""
    if row == "controls":
        return [mfcl_setting_control("6k-e2", "MFCL(PN)"), mfcl_setting_control("6k-e2", "FedSimCLR"), "not informative"]
    name = MFCL_6K_ROWS.get(row, row)
    found = result_json("mfcl_setting.json")["settings"]["6k-e2"]["rows"][name]
    return [found["mean"], found["seconds"]] if row in ("MFCL(PN)", "FedSimCLR") else [found["mean"]]


MFCL_CANDIDATES = {
    "the presets (SimCLR crops of at least 8% of the image)": "preset",
    "crops of at least 30% (`algorithm.min_scale = 0.3`, every row)": "crop0.3",
    "Eq. 3 as printed": "crop0.3-pn-eq3",
}
MFCL_CONTROL_COLUMNS = {  # column -> (its row, the untrained row its difference is to; None: no difference)
    "MFCL(PN)": ("MFCL(PN)", "MFCL(PN)"),
    "untrained": ("MFCL(PN) untrained", None),
    "Central MFCL(PN)": ("Central MFCL(PN)", "Central MFCL(PN)"),
    "FedSimCLR": ("FedSimCLR", "FedSimCLR"),
    "untrained (6)": ("FedSimCLR untrained", None),
    "Central FedSimCLR": ("Central FedSimCLR", "Central FedSimCLR"),
}


def mfcl_candidates(row: str, column: str) -> list[Any]:
    """docs/mfcl.md's candidate tables: each row's accuracy (mean over the candidate's seeds) and its control's difference."""
    name = MFCL_CANDIDATES[row]
    if column == "informative":
        return ["yes" if result_json("mfcl_setting.json")["settings"][name]["informative"] else "no"]
    found, control = MFCL_CONTROL_COLUMNS[column]
    return [mfcl_setting(name, found)] + ([] if control is None else [mfcl_setting_control(name, control)])


MFCL_EPOCHS = {"one local epoch (seed 0)": "crop0.3-server1", "three local epochs (seed 0)": "crop0.3-server1-e3"}


def mfcl_local_epochs(row: str, column: str) -> list[Any]:
    """docs/mfcl.md's local-epochs table: seed 0's accuracy, its difference to the same network untrained (seed 0)."""
    name = MFCL_EPOCHS[column]
    untrained = "MFCL(PN) untrained" if "MFCL" in row else "FedSimCLR untrained"
    value = mfcl_setting(name, row, 0)
    words = ["fails"] if mfcl_setting_control(name, row) < 5 and name.endswith("e3") else []
    return [value, value - mfcl_setting(name, untrained, 0), *words]


def mfcl_server_epochs(row: str, column: str) -> list[float]:
    """docs/mfcl.md's server-phase table: a Table 2 cell (Sc2) minus the same network untrained after server epoch N."""
    name, seed = row.rsplit(", ", 1)
    found = next(
        c
        for c in result_json("mfcl_server_epochs.json")["cells"]
        if c["cell"].startswith("mfcl-table2/") and (c["row"], c["column"], c["seed"]) == (name, "Sc2", int(seed))
    )
    return [found["minus_untrained"][int(column.removeprefix("epoch ")) - 1]]


BN_COLLAPSE = {  # docs/mfcl.md's rows (sensor norm | probe, test input) -> the run in mfcl_bn_collapse/results.json
    "BN, running (the preset) | pool, clean": "bn running pool (the preset)",
    "BN, batch | pool, clean": "bn batch pool",
    "BN, running | uploads, clean": "bn running uploads",
    "BN, batch | uploads, clean": "bn batch uploads",
    "BN, running | uploads, views": "bn running uploads views",
    "BN, batch | uploads, views": "bn batch uploads views",
    "PN (the preset) | pool, clean": "pn pool (the preset)",
    "PN | uploads, clean": "pn uploads",
    "PN | uploads, views": "pn uploads views",
}


def bn_collapse(row: str, column: str) -> list[float]:
    return [percent(result_json("mfcl_bn_collapse/results.json")["runs"][f"{BN_COLLAPSE[row]} | {column} | seed 0"]["final_accuracy"])]


BN_TRACE_ROWS = {  # docs/mfcl.md's rows of the BN trace -> (section, key) in mfcl_bn_trace/results.json
    "MFCL(BN) untrained": ("untrained", "mfcl-bn"),
    "MFCL(PN) untrained": ("untrained", "mfcl"),
    "MFCL(GN) untrained": ("untrained", "mfcl-gn"),
    "MFCL(BN), Sc1": ("trained", "Sc1"),
    "MFCL(BN), Sc10": ("trained", "Sc10"),
    "MFCL(BN), Sc10, seed 1": ("trained", "Sc10 seed 1"),
    "MFCL(BN), Sc10, seed 2": ("trained", "Sc10 seed 2"),
}
BN_TRACE_COLUMNS = {  # its columns -> the variant's name (untrained, trained)
    "as the table evaluates it": ("fresh statistics (the control)", "as stored (FedAvg-averaged statistics: the table)"),
    "sensor recalibrated": ("sensor recalibrated",) * 2,
    "discriminator recalibrated": ("discriminator recalibrated",) * 2,
    "both recalibrated": ("sensor and discriminator recalibrated",) * 2,
    "sensor at its clients' statistics": (None, "sensor set to the clients' own clean statistics, averaged by size"),
}
BN_TRACE_CURVE = {  # the curve's rows -> (scenario, the variant)
    "Sc1, untrained discriminator, statistics as stored": ("Sc1", "untrained discriminator, sensor statistics as stored"),
    "Sc1, untrained discriminator, sensor recalibrated": ("Sc1", "untrained discriminator, sensor recalibrated"),
    "Sc1, sensor features alone, as stored": ("Sc1", "sensor features, as stored"),
    "Sc10, untrained discriminator, statistics as stored": ("Sc10", "untrained discriminator, sensor statistics as stored"),
    "Sc10, untrained discriminator, sensor recalibrated": ("Sc10", "untrained discriminator, sensor recalibrated"),
    "Sc10, sensor features alone, as stored": ("Sc10", "sensor features, as stored"),
}
BN_TRACE_LAYERS = {  # the per-layer table's rows -> the comparison's name
    "stored (FedAvg of the running statistics)": "stored (FedAvg of running statistics)",
    "the clients' own statistics of their clean images, averaged (Eq. 1)": "clients' own clean statistics, averaged",
    "the pool's SimCLR views (one batch)": "the pool's SimCLR views (one batch)",
}


def bn_trace(row: str, column: str) -> list[float]:
    """docs/mfcl.md's table of the BN trace: a State evaluated with other running statistics."""
    section, key = BN_TRACE_ROWS[row]
    found = result_json("mfcl_bn_trace/results.json")[section][key]
    variant = BN_TRACE_COLUMNS[column][section == "trained"]
    return [percent((found["accuracy"] if section == "trained" else found)[variant])]


def bn_trace_curve(row: str, column: str) -> list[float]:
    scenario, variant = BN_TRACE_CURVE[row]
    return [percent(result_json("mfcl_bn_trace/results.json")["trained"][scenario]["curve"][column][variant])]


def bn_trace_layers(row: str, column: str) -> list[float]:
    scenario, layer = column.split(" layer ")
    found = result_json("mfcl_bn_trace/results.json")["trained"][scenario]["sensor_layers_vs_pool"][BN_TRACE_LAYERS[row]][int(layer) - 1]
    return [found["mean_shift_in_pool_sd"], found["var_ratio_geomean"]]


DOCS += (
    DocTable(
        "docs/mfcl.md",
        "| row | preset (2,000 images, 1 local epoch) | 6k-e2 (6,000 images, 2 local epochs) |",
        mfcl_first_setting,
        (
            "MFCL(PN)",
            "MFCL(PN) untrained",
            "FedSimCLR",
            "FedSimCLR untrained",
            "raw pixels",
            "MFCL(PN) sensor (after phase 1)",
            "MFCL(PN) sensor untrained",
            "FedAvg (supervised)",
            "controls",
        ),
        unquoted=("preset (2,000 images, 1 local epoch)",),  # the file's "preset" setting is a later rerun (the next table)
    ),
    DocTable(
        "docs/mfcl.md",
        "| candidate | MFCL(PN) | untrained | Central MFCL(PN) | FedSimCLR | untrained | Central FedSimCLR | informative |",
        mfcl_candidates,
        tuple(MFCL_CANDIDATES)[:2],
    ),
    DocTable(
        "docs/mfcl.md",
        "| PN | MFCL(PN) | untrained | Central MFCL(PN) | FedSimCLR | untrained | Central FedSimCLR | informative |",
        mfcl_candidates,
        ("the reading (default, Table 2)", "Eq. 3 as printed"),
        unquoted_rows=("the reading (default, Table 2)",),  # Table 2's 3-seed cells of that time, replaced since by its planned seeds
    ),
    DocTable(
        "docs/mfcl.md",
        "| row | one local epoch (seed 0) | three local epochs (seed 0) |",
        mfcl_local_epochs,
        ("MFCL(PN)", "Central MFCL(PN)", "FedSimCLR", "Central FedSimCLR"),
    ),
    DocTable(
        "docs/mfcl.md",
        "| row, seed | epoch 1 | 2 | 3 | 4 | 5 | 10 |",
        lambda row, column: mfcl_server_epochs(row, column if column.startswith("epoch") else f"epoch {column}"),
        tuple(f"{row}, {seed}" for row in ("MFCL(PN)", "Central MFCL(PN)") for seed in range(3)),
    ),
    DocTable("docs/mfcl.md", "| sensor norm, `encode_bn` | probe trained on (B7), test input (B8) | Sc1 | Sc2 |", bn_collapse, tuple(BN_COLLAPSE), keys=2),
    DocTable(
        "docs/mfcl.md",
        "| network (seed 0 unless named) | as the table evaluates it | sensor recalibrated | discriminator recalibrated | both recalibrated "
        "| sensor at its clients' statistics |",
        bn_trace,
        tuple(BN_TRACE_ROWS),
    ),
    DocTable("docs/mfcl.md", "| seed 0, the sensor after round | 0 | 1 | 2 | 5 | 10 | 15 |", bn_trace_curve, tuple(BN_TRACE_CURVE)),
    DocTable(
        "docs/mfcl.md",
        "| sensor statistics against the pool's (seed 0): mean shift (pool sd), variance ratio | Sc1 layer 1 | Sc1 layer 2 | Sc10 layer 1 | Sc10 layer 2 |",
        bn_trace_layers,
        tuple(BN_TRACE_LAYERS),
    ),
)

# ------------------------------------------------------------------------------------------------ the GPU setting's first run

GPU_SETTING = "device-2026-11-27/gpu-setting/gpu_setting.json"
FEDDB_GPU_CELLS = {  # docs/feddb.md's rows -> the cell folder gpu_setting.json reports the progress of
    "Central (labels only)": "Central_labels_only_--_=0.3--seed0",
    "Central FixMatch": "Central_FixMatch--_=0.3--seed0",
    "FedAvg (labels)": "FedAvg--_=0.3--seed0",
    "FedAvg (all labels)": "FedAvg_all_labels_--_=0.3--seed0",
    "FixMatch": "FixMatch--_=0.3--seed0",
}


def feddb_gpu_progress(row: str, column: str) -> list[Any]:
    """Where each FedDB cell of the GPU setting's first run stood when it was stopped: rounds done of planned, the last
    test accuracy, seconds a round, and the seconds its rounds would take at that pace (as s, or as minutes where it says min)."""
    found = next(p for p in result_json(GPU_SETTING)["tables"]["feddb"]["progress"] if p["cell"] == FEDDB_GPU_CELLS[row])
    return {
        "rounds done": [found["rounds_done"], found["rounds_planned"]],
        "accuracy": [percent(found["last_accuracy"])],
        "s a round (12 processes on the GPU)": [found["seconds_per_round"]],
        "its whole budget at that pace": [found["projected_seconds"] if found["projected_seconds"] < 60 else found["projected_seconds"] / 60],
    }[column]


def mfcl_gpu_rows(row: str, column: str) -> list[Any]:
    """The MFCL rows of the GPU setting's first run: a finished cell's rounds and linear accuracy, a stopped one's rounds
    done of planned and last accuracy; FedSimCLR untrained's accuracy is in the run's log (extra_gpu-setting.log)."""
    name = row.split(" (")[0]
    table = "mfcl" if "MFCL" in name else "others"
    folder = re.sub(r"[^A-Za-z0-9]+", "_", name) + "--Sc2--seed0"
    progress = next(p for p in result_json(GPU_SETTING)["tables"][table]["progress"] if p["cell"] in (folder, folder.replace("_--", "--")))
    finished = {c["row"]: c["ours"] for c in result_json(GPU_SETTING)["tables"][table]["cells"]}
    if column == "rounds":
        return [progress["rounds_planned"]] if name in finished or progress["rounds_planned"] == 0 else [progress["rounds_done"], progress["rounds_planned"]]
    if name in finished:
        return [finished[name]]
    if progress["last_accuracy"] is not None:
        return [percent(progress["last_accuracy"])]
    log = (RESULTS / "device-2026-11-27" / "extra_gpu-setting.log").read_text()
    found = re.search(rf"^\s*{re.escape(name)}\s+Sc2\s+seed 0\s+ours\s+(\S+)", log, re.MULTILINE)
    assert found, name
    return [float(found.group(1))]


DOCS += (
    DocTable(
        "docs/feddb.md",
        "| row (ConvNet 32 wide, δ = 0.3) | rounds done | accuracy | s a round (12 processes on the GPU) | its whole budget at that pace |",
        feddb_gpu_progress,
        (*FEDDB_GPU_CELLS, "FedDB"),
        unquoted_rows=("FedDB",),  # not started: nothing in the file
    ),
    DocTable(
        "docs/mfcl.md",
        "| row (networks 32 wide, 10,000 images) | rounds | linear accuracy |",
        mfcl_gpu_rows,
        ("MFCL(PN) untrained", "Central MFCL(PN) (30 server epochs)", "MFCL(PN)", "FedSimCLR untrained", "Central FedSimCLR", "FedSimCLR"),
    ),
)

# ------------------------------------------------------------------------------------------------ docs/runtime.md: population scale

POPULATION_COLUMNS = {
    "peak RSS MB": "peak_rss_mb",
    "set-up s": "setup_seconds",
    "median round s": "median_round_seconds",
    "checkpoint bytes": "checkpoint_bytes",
}
SLOPE_COLUMNS = {"peak RSS": "peak_rss_mb", "set-up": "setup_seconds", "round": "median_round_seconds", "checkpoint": "checkpoint_bytes"}


def population_case(row: str, column: str) -> list[float]:
    data, algorithm, m, n = row.split(" | ")
    return [result_json("population_scale.json")["cases"][f"{data}/{algorithm}/m={m}/N={n.replace(',', '')}"][POPULATION_COLUMNS[column]]]


def population_slopes(row: str, column: str) -> list[float | None]:
    """A series' log-log slope against N over all its Ns, then from N = 10^4 up (None: '-')."""
    slopes = result_json("population_scale.json")["slopes"][row]
    return [slopes[SLOPE_COLUMNS[column]], slopes[f"{SLOPE_COLUMNS[column]}_from_1e4"]]


def population_rows() -> tuple[str, ...]:
    return tuple(
        " | ".join((c["data"], c["algorithm"], str(c["per_round"]), f"{c['clients']:,}"))
        for c in sorted(result_json("population_scale.json")["cases"].values(), key=lambda c: (c["data"], c["algorithm"], c["per_round"], c["clients"]))
    )


DOCS += (
    DocTable(
        "docs/runtime.md",
        "| data | algorithm | m | N | peak RSS MB | set-up s | median round s | checkpoint bytes |",
        population_case,
        population_rows(),
        keys=4,
    ),
    DocTable(
        "docs/runtime.md",
        "| series | peak RSS | set-up | round | checkpoint |",
        population_slopes,
        (
            "fmnist-dirichlet/fedavg/m=10",
            "fmnist-iid/fedavg/m=10",
            "synthetic/fedavg/m=10",
            "synthetic/fedavg/m=100",
            "synthetic/scaffold/m=10",
            "synthetic/scaffold/m=100",
        ),
    ),
)

# ------------------------------------------------------------------------------------------------ docs/runtime.md: paper scale on the CPU

PAPER_SCALE_ROWS = {
    "FedDB (ConvNet 8 wide, 20 clients, 2 a round)": "feddb",
    "MFCL server epoch (1,000 pairs, ResNet-18 8 wide)": "mfcl",
    "FedBM (ConvNet, 64x64, 6 clients, CGDE every round)": "fedbm",
}
PAPER_SCALE_COLUMNS = {
    "s / round": "seconds_per_round",
    "TFLOP / round": "tflop_per_round",
    "TFLOP/s": "achieved_tflops",
    "evaluation, s": "evaluation_seconds",
}


def paper_scale_cpu(row: str, column: str) -> list[Any]:
    """paper_scale_cpu.json's small settings; in brackets, the code before issue 19 on the same machine (not kept: ``...``)."""
    found = result_json("paper_scale_cpu.json")["settings"][PAPER_SCALE_ROWS[row]][PAPER_SCALE_COLUMNS[column]]
    return [found, ...] if column in ("s / round", "evaluation, s") else [found]


LAUNCH_PIECES = {
    "strong view (FixMatch's RandAugment, two operations, and Cutout)": "strong_view",
    "WRN-28-2 forward and backward": "forward_backward",
    "SGD step (the CPU's per-parameter loop; on CUDA one fused kernel)": "optimizer_step",
    "gradient clipping (per parameter on the CPU; multi-tensor kernels on CUDA)": "clip_grad_norm",
    "weak view (flip and shift)": "weak_view",
}


def launch_pieces(row: str, column: str) -> list[int]:
    return [result_json("paper_scale_cpu_launches.json")["settings"]["feddb"]["profile"]["pieces"][LAUNCH_PIECES[row]]["aten_calls"]]


DOCS += (
    DocTable("docs/runtime.md", "| setting (small) | s / round | TFLOP / round | TFLOP/s | evaluation, s |", paper_scale_cpu, tuple(PAPER_SCALE_ROWS)),
    DocTable("docs/runtime.md", "| piece of a FedDB client step | operator calls |", launch_pieces, tuple(LAUNCH_PIECES)),
)


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
    return {
        "per seed": found["per_seed"],
        "mean": [found["mean"]],
        "95% interval": found["interval_95"],
        "verdict": [found["verdict"]],
        **power_columns(found),
    }[column]


DOCS += (
    DocTable(
        "docs/system-heterogeneity.md",
        "| devices | method | final accuracy % | simulated time s | time to FedAvg's final s | reached | updates dropped | updates shortened |",
        system_methods,
        SYSTEM_ROWS,
        keys=2,
    ),
    DocTable(
        "docs/system-heterogeneity.md",
        "| claim or control | per seed | mean | 95% interval | detects (80% power) | paper gap | seeds for gap | verdict |",
        system_claims,
        (*SYSTEM_CLAIMS, *SYSTEM_RATIOS),
    ),
)

# ------------------------------------------------------------------------------------------------ benchmarks/docs_runs.py's files
# (issue 52 item 5: the tables whose numbers are the printout of the commands shown beside them, kept by benchmarks/docs_runs.py)


def docs_run(name: str, command: str) -> dict[str, Any]:
    """The JSON printed by the command of ``benchmarks/results/docs_runs/NAME.json`` that ends with ``command`` (exactly one)."""
    (found,) = [r for r in result_json(f"docs_runs/{name}.json")["runs"] if r["command"].endswith(command)]
    assert found["exit_code"] == 0, found
    return found["output"]


def partition_scheme(row: str, column: str) -> list[Any]:
    """docs/huggingface.md: a row is the scheme's options (``fedprior partition ... --json`` plus them)."""
    out = docs_run("partition-schemes", row.strip("`"))
    classes = out["classes_per_client"]
    return {
        "samples used": [sum(out["client_sizes"])],
        "client size min / mean / max": [out["min_client_size"], out["mean_client_size"], out["max_client_size"]],
        "classes per client min / mean / max": [min(classes), sum(classes) / len(classes), max(classes)],
        "beta_cib (bits)": [out["beta_cib"]],
        "beta_hetero (bits)": [out["beta_hetero"]],
    }[column]


PARTITION_SCHEMES = (
    "`--scheme iid`",
    "`--scheme flwr:IidPartitioner`",
    "`--scheme dirichlet --alpha 0.5`",
    "`--scheme flwr:DirichletPartitioner --alpha 0.5`",
    "`--scheme dirichlet --alpha 0.5 --balance`",
    "`--scheme flwr:DirichletPartitioner --alpha 0.5 --flwr-kwargs '{self_balancing = true}'`",
    "`--scheme shard --shards 2`",
    "`--scheme flwr:ShardPartitioner --shards 2`",
)
SYSTEM_ILLUSTRATION = {  # docs/system-heterogeneity.md's illustration: row -> the --run-dir of its command
    "log-normal devices, no deadline": "none",
    "constant devices (0.0136 s an example), no deadline": "constant",
    "log-normal, deadline 5 s, stragglers dropped": "drop",
    "log-normal, deadline 5 s, partial work (rule fedprox)": "partial",
    "log-normal, deadline 5 s, over-selection 0.3 (7 sampled a round)": "over",
}


def system_illustration(row: str, column: str) -> list[Any]:
    out = docs_run("system-illustration", f"--run-dir {SYSTEM_ILLUSTRATION[row]} --json")
    return {
        "simulated time of 10 rounds": [out["simulated_time"]],
        "final accuracy": [percent(out["final_accuracy"])],
        "updates dropped past the deadline": [out["deadline_dropped_updates"], out["client_updates"]],
        "updates shortened": [out["partial_work_updates"]],
    }[column]


def synthetic_setup(row: str, column: str) -> list[float]:
    out = docs_run("synthetic-setup", f"synthetic_setup.py {row.replace(',', '')} --json")
    return {"RSS growth of set-up": [out["rss_growth_mb"]], "set-up time": [out["setup_seconds"]]}[column]


def secagg_cost(row: str, column: str) -> list[float]:
    rounds = docs_run("secagg-cost", "secagg_cost.py")[{"plain": "plain", "SecAgg+": "secagg"}[row]]
    if column.startswith("test accuracy"):
        return [r["accuracy"] for r in rounds]
    (found,) = [r["seconds"] for r in rounds if f"round {r['round']}" == column]
    return [found]


DP_SAMPLE = {  # docs/privacy-robustness.md's record-level DP runs: row -> how its command begins after `fedprior run fedavg-cnn`
    "`fedavg-cnn`, no DP": "fedavg-cnn --set federation.rounds",
    "`fedavg-cnn --set privacy.dp=sample`": "privacy.dp=sample --set federation.rounds",
    "`fedavg-cnn --set privacy.dp=sample --set algorithm.lr=0.2`": "privacy.dp=sample --set algorithm.lr=0.2 --set federation.rounds",
}


def dp_sample(row: str, column: str) -> list[Any]:
    (out,) = [r["output"] for r in result_json("docs_runs/dp-sample.json")["runs"] if DP_SAMPLE[row] + "=3 " in r["command"]]
    if column == "final accuracy (best)":
        return [percent(out["final_accuracy"]), percent(out["best_accuracy"])]
    return [out["dp_epsilon"], out["dp_epsilon_median"]] if "dp_epsilon" in out else ["none"]


SERVER_RUNS = {  # docs/server-optimizers.md's rows -> the run's preset and overrides (its command: `fedprior run THAT --set federation.rounds=R ...`)
    "`fedavg-cnn`": "fedavg-cnn",
    "`fedavgm-cnn` (server lr 1, momentum 0.9)": "fedavgm-cnn",
    "`fedavgm-cnn`, `server_lr = 0.3`": "fedavgm-cnn --set algorithm.server_lr=0.3",
    "`fedadagrad-cnn` (server lr 0.01)": "fedadagrad-cnn",
    "`fedadagrad-cnn`, `server_lr = 0.1` (Flower's)": "fedadagrad-cnn --set algorithm.server_lr=0.1",
    "`fedadam-cnn` (server lr 0.01)": "fedadam-cnn",
    "`fedadam-cnn`, `server_lr = 0.1` (Flower's)": "fedadam-cnn --set algorithm.server_lr=0.1",
    "`fedadam-cnn`, `server_lr = 0.003`": "fedadam-cnn --set algorithm.server_lr=0.003",
    "`fedyogi-cnn` (server lr 0.01)": "fedyogi-cnn",
    "`fedprox-cnn`, `server_optimizer = 'adam'`, `server_lr = 0.01`": "fedprox-cnn --set algorithm.server_optimizer=adam --set algorithm.server_lr=0.01",
    "`scaffold-cnn`, `server_optimizer = 'avgm'`, `server_momentum = 0.9`": "scaffold-cnn --set algorithm.server_optimizer=avgm --set algorithm.server_momentum=0.9",
}


def server_optimizer_run(row: str, column: str) -> list[Any]:
    """Test accuracy after round R (the column's; a run of fewer rounds: its last, and how many), round 2's after a
    diverging start, or the round a run diverged in (its error)."""
    runs = result_json("docs_runs/server-optimizers.json")["runs"]
    (run,) = [r for r in runs if r["command"].startswith(f"fedprior run {SERVER_RUNS[row]} --set federation.rounds=")]
    if run["exit_code"]:
        found = re.search(r"diverged in round (\d+)", run["error"])
        assert found, run["error"]
        return ["diverged in round", int(found.group(1))]
    out, rounds = run["output"], int(column.split()[0])
    accuracy = dict(zip(out["evaluated_rounds"], out["history"], strict=True))
    if max(accuracy) < rounds:  # a shorter run: its last round, and which
        return [percent(out["final_accuracy"]), max(accuracy)]
    return [percent(accuracy[rounds]), percent(accuracy[2]), 2]


DOCS += (
    DocTable(
        "docs/huggingface.md",
        "| scheme | samples used | client size min / mean / max | classes per client min / mean / max | beta_cib (bits) | beta_hetero (bits) |",
        partition_scheme,
        PARTITION_SCHEMES,
    ),
    DocTable(
        "docs/system-heterogeneity.md",
        "| run | simulated time of 10 rounds | final accuracy | updates dropped past the deadline | updates shortened |",
        system_illustration,
        tuple(SYSTEM_ILLUSTRATION),
    ),
    DocTable("docs/synthetic.md", "| N | RSS growth of set-up | set-up time |", synthetic_setup, ("1,000", "1,000,000")),
    DocTable("docs/server-optimizers.md", "| run (seed 0) | 5 rounds | 8 rounds |", server_optimizer_run, tuple(SERVER_RUNS)),
    DocTable(
        "docs/privacy-robustness.md",
        "| run (seed 0, 3 rounds) | final accuracy (best) | worst client's epsilon at delta 1e-5 (median) |",
        dp_sample,
        tuple(DP_SAMPLE),
    ),
    DocTable("docs/privacy-robustness.md", "| | round 1 | round 2 | round 3 | test accuracy after rounds 1, 2, 3 |", secagg_cost, ("plain", "SecAgg+")),
)

# ------------------------------------------------------------------------------------------------ benchmarks/results/verify/summary.json
# (issue 52: every holds/reversed rerun on a second machine kind, benchmarks/verify_summary.py over the kept printouts)

VERIFY_ROWS = (
    "fst-cbdg-table1 (all)",
    "fst-cbdg-table2 (all)",
    "fst-cbdg-table3 (CLIP-ZS, L_iST, L_iST + L_tSamp)",
    "fst-cbdg-table4 (all)",
    "mfcl-table8 (all)",
    "mfcl-table2-pn-gn (MFCL(PN), MFCL(GN) at Sc2; seeds 0-2)",
    "fedbm-table1 (FedBM, FedETF, FedNH; seeds 0-2)",
    "fedbm-table1-beta0.05 (FedBM, FedETF at beta 0.05; seeds 0-2, the report its second plan was made from)",
    "fedbm-table1-after-plan (the same reruns, reused, with the second plan's seeds 3-6 kept)",
    "fedbm-table6 (FedBM, w/o CGDE; seeds 0-2)",
    "fedbm-table6-after-plan (the same reruns, reused, and w/o LKCC's; the plan's seeds kept)",
)


def verify_rerun(row: str, column: str) -> list[Any]:
    """docs/runs.md's second-machine table: a row is a printout ``benchmarks/results/verify/NAME.txt`` (NAME its first word)."""
    table = result_json("verify/summary.json")["tables"][row.split()[0]]
    counts = table["counts"]
    return {
        "reruns": [table["reruns"]],
        "result": [*(counts[k] for k in ("identical", "differs", "other machine") if counts.get(k)), table["largest_final_accuracy_difference"]],
        "verdicts changed": [counts.get("verdicts changed", 0)],
    }[column]


DOCS += (DocTable("docs/runs.md", "| table (rows rerun) | reruns | result | verdicts changed |", verify_rerun, VERIFY_ROWS),)

TABLE6_VERIFIED = (
    "FedBM > w/o CGDE, beta 0.05 (+5.7)",
    "FedBM > w/o CGDE, beta 0.1 (+3.3)",
    "FedBM > w/o LKCC, F1, beta 0.1 (+3.2)",
    "FedBM > w/o LKCC, F1, beta 0.05 (+1.6)",
)


def table6_verified(row: str, column: str) -> list[Any]:
    """docs/fedbm.md's Table VI claims at their planned seeds, as kept and with seeds 0-2 rerun on the second machine kind
    (``verify/fedbm-table6-after-plan.json``), and the seeds Table VI's record plans for each."""
    name, beta = row.split(", beta ")
    claim = f"{name} (beta={beta.split(' ')[0]})"
    (check,) = [c for c in result_json("verify/fedbm-table6-after-plan.json")["claims"] if c["claim"] == claim]
    (planned,) = [c["seeds_planned"] for c in result_json("tables/fedbm-table6.json")["plan"]["claims"] if c["claim"] == claim]
    both = {"as kept": check["committed"], "seeds 0-2 rerun on the AMD machine": check["rerun"]}
    if column in both:
        return [round(both[column][k], 2) for k in ("mean", "low", "high")]
    return {"claim (paper)": [], "seeds (planned)": [check["committed"]["n"], planned], "verdict": []}[column]


DOCS += (
    DocTable(
        "docs/fedbm.md",
        "| claim (paper) | seeds (planned) | as kept | seeds 0-2 rerun on the AMD machine | verdict |",
        table6_verified,
        TABLE6_VERIFIED,
    ),
)

# ------------------------------------------------------------------------------------------------ sentences


def fixmatch_under_fedavg(metric: str) -> float:
    fedavg, fixmatch = cell("feddb-table4", "FedAvg", "δ=0.1", metric)[0], cell("feddb-table4", "no DPL, no DMA (FixMatch)", "δ=0.1", metric)[0]
    assert fedavg is not None and fixmatch is not None
    return round(fedavg - fixmatch, 2)


def effects(setting: str, *seeds: str) -> list[float]:
    """deviation_effects.json: a setting's option minus default on FedBM's three metrics, mean [95% interval] each; with
    ``seeds`` ('option', 'default'), first the selected accuracy of each seed of those."""
    found = result_json("deviation_effects.json")["settings"][setting]["effects"]
    per_seed = [v for side in seeds for v in found["selected_accuracy"][side]]
    return per_seed + [found[m]["difference"][k] for m in ("selected_accuracy", "selected_macro_f1", "final_accuracy") for k in ("mean", "low", "high")]


THREE = r"selected accuracy (\S+) \[(\S+), (\S+)\], F1 (\S+) \[(\S+), (\S+)\], last round (\S+) \[(\S+), (\S+)\]"
E2 = r"selected accuracy (\S+), (\S+), (\S+) against (\S+), (\S+), (\S+), (\S+) \[(\S+), (\S+)\], F1 (\S+) \[(\S+), (\S+)\], last round (\S+) \[(\S+), (\S+)\]"
DEVIATIONS = "| deviation (paper -> default here) | status and measured effect |"
"""docs/fedbm.md's deviations table: its measured effects are checked as QUOTES (each cell's effects, from
deviation_effects.json); its other numbers are the paper's lines and equations and the runs' settings (E, seeds)."""

DEVICE = "device-2026-11-28"


def device_feddb() -> dict[str, Any]:
    return result_json(f"{DEVICE}/paper_scale_feddb_bf16.json")["settings"]["feddb"]


def fedbm_round(n: int) -> float:
    """The FedBM paper setting's timed round ``n`` on the H200 (its log: 'timed federated round N: S s')."""
    found = re.search(rf"^timed federated round {n}: (\S+) s$", (RESULTS / DEVICE / "paper_scale_fedbm_bf16.log").read_text(), re.MULTILINE)
    assert found
    return float(found.group(1))


MEASURED_ON_THE_H200 = ("| what | measured |", "| target | measured |")
"""docs/runtime.md's two tables of the 2026-11-28 H200 session: checked as QUOTES, each number from its file in
benchmarks/results/device-2026-11-28/ (paper_scale_feddb_bf16.json, probe.json, profile.json, paper_scale_mfcl_fp32.json,
the FedBM log); not checked: the launches counted from the profile's text (about 85,000) and the target table's last
three rows (the device tests' count and the CUDA/CPU run of 2026-11-27, in their logs)."""

README_PRESETS = "| preset | data | final accuracy |"
"""README's table of the presets: checked as QUOTES, each row's results from its file (`fedavg-cnn`: robust_aggregation.json's
runs without an attack; `fst-cbdg`: fst-cbdg-table2; `feddb`, `fedbm`, `mfcl`: their tables); not checked here: the data
column (configuration) and the `feddb` row's numbers after its first sentence, which quote docs/feddb.md's tables (checked
there)."""


def no_attack_fedavg() -> list[float]:
    found = result_json("robust_aggregation.json")["summary"]["no_attack/fedavg"]
    return [percent(found["mean"]), percent(found["sd"])]


FEDBN_METRICS = {"per-client mean": "final_client_accuracy_mean", "pooled": "final_client_accuracy_pooled"}
FEDBN_CLAIMS = ("FedBN > FedAvg (Office-Caltech-10; embedded: rotation:4)", "FedBN > FedAvg (DomainNet; embedded: style)")
DOCS += (
    DocTable(
        "docs/feature-shift.md",
        "| method | rotation:4 per-client mean | rotation:4 pooled | style per-client mean | style pooled |",
        lambda row, column: cell("fedbn-table3", row, column.split()[0], FEDBN_METRICS[column.split(" ", 1)[1]]),
        ("FedBN", "FedAvg", "FedAvg, unshifted"),
    ),
    DocTable("docs/feature-shift.md", "| claim | mean | 95% interval | verdict |", claims("fedbn-table3"), FEDBN_CLAIMS),
)


QUOTES: tuple[tuple[str, str, Callable[[], list[Any]]], ...] = (
    ("docs/runtime.md", r"\*\*(\S+) s a round\*\* \((\S+), (\S+)\), (\S+) TFLOP a round, (\S+) TFLOP/s, (\S+)% of the bf16 peak; 800 rounds (\S+) hours",
     lambda: [device_feddb()["seconds_per_round"], *device_feddb()["round_seconds"], device_feddb()["tflop_per_round"], device_feddb()["achieved_tflops"],
              percent(device_feddb()["ratio_to_peak"]), device_feddb()["projected_seconds"] / 3600]),
    ("docs/runtime.md", r"(\S+) TFLOP/s at batch 2,048 channels-last \((\S+) at 512; (\S+) in NCHW\) \(`probe.json`\): a FedDB round at that speed takes (\S+) s",
     lambda: [result_json(f"{DEVICE}/probe.json")["plain_wrn"][k]["tflops"] for k in ("b2048_cl", "b512_cl", "b2048")]
     + [device_feddb()["tflop_per_round"] / result_json(f"{DEVICE}/probe.json")["plain_wrn"]["b2048_cl"]["tflops"]]),
    ("docs/runtime.md", r"\| (\S+)-(\S+) s / (\S+) s \(`profile.json`",
     lambda: [min(device_feddb()["round_seconds"]), max(device_feddb()["round_seconds"]), result_json(f"{DEVICE}/profile.json")["bench_again_s"]]),
    ("docs/runtime.md", r"\| \*\*(\S+) s / (\S+) s\*\* \|", lambda: [result_json(f"{DEVICE}/profile.json")[k] for k in ("nobench_first_s", "nobench_again_s")]),
    ("docs/runtime.md", r"\| (\S+) s, (\S+) s, about", lambda: [result_json(f"{DEVICE}/profile.json")[k] for k in ("profiled_wall_s", "device_busy_s")]),
    ("docs/runtime.md", r"\| (\S+) s the first round, \*\*(\S+) s\*\* the second \(`paper_scale_fedbm_bf16.log`\)", lambda: [fedbm_round(1), fedbm_round(2)]),
    ("docs/runtime.md", r"\| \*\*(\S+) s\*\*, (\S+) TFLOP/s \(`paper_scale_mfcl_fp32.json`\)",
     lambda: [result_json(f"{DEVICE}/paper_scale_mfcl_fp32.json")["settings"]["mfcl"][k] for k in ("seconds_per_round", "achieved_tflops")]),
    ("docs/runtime.md", r"before: (\S+) s a round with autotuning \(every unlabeled image\); (\S+) s a round of new clients without it",
     lambda: [device_feddb()["seconds_per_round"], result_json(f"{DEVICE}/profile.json")["nobench_first_s"]]),
    ("docs/runtime.md", r"before: (\S+) TFLOP/s against the loop's (\S+)-(\S+): about (\S+) ",
     lambda: [device_feddb()["client_tflops"], *(result_json(f"{DEVICE}/probe.json")["plain_wrn"][k]["tflops"] for k in ("b512_cl", "b2048_cl")),
              device_feddb()["client_tflops"] / result_json(f"{DEVICE}/probe.json")["plain_wrn"]["b2048_cl"]["tflops"]]),
    ("docs/runtime.md", r"before: (\S+) s a round \(the second; the first (\S+) s\)", lambda: [fedbm_round(2), fedbm_round(1)]),
    ("docs/runtime.md", r"\| an MFCL server epoch within 1.5 s \| (\S+) s, (\S+) TFLOP/s",
     lambda: [result_json(f"{DEVICE}/paper_scale_mfcl_fp32.json")["settings"]["mfcl"][k] for k in ("seconds_per_round", "achieved_tflops")]),
    ("docs/fedbm.md", r'option `aggregation = "uniform"`: ' + THREE, lambda: effects("fedbm-aggregation-uniform")),
    ("docs/fedbm.md", r"--only fedbm-synthetic-per-round-e2`[^|]*?" + E2, lambda: effects("fedbm-synthetic-per-round-e2", "option", "default")),
    ("docs/fedbm.md", r'option `semantic_loss = "cross-entropy"`: ' + THREE, lambda: effects("fedbm-semantic-cross-entropy")),
    ("docs/fedbm.md", r"--only fedbm-lr-decay-per-epoch-e2`[^|]*?" + E2, lambda: effects("fedbm-lr-decay-per-epoch-e2", "option", "default")),
    ("docs/fedbm.md", r"Adam at the paper's lr 0.01: " + THREE, lambda: effects("fedbm-adam")),
    # (file, a pattern whose groups are the numbers, what they quote)
    ("docs/feddb.md", r"it ends (\S+) points\s+under FedAvg \(final accuracy; (\S+) best\)",
     lambda: [fixmatch_under_fedavg("final_accuracy"), fixmatch_under_fedavg("best_accuracy")]),
    ("docs/fedbm.md", r"without it FedETF falls to\s+FedAvg's level \((\S+) vs (\S+) at beta 0.05, (\S+) vs (\S+) at beta 0.1\)",
     lambda: [cell("fedbm-table1", "FedETF (plain CE)", "beta=0.05")[0], cell("fedbm-table1", "FedAvg", "beta=0.05")[0],
              cell("fedbm-table1", "FedETF (plain CE)", "beta=0.1")[0], cell("fedbm-table1", "FedAvg", "beta=0.1")[0]]),
    ("README.md", r"(\S+) ± (\S+)% at the chosen round over 7 seeds \(FedAvg (\S+) ± (\S+)% over 3, FedETF (\S+) ± (\S+)% over 7\), macro-F1 (\S+) ± (\S+)%; "
     r"last round (\S+) ± (\S+)%",
     lambda: [*cell("fedbm-table1", "FedBM", "beta=0.05")[:2], *cell("fedbm-table1", "FedAvg", "beta=0.05")[:2],
              *cell("fedbm-table1", "FedETF", "beta=0.05")[:2], *cell("fedbm-table1", "FedBM", "beta=0.05", "selected_macro_f1")[:2],
              *cell("fedbm-table1", "FedBM", "beta=0.05", "final_accuracy")[:2]]),
    ("README.md", r"\| (\S+) ± (\S+)% over 5 seeds \(the seeds its plan gave it\) with the paper's linear evaluation, (\S+) points above the same network untrained on the 3 seeds both have \((\S+) ± (\S+)%\)",
     lambda: [*cell("mfcl-table2", "MFCL(PN)", "Sc2")[:2], control("mfcl-table2", MFCL_CONDITIONS["MFCL(PN) - untrained"], "Sc2")[0],
              *cell("mfcl-table2", "MFCL(PN) untrained", "Sc2")[:2]]),
    ("docs/feature-shift.md", r"the shift costs FedAvg (\S+) points with rotations and (\S+) with styles",
     lambda: [control("fedbn-table3", "FedAvg, unshifted at least 2 points above FedAvg", c)[0] for c in ("rotation:4", "style")]),
    ("README.md", r"\| (\S+) ± (\S+)% over 3 seeds \(`benchmarks/results/robust_aggregation.json`, no attack\) \|", no_attack_fedavg),
    ("README.md", r"\| (\S+) ± (\S+)% over 3 seeds \(zero-shot (\S+)%, probe (\S+)%\) \|",
     lambda: [*cell("fst-cbdg-table2", "FST-CBDG", "s=2")[:2], cell("fst-cbdg-table2", "CLIP-ZS", "s=2")[0], cell("fst-cbdg-table2", "CLIP-FC-Centralized", "s=2")[0]]),
    ("README.md", r"\| (\S+) ± (\S+)% over 3 seeds, with FedAvg on the labels alone \((\S+) ± (\S+)%\) and above FixMatch \((\S+) ± (\S+)%",
     lambda: [*cell("feddb-table2", "FedDB", "δ=0.3")[:2], *cell("feddb-table2", "FedAvg", "δ=0.3")[:2], *cell("feddb-table2", "FixMatch", "δ=0.3")[:2]]),
    # issue 52: the power of the benchmarks' own verdicts, in the sentences beside their tables
    ("docs/system-heterogeneity.md", r"constant-devices gap of `partial-beats-drop`, detects\s+(\S+) points, and FedBuff's time difference on constant devices, detects (\S+) s",
     lambda: [system_heterogeneity()["verdicts"]["straggler-effect-vanishes (control)"]["gap_constant"]["detectable"],
              system_heterogeneity()["verdicts"]["time-per-round-differs (control)"]["fedbuff_vs_fedavg_on_constant_devices"]["difference"]["detectable"]]),
    ("docs/system-heterogeneity.md", r"FedAvg times to target \((\S+), (\S+),\s+(\S+) s\) that is \(1 - 1/3\.3\) x (\S+) = (\S+) s",
     lambda: [*(p["fedavg"]["time"] for p in system_heterogeneity()["verdicts"]["fedbuff-faster"]["per_seed"]),
              np.mean([p["fedavg"]["time"] for p in system_heterogeneity()["verdicts"]["fedbuff-faster"]["per_seed"]]),
              system_heterogeneity()["verdicts"]["fedbuff-faster"]["difference"]["gap"]]),
    ("docs/system-heterogeneity.md", r"FedBuff's 3 seeds\s+detect (\S+) s and the paper's (\S+) s needs (\S+):",
     lambda: [system_heterogeneity()["verdicts"]["fedbuff-faster"]["difference"][k] for k in ("detectable", "gap", "seeds_needed")]),
    ("docs/system-heterogeneity.md", r"FedProx's partial work: 3 seeds detect (\S+) points, the paper's\s+(\S+) needs (\S+), and the mean here \((\S+)\)",
     lambda: [system_heterogeneity()["verdicts"]["partial-beats-drop"][k] for k in ("detectable", "gap", "seeds_needed", "mean")]),
    ("docs/synthetic.md", r"Both claims' means \((\S+), (\S+)\) lie below what 3 seeds detect \((\S+),\s+(\S+)\)",
     lambda: [result_json("synthetic_fedprox.json")["verdicts"][c][k] for k in ("mean", "detectable") for c in ("lower-loss", "steadier")]),
    ("docs/mfcl.md", r"sensor recalibrated \((\S+), (\S+), (\S+) at seeds 0-2\), the kept MFCL\(BN\)\ncells stand (\S+) \(Sc1\), (\S+) \(Sc2\) and (\S+) \(Sc10\)"
     r" points above on the mean of seeds 0-2 \(`control_candidate` in the\nJSON\), MFCL\(PN\) (\S+), (\S+) and (\S+) above",
     lambda: [percent(result_json("mfcl_bn_trace/results.json")["control_candidate"]["untrained_bn_by_seed"][s]["sensor recalibrated"]) for s in "012"]
     + [result_json("mfcl_bn_trace/results.json")["control_candidate"]["trained_minus_untrained"][c][f"MFCL({n}) - untrained {n}{k}"]
        for n, k in (("BN", ", sensor recalibrated"), ("PN", " (the kept control)")) for c in ("Sc1", "Sc2", "Sc10")]),
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


def test_the_readme_presets_results_are_checked(monkeypatch):
    """README's table of the presets (checked as QUOTES): a number changed in its fedavg-cnn or fst-cbdg row is found."""
    original = Path.read_text
    for before, after, number in (
        ("| 72.5 ± 1.9% over 3 seeds (`benchmarks", "| 72.6 ± 1.9% over 3 seeds (`benchmarks", "'72.6'"),
        ("(zero-shot 64.5%, probe 81.9%)", "(zero-shot 64.5%, probe 81.8%)", "'81.8'"),
    ):
        assert before in original(ROOT / "README.md")

        def changed(self: Path, *args: Any, before: str = before, after: str = after, **kwargs: Any) -> str:
            text = original(self, *args, **kwargs)
            return text.replace(before, after) if self.name == "README.md" else text

        monkeypatch.setattr(Path, "read_text", changed)
        assert [m for m in quote_mismatches() if m.startswith("README.md") and number in m], after
        monkeypatch.setattr(Path, "read_text", original)


def one_number_changed(table: DocTable) -> tuple[str, str]:
    """A body line of ``table`` and the same line with the first number it checks changed in its last digit."""
    lines = (ROOT / table.doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line == table.header and (table.first is None or cells_of(lines[i + 2])[0] == table.first))
    names = cells_of(table.header)
    for line in takewhile(lambda row: row.startswith("|"), lines[start + 2 :]):
        cells = cells_of(line)
        if " | ".join(cells[: table.keys]).replace("*", "") in table.unquoted_rows:
            continue
        for k in range(table.keys, len(cells)):
            found = NUMBER.search(cells[k])
            if names[k] not in table.unquoted and cells[k] not in ("", "-") and found:
                number = found.group(0)
                changed = number[:-1] + str((int(number[-1]) + 1) % 10)
                cells[k] = cells[k][: found.start()] + changed + cells[k][found.end() :]
                return line, "| " + " | ".join(cells) + " |"
    raise AssertionError(f"{table.doc}: {table.header!r} checks no number")


@pytest.mark.parametrize("table", DOCS, ids=lambda t: f"{t.doc}:{t.header[:30]}")
def test_each_mapped_table_catches_a_number_changed_in_it(table, monkeypatch):
    """Every mapped table reads its numbers: one digit changed in its first checked cell is a mismatch."""
    line, changed = one_number_changed(table)
    assert mismatches(table) == []
    original = Path.read_text

    def patched(self: Path, *args: Any, **kwargs: Any) -> str:
        text = original(self, *args, **kwargs)
        return text.replace(line, changed, 1) if self == ROOT / table.doc else text

    monkeypatch.setattr(Path, "read_text", patched)
    assert mismatches(table), (line, changed)


@pytest.mark.parametrize("table", DOCS, ids=lambda t: f"{t.doc}:{t.header[:30]}")
def test_each_mapped_table_is_found_with_its_rows(table):
    rows = parse(table.doc, table.header, table.first)
    assert len(rows) == len(table.rows) and not any("malformed" in r for r in rows)


# ------------------------------------------------------------------------------------------------ every table of numbers

RULE = re.compile(r"^\|\s*:?-{3,}")
DIGIT = re.compile(r"\d")


def docs_tables() -> list[tuple[str, str]]:
    """Every markdown table (a header line, then a ``|---|`` line) of docs/*.md and README.md whose body holds a number:
    (file, header line), once per table."""
    found = []
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines[:-1]):
            if line.startswith("|") and RULE.match(lines[i + 1]):
                body = list(takewhile(lambda row: row.startswith("|"), lines[i + 2 :]))
                if any(DIGIT.search(row) for row in body):
                    found.append((path.relative_to(ROOT).as_posix(), line))
    return found


def mapped_tables() -> Counter[tuple[str, str]]:
    """(file, header line) -> how many of its tables the checks above read number by number."""
    mapped = Counter((t.doc, t.header) for t in DOCS) + Counter({("docs/fedbm.md", FEDBM_HEADER): len(FEDBM_TABLES), ("docs/fedbm.md", DEVIATIONS): 1})
    return mapped + Counter(("docs/runtime.md", header) for header in MEASURED_ON_THE_H200) + Counter({("README.md", README_PRESETS): 1})


def undecided_tables() -> list[str]:
    """A table of numbers neither checked against its JSON nor exempt (with its reason), or both; a header mapped or exempt
    that no table has any more."""
    tables, mapped = Counter(docs_tables()), mapped_tables()
    out = []
    for (doc, header), n in tables.items():
        if (doc, header) in mapped and (doc, header) in EXEMPT:
            out.append(f"{doc}: {header!r}: both checked and exempt")
        elif (doc, header) in mapped and mapped[doc, header] != n:
            out.append(f"{doc}: {header!r}: {n} tables of numbers, {mapped[doc, header]} checked")
        elif (doc, header) not in mapped and (doc, header) not in EXEMPT:
            out.append(f"{doc}: {header!r}: a table of numbers neither checked against its JSON (DOCS) nor exempt (EXEMPT, with a reason)")
    out += [f"{doc}: {header!r}: no such table of numbers any more" for doc, header in [*mapped, *EXEMPT] if (doc, header) not in tables]
    return out


def test_every_table_of_numbers_in_the_docs_is_checked_or_exempt_with_a_reason():
    assert undecided_tables() == []
    assert all(reason.strip() for reason in EXEMPT.values())
    assert [k for k, reason in EXEMPT.items() if "no committed source" in reason] == []  # issue 52 item 5: committed or dropped


def test_a_table_added_to_the_docs_without_a_decision_is_found(monkeypatch):
    """A new table of numbers fails the inventory until it is mapped or exempt; one without a number does not count."""
    original = Path.read_text
    added = "| run | accuracy |\n|---|---|\n| new | 71.3 |\n\n| word | meaning |\n|---|---|\n| a | b |\n"

    def changed(self: Path, *args: Any, **kwargs: Any) -> str:
        text = original(self, *args, **kwargs)
        return text + "\n" + added if self.name == "runs.md" else text

    monkeypatch.setattr(Path, "read_text", changed)
    assert undecided_tables() == [
        "docs/runs.md: '| run | accuracy |': a table of numbers neither checked against its JSON (DOCS) nor exempt (EXEMPT, with a reason)"
    ]
