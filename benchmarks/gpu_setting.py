"""The FedDB and MFCL tables' GPU setting (issue 31 item 3): their controls and core rows at a width and budget a CPU cannot give.

On the 2-core CPU no candidate setting let the central controls pass within the tables' CPU budget
(``benchmarks/results/feddb_setting_central.json``, ``mfcl_setting.json``). This command runs the same tables'
embedded grids, one column each and one seed, with wider networks and hundreds of rounds, on a GPU:

- FedDB Table 2, column δ = 0.3 (:data:`FEDDB`): FedAvg on the labels, FedAvg with all labels, the two central
  controls, FixMatch and FedDB, with the ConvNet 32 wide for 800 rounds (the paper's count), test every 20, the
  presets' mild views;
- MFCL Table 2, column Sc2 (:data:`MFCL_ROWS`, :data:`OTHER_ROWS`): MFCL(PN) and FedSimCLR trained, untrained
  and central, on 10,000 training images, networks 32 wide, SimCLR crops of at least 30% (the presets),
  MFCL 30 rounds and 30 server epochs, FedSimCLR 100 rounds. MFCL's own fields go to a table of its own (they are
  unknown to the other rows), as ``benchmarks/mfcl_setting.py`` does.

    python benchmarks/gpu_setting.py --device cuda [--jobs 4] [--out benchmarks/results/gpu-setting] [--only feddb mfcl others]
    python benchmarks/gpu_setting.py --tiny        # the same commands at a tiny size on the CPU (a test runs this)

Each table runs under ``--budget-seconds`` (default 600, the issue's 10 minutes for all of them, split evenly: a
table stopped at its share keeps its finished cells and says so); ``fedprior table``'s folders are under
``--runs``, so the same command continues a stopped table. Writes ``OUT/gpu_setting.json``: the command, the
machine, per table its command, wall seconds, whether it finished, and its cells and controls (``table.json``).
The sizes are chosen for one H100 without having run on one: the first GPU run says whether they fit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from shared import command_line, embedded_table_command, machine

OUT = Path(__file__).parent / "results" / "gpu-setting"
FEDDB = {
    "table": "feddb-table2",
    "column": "δ=0.3",
    "rows": "FedAvg,FedAvg (all labels),Central (labels only),Central FixMatch,FixMatch,FedDB",
    "gpu": ("algorithm.width=32", "federation.rounds=800", "algorithm.lr_decay_rounds=800", "federation.evaluate_every=20"),
    "tiny": ("partition.num_unlabeled=1000", "federation.local_epochs=1", "federation.rounds=1", "algorithm.lr_decay_rounds=1"),
}
MFCL_ROWS = {
    "table": "mfcl-table2",
    "column": "Sc2",
    "rows": "MFCL(PN),MFCL(PN) untrained,Central MFCL(PN)",
    "gpu": (
        "data.train_subset=10000",
        "algorithm.sensor_width=32",
        "algorithm.disc_width=32",
        "algorithm.server_epochs=30",
        "federation.rounds=30",
    ),
    "tiny": ("data.train_subset=400", "federation.rounds=1", "algorithm.server_epochs=1"),
}
OTHER_ROWS = {
    "table": "mfcl-table2",
    "column": "Sc2",
    "rows": "FedSimCLR,FedSimCLR untrained,Central FedSimCLR",
    "gpu": ("data.train_subset=10000", "algorithm.width=32", "federation.rounds=100"),
    "tiny": ("data.train_subset=400", "federation.rounds=1"),
}
TABLES = {"feddb": FEDDB, "mfcl": MFCL_ROWS, "others": OTHER_ROWS}


def table_command(spec: dict, size: str, out: Path, device: str, jobs: int) -> list[str]:
    """``fedprior table`` for one spec at ``size`` ('gpu' or 'tiny'), one seed, its folder ``out``."""
    return embedded_table_command(spec["table"], spec["rows"], spec["column"], 1, jobs, out, (*spec[size], f"run.device={device}"))


def run_table(name: str, spec: dict, args: argparse.Namespace, seconds: float) -> dict:
    folder = args.runs / name
    command = table_command(spec, "tiny" if args.tiny else "gpu", folder, args.device, args.jobs)
    started = time.perf_counter()
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=seconds)
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
    table = json.loads((folder / "table.json").read_text()) if (folder / "table.json").is_file() else None
    return {
        "command": " ".join(command),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "finished": finished,
        "note": "" if finished else f"stopped at its share of the budget ({seconds:.0f} s); the same command continues it",
        "cells": table["cells"] if table else [],
        "controls": table["controls"] if table else [],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="run.device of every cell (default cuda)")
    parser.add_argument("--tiny", action="store_true", help="a tiny size on the CPU: checks the commands, measures nothing")
    parser.add_argument("--jobs", type=int, default=4, help="cells at once (processes sharing the GPU)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--runs", type=Path, default=Path("runs/gpu-setting"))
    parser.add_argument("--only", nargs="*", choices=sorted(TABLES), default=None)
    parser.add_argument("--budget-seconds", type=float, default=None, help="for all tables together (default 600; --tiny: 3600)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.device, args.jobs = "cpu", 1
    if args.budget_seconds is None:
        args.budget_seconds = 3600.0 if args.tiny else 600.0
    chosen = {k: v for k, v in TABLES.items() if args.only is None or k in args.only}
    started, at_start = time.perf_counter(), machine()
    record = {
        "what": "FedDB Table 2 (δ=0.3) and MFCL Table 2 (Sc2): controls and core rows in the GPU setting, one seed",
        "size": "tiny (CPU check)" if args.tiny else "gpu",
        "command": command_line(argv),
        "machine": at_start,
        "tables": {},
    }
    for name, spec in chosen.items():
        record["tables"][name] = run_table(name, spec, args, args.budget_seconds / len(chosen))
        record["wall_seconds"] = round(time.perf_counter() - started, 1)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_setting.json").write_text(json.dumps(record, indent=2) + "\n")
        print(name, "finished" if record["tables"][name]["finished"] else "stopped", record["tables"][name]["wall_seconds"], "s", flush=True)
    return record


if __name__ == "__main__":
    main()
