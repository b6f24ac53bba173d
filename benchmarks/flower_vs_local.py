"""The same FST-CBDG experiment in-process and on Flower's simulation engine, timed in one run.

The ``fst-cbdg`` preset: Fashion-MNIST through the locked-text stand-in encoder,
100 clients (shards, s=2), 10 per round, 10 rounds. The encoder's features are
computed (or found in the feature cache) by an untimed first process, so both
timed runs read cached features. Each timed run is a fresh Python process doing
what ``fedprior run`` does, start-up included: imports, loading the data and the
cached features, building the experiment, writing the run directory, training,
evaluating every round, the report. (The FST-CBDG report's extra section, which
trains the supervised baselines, is left out of both: it is the same work in both
runtimes.) The Flower run also pays for starting Ray, exporting the clients' data,
one virtual SuperNode per client, and a message per sampled client per round.

    python benchmarks/flower_vs_local.py [--json] [--set section.key=value ...]

Prints local_seconds, flower_seconds and ratio = flower_seconds / local_seconds,
plus both final accuracies and whether the accuracy histories are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared import print_result

PRESET = "fst-cbdg"
QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def child(runtime: str, run_dir: str, overrides: list[str]) -> None:
    """One run, in this (fresh) process; prints its summary as JSON on the last line."""
    from fedprior.experiments.build import build_experiment
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    if runtime == "warm-up":
        build_experiment(*load_config(PRESET, overrides))
        print(json.dumps({}))
        return
    name, config = load_config(PRESET, [*overrides, f"run.runtime='{runtime}'"])
    print(json.dumps(start(name, config, Path(run_dir), report_extras=False)))


def timed(runtime: str, run_dir: Path, overrides: list[str]) -> tuple[float, dict]:
    command = [sys.executable, __file__, "--child", runtime, str(run_dir)]
    for item in overrides:
        command += ["--set", item]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **QUIET})
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"the {runtime} run failed:\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="override a config field (section.key=value)")
    parser.add_argument("--child", nargs=2, metavar=("RUNTIME", "RUN_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.overrides)
        return

    with tempfile.TemporaryDirectory(prefix="fedprior-bench-") as work:
        timed("warm-up", Path(work) / "warm-up", args.overrides)  # fills the feature cache, untimed
        local_seconds, local = timed("local", Path(work) / "local", args.overrides)
        flower_seconds, flower = timed("flower-sim", Path(work) / "flower", args.overrides)

    out = {
        "experiment": PRESET,
        "num_clients": local["num_clients"],
        "rounds": local["rounds"],
        "local_seconds": round(local_seconds, 2),
        "flower_seconds": round(flower_seconds, 2),
        "ratio": round(flower_seconds / local_seconds, 2),
        "local_final_accuracy": local["final_accuracy"],
        "flower_final_accuracy": flower["final_accuracy"],
        "identical_histories": local["history"] == flower["history"],
        "cpus": os.cpu_count(),
        "run_threads": next((o.split("=", 1)[1] for o in args.overrides if o.startswith("run.threads=")), "0 (fedprior's thread policy)"),
    }
    print_result(out, args.json)


if __name__ == "__main__":
    main()
