"""FedBM's embedded preset timed: one ``fedprior run fedbm`` in a fresh process (start-up included).

    python benchmarks/fedbm_embedded.py

Prints the wall time (the preset is sized to end within 5 minutes on a 2-core machine), the
final and validation-selected accuracy and macro-F1. Tables I and VI over 3 seeds, with
their controls and verdicts, are made by ``benchmarks/paper_tables.py`` (docs/fedbm.md).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from shared import timed

FEDPRIOR = [sys.executable, "-m", "fedprior"]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        seconds, out = timed([*FEDPRIOR, "run", "fedbm", "--json", "--run-dir", str(Path(folder) / "run")])
    summary = json.loads(out.strip().splitlines()[-1])
    keys = ("final_accuracy", "final_macro_f1", "selected_accuracy", "selected_macro_f1", "selected_round")
    print(json.dumps({"wall_seconds": round(seconds, 1), **{k: summary.get(k) for k in keys}}))


if __name__ == "__main__":
    main()
