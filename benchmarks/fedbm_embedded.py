"""FedBM's embedded benchmarks: `fedprior run fedbm` wall time, and Tables I and VI on Fashion-MNIST with 3 seeds.

    python benchmarks/fedbm_embedded.py run            # one `fedprior run fedbm` in a fresh process, timed (start-up included)
    python benchmarks/fedbm_embedded.py tables [--seeds 3] [--out runs/fedbm-bench]

``run`` prints the wall time (the preset is sized to end within 5 minutes on a 2-core
machine), the final and validation-selected accuracy and macro-F1. ``tables`` runs
``fedprior table fedbm-table1 --embedded`` and ``fedbm-table6 --embedded`` with the given
seeds into ``--out`` (their table.md/json hold ours beside the paper's numbers) and prints
each table's wall time. Table I is 22 runs per seed, Table VI 6.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from shared import timed

FEDPRIOR = [sys.executable, "-m", "fedprior"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "tables"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("runs/fedbm-bench"))
    args = parser.parse_args()
    if args.what == "run":
        with tempfile.TemporaryDirectory() as folder:
            seconds, out = timed([*FEDPRIOR, "run", "fedbm", "--json", "--run-dir", str(Path(folder) / "run")])
        summary = json.loads(out.strip().splitlines()[-1])
        keys = ("final_accuracy", "final_macro_f1", "selected_accuracy", "selected_macro_f1", "selected_round")
        print(json.dumps({"wall_seconds": round(seconds, 1), **{k: summary.get(k) for k in keys}}))
        return
    for table in ("fedbm-table1", "fedbm-table6"):
        seconds, _ = timed([*FEDPRIOR, "table", table, "--embedded", "--seeds", str(args.seeds), "--out", str(args.out / table), "--json"])
        print(f"{table}: {seconds:.0f} s for {args.seeds} seed(s); see {args.out / table / 'table.md'}")


if __name__ == "__main__":
    main()
