"""MFCL's embedded setting chosen by its controls alone, before any method is compared (issue 18 item 4).

For each candidate setting (:data:`SETTINGS`: data per client, phase-1 epochs and rounds,
discriminator width, server epochs), ``fedprior table mfcl-table2 --embedded`` runs the Sc2
column's control rows with that setting's overrides: MFCL(PN) and FedSimCLR trained and
untrained, raw pixels, the sensor module's representations trained and untrained, and
supervised FedAvg. The table's own controls decide (``papers/mfcl/tables.py``): the setting
is informative when trained MFCL(PN) and trained FedSimCLR are both at least 5 points above
their untrained networks under the paper's linear evaluation. The other rows are reported
beside them. No method row is run here; a run may take up to 10 CPU-minutes (its wall
seconds are listed).

    python benchmarks/mfcl_setting.py [--seeds 1] [--jobs 2] [--runs runs/mfcl-setting] [--only NAME ...] [--set run.device=cuda]

Each setting's cells go to ``--runs/NAME`` (finished cells are reused, stopped ones resume).
Writes ``benchmarks/results/mfcl_setting.json``: the command, the machine, and per setting
its overrides, each row's accuracy (mean over seeds), the controls with their status, and
the cells' wall seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from shared import machine, save_settings

RESULT = Path(__file__).parent / "results" / "mfcl_setting.json"
ROWS = "MFCL(PN),MFCL(PN) untrained,FedSimCLR,FedSimCLR untrained,raw pixels,MFCL(PN) sensor,MFCL(PN) sensor untrained,FedAvg"
SETTINGS: dict[str, tuple[str, ...]] = {  # cheapest first; the presets' setting is "preset"
    "preset": (),
    "6k-e2": ("data.train_subset=6000", "federation.local_epochs=2"),
    "6k-e2-r30-s20": ("data.train_subset=6000", "federation.local_epochs=2", "federation.rounds=30", "algorithm.server_epochs=20"),
    "6k-e2-r30-s20-d16": (
        "data.train_subset=6000",
        "federation.local_epochs=2",
        "federation.rounds=30",
        "algorithm.server_epochs=20",
        "algorithm.disc_width=16",
    ),
}


def run_setting(name: str, overrides: tuple[str, ...], args: argparse.Namespace) -> dict:
    fedprior = str(Path(sys.executable).with_name("fedprior"))
    sets = [a for o in (*overrides, *args.extra) for a in ("--set", o)]
    out = args.runs / name
    command = [
        fedprior,
        "table",
        "mfcl-table2",
        "--embedded",
        "--columns",
        "Sc2",
        "--rows",
        ROWS,
        "--seeds",
        str(args.seeds),
        "--jobs",
        str(args.jobs),
        "--out",
        str(out),
        *sets,
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    table = json.loads((out / "table.json").read_text())
    return {
        "overrides": list(overrides),
        "rows": {c["row"]: {"mean": c["ours"], "sd": c["std"], "values": c["finals"], "seconds": round(c["seconds"], 1)} for c in table["cells"]},
        "controls": [{k: c.get(k) for k in ("condition", "above", "below", "difference", "status")} for c in table["controls"]],
        "informative": all(c["status"] == "passed" for c in table["controls"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=Path("runs/mfcl-setting"))
    parser.add_argument("--only", nargs="*", default=None, help="setting names (default: all)")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="an override for every run (e.g. run.device=cuda)")
    args = parser.parse_args()
    started, at_start = time.perf_counter(), machine()
    header = {
        "what": "MFCL Table 2, Sc2, control rows only, under each candidate setting: linear-evaluation accuracy (%), mean over seeds",
        "rule": "MFCL(PN) and FedSimCLR each at least 5 points above the same network untrained (the table's controls)",
        "seeds": args.seeds,
    }
    for name, overrides in SETTINGS.items():
        if args.only is None or name in args.only:  # written as each setting finishes: a stopped grid keeps what it measured
            result = run_setting(name, overrides, args)
            print(name, json.dumps({"informative": result["informative"], "controls": result["controls"]}), flush=True)
            save_settings(RESULT, header, {name: result}, started, at_start)


if __name__ == "__main__":
    main()
