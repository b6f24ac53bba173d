"""MFCL's embedded benchmarks: `fedprior run mfcl` wall time, and Table 2's MFCL(BN/GN/PN) and FedSimCLR columns with seeds.

    python benchmarks/mfcl_embedded.py run                         # one `fedprior run mfcl` in a fresh process, timed
    python benchmarks/mfcl_embedded.py table2 [--seeds 3] [--scenarios Sc1,Sc2,Sc5,Sc10] [--out runs/mfcl-bench]

``run`` prints the wall time (the preset is sized to end within 5 minutes on a 2-core
machine), the linear-evaluation accuracy and the bytes sent. ``table2`` runs
``fedprior table mfcl-table2 --embedded`` on the rows MFCL(BN), MFCL(GN), MFCL(PN) and
FedSimCLR and the given scenario columns (issue 11's benchmark: Sc1, Sc2, Sc5, Sc10, 3 seeds:
48 runs) into ``--out`` (its table.md/json hold ours beside the paper's numbers) and prints
its wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from shared import timed

FEDPRIOR = [sys.executable, "-m", "fedprior"]
ROWS = "MFCL(BN),MFCL(GN),MFCL(PN),FedSimCLR"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "table2"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--scenarios", default="Sc1,Sc2,Sc5,Sc10")
    parser.add_argument("--out", type=Path, default=Path("runs/mfcl-bench"))
    args = parser.parse_args()
    if args.what == "run":
        with tempfile.TemporaryDirectory() as folder:
            seconds, out = timed([*FEDPRIOR, "run", "mfcl", "--json", "--run-dir", str(Path(folder) / "run")])
        summary = json.loads(out.strip().splitlines()[-1])
        keys = ("final_accuracy", "upload_bytes", "download_bytes")
        print(json.dumps({"wall_seconds": round(seconds, 1), **{k: summary.get(k) for k in keys}}))
        return
    command = [
        *FEDPRIOR,
        "table",
        "mfcl-table2",
        "--embedded",
        "--seeds",
        str(args.seeds),
        "--rows",
        ROWS,
        "--columns",
        args.scenarios,
        "--out",
        str(args.out / "mfcl-table2"),
        "--json",
    ]
    seconds, _ = timed(command)
    print(f"mfcl-table2 ({ROWS}; {args.scenarios}): {seconds:.0f} s for {args.seeds} seed(s); see {args.out / 'mfcl-table2' / 'table.md'}")


if __name__ == "__main__":
    main()
