"""The FedDB and MFCL tables' GPU setting (issue 31 item 3): their controls and core rows at a width and budget a CPU cannot give.

On the 2-core CPU no candidate setting let the central controls pass within the tables' CPU budget
(``benchmarks/results/feddb_setting_central.json``, ``mfcl_setting.json``). This command runs the same tables'
embedded grids, one column each, with wider networks and hundreds of rounds, on a GPU, each cell with the seeds the
table's stored seed plan gives it (issue 52 item 6: :func:`planned_seeds`, read from ``benchmarks/results/tables/NAME.json``,
passed to ``fedprior table --planned-seeds``; ``--records DIR`` reads them elsewhere), so that the first run on a GPU
includes them; ``--seeds N`` runs N seeds in every cell instead (``--seeds 1``: the single seed this command ran before):

- FedDB Table 2, column δ = 0.3 (:data:`FEDDB`): FedAvg on the labels, FedAvg with all labels, the central rows
  (full-batch; FixMatch's own mini-batches with the federation's image passes, the capability control, and with its
  sequential steps, the budget control: :data:`CAPABILITY_AND_BUDGET`), FixMatch and FedDB, with the ConvNet 32 wide
  for 800 rounds (the paper's count), test every 20, the presets' mild views;
- MFCL Table 2, column Sc2 (:data:`MFCL_ROWS`, :data:`OTHER_ROWS`): MFCL(PN) and FedSimCLR trained, untrained
  and central (with the central rows' own steps, and with the federation's sequential steps), on 10,000 training images, networks 32 wide, SimCLR crops of at least 30% (the presets),
  MFCL 30 rounds and the presets' one server epoch, FedSimCLR 100 rounds. MFCL's own fields go to a table of its own (they are
  unknown to the other rows), as ``benchmarks/mfcl_setting.py`` does.

    python benchmarks/gpu_setting.py --device cuda [--jobs 4] [--out benchmarks/results/gpu-setting] [--only feddb mfcl others] [--seeds planned|N]
    python benchmarks/gpu_setting.py --tiny        # the same commands at a tiny size on the CPU (a test runs this)

Each table runs under ``--budget-seconds`` (default 600, the issue's 10 minutes for all of them, split evenly: a
table stopped at its share keeps its finished cells and says so); ``fedprior table``'s folders are under
``--runs``, so the same command continues a stopped table; ``--parallel`` runs the tables at once, each with the
whole budget; ``--controls-only`` runs only the rows of the central controls (each method on one client
holding all the data, against labels only or the untrained network), to learn whether the setting lets the method
learn at all before its federated rows are paid for (FixMatch's 800 rounds took 79 minutes at the first run's pace). A stopped table's cells report their progress (rounds done, seconds a round, the seconds their
rounds would take). Writes ``OUT/gpu_setting.json``: the command, the
machine, per table its command, the seeds of each row, wall seconds, whether it finished, and its cells and controls (``table.json``).
The sizes were chosen for one H100 before any GPU ran them; the first run (one H200, 2026-11-27,
``benchmarks/results/device-2026-11-27/gpu-setting/``, the three tables at once, 4 cells each) says they do not fit
10 minutes: FedDB's FixMatch took 5.9 s a round (800 rounds: 79 min), the SimCLR rows about 6 s (docs/feddb.md,
docs/mfcl.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
import tomllib
from pathlib import Path

from shared import command_line, embedded_table_command, machine

from fedprior.reproduce.seed_plan import cell_seeds

OUT = Path(__file__).parent / "results" / "gpu-setting"
RECORDS = Path(__file__).parent / "results" / "tables"
"""The tables' committed records, each with its stored seed plan (``"plan"``, :mod:`fedprior.reproduce.seed_plan`)."""
CAPABILITY_AND_BUDGET = (
    "Central labels only (mini-batch),Central FixMatch (mini-batch),Central labels only (sequential steps),Central FixMatch (sequential steps)"
)
"""FedDB's central rows with FixMatch's own mini-batches (issue 44): the capability control (the federation's image passes)
and the budget control (its sequential steps), which the 2-core CPU runs on one seed only."""
FEDDB = {
    "table": "feddb-table2",
    "column": "δ=0.3",
    "rows": "FedAvg,FedAvg (all labels),Central (labels only),Central FixMatch,FixMatch,FedDB," + CAPABILITY_AND_BUDGET,
    "controls": "Central (labels only),Central FixMatch," + CAPABILITY_AND_BUDGET,
    "gpu": ("algorithm.width=32", "federation.rounds=800", "algorithm.lr_decay_rounds=800", "federation.evaluate_every=20"),
    "tiny": ("partition.num_unlabeled=1000", "federation.local_epochs=1", "federation.rounds=1", "algorithm.lr_decay_rounds=1"),
}
MFCL_ROWS = {
    "table": "mfcl-table2",
    "column": "Sc2",
    "rows": "MFCL(PN),MFCL(PN) untrained,Central MFCL(PN),Central MFCL(PN) (sequential steps)",
    "controls": "MFCL(PN) untrained,Central MFCL(PN),Central MFCL(PN) (sequential steps)",
    "gpu": (
        "data.train_subset=10000",
        "algorithm.sensor_width=32",
        "algorithm.disc_width=32",
        # the presets' one server epoch (2026-11-27: 30 epochs took central MFCL(PN) 18.9 points under its untrained network
        # on the H200, as more epochs do on the CPU: docs/mfcl.md, "The server phase, epoch by epoch")
        "federation.rounds=30",
    ),
    "tiny": ("data.train_subset=400", "federation.rounds=1", "algorithm.server_epochs=1"),
}
OTHER_ROWS = {
    "table": "mfcl-table2",
    "column": "Sc2",
    "rows": "FedSimCLR,FedSimCLR untrained,Central FedSimCLR,Central FedSimCLR (sequential steps)",
    "controls": "FedSimCLR untrained,Central FedSimCLR,Central FedSimCLR (sequential steps)",
    "gpu": ("data.train_subset=10000", "algorithm.width=32", "federation.rounds=100"),
    "tiny": ("data.train_subset=400", "federation.rounds=1"),
}
TABLES = {"feddb": FEDDB, "mfcl": MFCL_ROWS, "others": OTHER_ROWS}


