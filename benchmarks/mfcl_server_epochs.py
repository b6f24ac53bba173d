"""MFCL's server phase epoch by epoch (issue 31 item 4: the mechanism behind MFCL(PN) scoring under its untrained network).

Reads finished MFCL cells (``result.json``: ``history`` holds the linear accuracy at each evaluated round,
``evaluated_rounds`` their steps; the embedded presets evaluate after every server epoch) and prints, per row
and seed, the accuracy after each server epoch beside the same network untrained (the row's untrained twin:
``ROW untrained`` in the same folder, or the run's own initial accuracy). No training: it reads what the
tables kept.

    python benchmarks/mfcl_server_epochs.py [FOLDER ...] [--out benchmarks/results/mfcl_server_epochs.json]

FOLDER defaults to Table 2's kept cells (``benchmarks/results/cells/mfcl-table2``).
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path

from shared import command_line

CELLS = Path(__file__).parent / "results" / "cells" / "mfcl-table2"
OUT = Path(__file__).parent / "results" / "mfcl_server_epochs.json"
ROWS = ("MFCL_PN_", "Central_MFCL_PN_")
"""Cell folder prefixes (``fedprior table``'s folder names) of the rows with a server phase."""


def server_history(result: dict, epochs: int) -> list[float]:
    """The accuracies (%) after each of the last ``epochs`` evaluated rounds: the server stage's epochs."""
    return [round(100 * a, 2) for a in result["history"][-epochs:]]


def cell_trace(folder: Path) -> dict | None:
    """One cell's per-epoch accuracy against its untrained twin; None where the folder is not an MFCL row's."""
    match = re.fullmatch(r"(?P<row>[A-Za-z_]+?)--(?P<column>[^-]+)--seed(?P<seed>\d+)", folder.name)
    if not match or match["row"] not in ROWS or not (folder / "result.json").is_file():
        return None
    result = json.loads((folder / "result.json").read_text())
    config = tomllib.loads((folder / "config.toml").read_text()) if (folder / "config.toml").is_file() else {}
    epochs = config.get("algorithm", {}).get("server_epochs", len(result["history"]))
    twin = folder.parent / f"MFCL_PN_untrained--{match['column']}--seed{match['seed']}" / "result.json"
    untrained = json.loads(twin.read_text())["initial_accuracy"] if twin.is_file() else result["initial_accuracy"]
    accuracies = server_history(result, epochs)
    return {
        "cell": f"{folder.parent.name}/{folder.name}",
        "row": "Central MFCL(PN)" if match["row"].startswith("Central") else "MFCL(PN)",
        "column": match["column"],
        "seed": int(match["seed"]),
        "untrained": round(100 * untrained, 2),
        "after_epoch": accuracies,
        "minus_untrained": [round(a - 100 * untrained, 2) for a in accuracies],
        "best_epoch": 1 + max(range(len(accuracies)), key=accuracies.__getitem__) if accuracies else None,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[CELLS])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    traces = [t for folder in args.folders for cell in sorted(folder.iterdir()) if cell.is_dir() and (t := cell_trace(cell))]
    record = {
        "what": "MFCL(PN)'s linear accuracy (%) after each server epoch, beside the same network untrained",
        "command": command_line(argv),
        "cells": traces,
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for t in traces:
        steps = " ".join(f"{d:+.1f}" for d in t["minus_untrained"])
        print(f"{t['row']:<17} {t['column']:<5} seed {t['seed']}  untrained {t['untrained']:5.1f}  after each epoch, minus untrained: {steps}")
    return record


if __name__ == "__main__":
    main()
