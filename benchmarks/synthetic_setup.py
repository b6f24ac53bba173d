"""Set-up of a run on Synthetic(1, 1) at N clients: RSS growth and seconds (docs/synthetic.md's table).

Builds the experiment of ``fedavg-synthetic`` with N clients (100 a round), its round loop and its partition
statistics, as ``fedprior run`` does before the first round, and prints the process's resident memory before
and after (``/proc/self/statm``) and the seconds taken. One N per process, so that each starts from the same
memory (``--json``: one JSON object, as ``benchmarks/docs_runs.py synthetic-setup`` keeps it):

    nice -n 10 python benchmarks/synthetic_setup.py 1000
    nice -n 10 python benchmarks/synthetic_setup.py 1000000
"""

from __future__ import annotations

import json
import sys
import time

import fedprior.experiments.runner  # noqa: F401  (imported as a run imports it, before the first reading)
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config


def rss_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 1e6


def main() -> None:
    n = int(sys.argv[1])
    _, config = load_config("fedavg-synthetic", [f"federation.num_clients={n}", f"federation.fraction={min(1.0, 100 / n)}", "run.threads=1", "run.workers=1"])
    before, started = rss_mb(), time.perf_counter()
    experiment = build_experiment("fedavg-synthetic", config)
    experiment.round_loop()
    experiment.partition_statistics()
    seconds, after = time.perf_counter() - started, rss_mb()
    if "--json" in sys.argv[2:]:
        print(json.dumps({"num_clients": n, "rss_before_mb": before, "rss_after_mb": after, "rss_growth_mb": after - before, "setup_seconds": seconds}))
    else:
        print(f"N={n}: RSS before set-up {before:.0f} MB, after {after:.0f} MB (growth {after - before:.0f} MB), set-up {seconds:.1f} s")


if __name__ == "__main__":
    main()