def record_path(spec: dict, records: Path = RECORDS) -> Path:
    return records / f"{spec['table']}.json"


def planned_seeds(spec: dict, records: Path = RECORDS) -> dict[str, int]:
    """Per row of ``spec`` (in its column): the seeds the table's stored plan gives it, the record's seeds where the plan
    gives the cell none more (what ``fedprior table --planned-seeds --seeds SEEDS`` runs). A record without a plan: SystemExit."""
    record = json.loads(record_path(spec, records).read_text())
    if "plan" not in record:
        raise SystemExit(f"{record_path(spec, records)} stores no seed plan (benchmarks/paper_tables.py {spec['table']} --plan); give --seeds N")
    more = cell_seeds(record["plan"])
    return {row: max(record["table"]["seeds"], more.get((row, spec["column"]), 0)) for row in spec["rows"].split(",")}


def table_command(
    spec: dict, size: str, out: Path, device: str, jobs: int, controls_only: bool = False, seeds: int | None = None, records: Path = RECORDS
) -> list[str]:
    """``fedprior table`` for one spec at ``size`` ('gpu' or 'tiny'), its folder ``out``, each cell with its planned seeds
    (``seeds`` None: the record's seeds, more where its stored plan says) or ``seeds`` seeds; with ``controls_only`` only
    the rows of its central controls (``spec["controls"]``)."""
    threads = ("run.threads=1",) if size == "gpu" else ()  # the GPU does the work; jobs x all cores would crowd the CPU
    rows = spec["controls"] if controls_only else spec["rows"]
    if seeds is not None:
        return embedded_table_command(spec["table"], rows, spec["column"], seeds, jobs, out, (*spec[size], *threads, f"run.device={device}"))
    base = json.loads(record_path(spec, records).read_text())["table"]["seeds"]
    command = embedded_table_command(spec["table"], rows, spec["column"], base, jobs, out, (*spec[size], *threads, f"run.device={device}"))
    return [*command, "--planned-seeds", "--record", str(record_path(spec, records))]


def cell_progress(folder: Path) -> list[dict]:
    """Each cell folder's rounds so far (its metrics.jsonl): the last test accuracy, seconds a round, and the
    seconds its configured rounds would take at that pace. What a table stopped at its budget still tells."""
    progress = []
    for metrics in sorted(folder.glob("*/metrics.jsonl")):
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        rounds = [r for r in rows if isinstance(r.get("round"), int)]  # every stage's (MFCL: sensor, upload, server)
        config = tomllib.loads((metrics.parent / "config.toml").read_text()) if (metrics.parent / "config.toml").is_file() else {}
        planned = config.get("federation", {}).get("rounds")
        done = max((r["round"] for r in rounds), default=0)
        seconds = sum(r["seconds"] for r in rounds if isinstance(r.get("seconds"), (int, float)))
        evaluated = [r for r in rounds if r.get("accuracy") is not None]
        pace = seconds / done if done and seconds else None
        progress.append(
            {
                "cell": metrics.parent.name,
                "rounds_done": done,
                "rounds_planned": planned,
                "last_accuracy": evaluated[-1]["accuracy"] if evaluated else None,
                "seconds_per_round": round(pace, 3) if pace else None,
                "projected_seconds": round(pace * planned, 1) if pace and planned else None,
            }
        )
    return progress


def start_table(name: str, spec: dict, args: argparse.Namespace) -> tuple[list[str], Path, subprocess.Popen]:
    """``fedprior table`` for one spec, its folder, and its process, started in a process group of its own (so that a
    stop ends its workers too)."""
    folder = args.runs / name
    command = table_command(spec, "tiny" if args.tiny else "gpu", folder, args.device, args.jobs, args.controls_only, args.seeds, args.records)
    return command, folder, subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)


def wait_table(command: list[str], folder: Path, process: subprocess.Popen, started: float, seconds: float) -> dict:
    """Wait for a started table (writing into ``folder``) until ``seconds`` after ``started``; stop it (and its workers) there."""
    try:
        finished = process.wait(timeout=max(1.0, seconds - (time.perf_counter() - started))) == 0
        note = "" if finished else f"fedprior table exited with {process.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        finished, note = False, f"stopped at its budget ({seconds:.0f} s); the same command continues it"
    table = json.loads((folder / "table.json").read_text()) if (folder / "table.json").is_file() else None
    return {
        "command": " ".join(command),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "finished": finished,
        "note": note,
        "cells": table["cells"] if table else [],
        "controls": table["controls"] if table else [],
        "progress": cell_progress(folder),
    }


def seeds_option(text: str) -> int | None:
    """``--seeds``: 'planned' (None: each table's stored plan) or a number of seeds for every cell."""
    if text == "planned":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--seeds: expected 'planned' or a positive number of seeds, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="run.device of every cell (default cuda)")
    parser.add_argument("--tiny", action="store_true", help="a tiny size on the CPU: checks the commands, measures nothing")
    parser.add_argument("--jobs", type=int, default=4, help="cells at once (processes sharing the GPU)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--runs", type=Path, default=Path("runs/gpu-setting"))
    parser.add_argument("--only", nargs="*", choices=sorted(TABLES), default=None)
    parser.add_argument("--budget-seconds", type=float, default=None, help="for all tables together (default 600; --tiny: 3600)")
    parser.add_argument(
        "--controls-only",
        action="store_true",
        help="only the central controls' rows: whether the setting lets the methods learn at all, before the federated rows' hour",
    )
    parser.add_argument(
        "--seeds",
        type=seeds_option,
        default=None,
        help="'planned' (default): each cell the seeds its table's stored seed plan gives it (benchmarks/results/tables/NAME.json); N: N seeds in every cell",
    )
    parser.add_argument("--records", type=Path, default=RECORDS, help="the tables' records whose stored seed plans --seeds planned reads")
    parser.add_argument("--parallel", action="store_true", help="run the tables at once, each with the whole budget (a GPU these small nets leave idle)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.device, args.jobs = "cpu", 1
    if args.budget_seconds is None:
        args.budget_seconds = 3600.0 if args.tiny else 600.0
    chosen = {k: v for k, v in TABLES.items() if args.only is None or k in args.only}
    started, at_start = time.perf_counter(), machine()
    record = {
        "what": "FedDB Table 2 (δ=0.3) and MFCL Table 2 (Sc2): controls and core rows in the GPU setting",
        "seeds": "planned: the seeds each table's stored seed plan gives its cells" if args.seeds is None else args.seeds,
        "size": "tiny (CPU check)" if args.tiny else "gpu",
        "command": command_line(argv),
        "machine": at_start,
        "tables": {},
    }
    share = args.budget_seconds if args.parallel else args.budget_seconds / len(chosen)
    running = {name: (*start_table(name, spec, args), time.perf_counter()) for name, spec in chosen.items()} if args.parallel else {}
    for name, spec in chosen.items():
        command, folder, process, since = running[name] if args.parallel else (*start_table(name, spec, args), time.perf_counter())
        rows = spec["controls"] if args.controls_only else spec["rows"]
        seeds = planned_seeds(spec, args.records) if args.seeds is None else dict.fromkeys(spec["rows"].split(","), args.seeds)
        record["tables"][name] = {"seeds": {row: seeds[row] for row in rows.split(",")}} | wait_table(command, folder, process, since, share)
        record["wall_seconds"] = round(time.perf_counter() - started, 1)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_setting.json").write_text(json.dumps(record, indent=2) + "\n")
        print(name, "finished" if record["tables"][name]["finished"] else "stopped", record["tables"][name]["wall_seconds"], "s", flush=True)
    return record


if __name__ == "__main__":
    main()
