"""Two run directories of the same config and seed on two devices (the GPU's and the CPU's), side by side.

benchmarks/device_check.sh runs one preset end to end with ``run.device=cuda`` and again with ``run.device=cpu``
(same seed, so the same partition, client sampling and per-client streams: docs/runtime.md, "Same numbers, CUDA
and run.deterministic") and compares them here: per evaluated round each run's accuracy and loss and their
difference, whether the same clients were sampled, the largest difference, each run's wall time, and whether the
final states are bit-equal. A GPU sums in another order than the CPU, so the numbers are expected to drift apart in
the last bits and, through training, more (``first_round_numbers_differ``: the first round, 0 the initial
evaluation, whose digest of every float differs); the same clients in every round are expected whatever the device.

    python benchmarks/device_compare_runs.py RUN_A RUN_B [--out compare.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fedprior.results.fingerprints import first_difference


def rounds(run: Path) -> list[dict]:
    """The run's per-round records (metrics.jsonl)."""
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def compare(a: Path, b: Path) -> dict:
    """Per evaluated round: both runs' accuracy and loss and the differences; summaries of both."""
    result_a, result_b = (json.loads((run / "result.json").read_text()) for run in (a, b))
    table, same_clients = [], True
    for row_a, row_b in zip(rounds(a), rounds(b), strict=True):
        same_clients &= row_a.get("clients") == row_b.get("clients")
        if "accuracy" not in row_a or "accuracy" not in row_b:
            continue
        table.append(
            {
                "stage": row_a["stage"],
                "round": row_a["round"],
                "accuracy": [row_a["accuracy"], row_b["accuracy"]],
                "accuracy_difference": row_a["accuracy"] - row_b["accuracy"],
                "loss": [row_a.get("loss"), row_b.get("loss")],
                "loss_difference": None if row_a.get("loss") is None or row_b.get("loss") is None else row_a["loss"] - row_b["loss"],
            }
        )
    return {
        "runs": [str(a), str(b)],
        "devices": [result_a.get("device"), result_b.get("device")],
        "initial_accuracy": [result_a.get("initial_accuracy"), result_b.get("initial_accuracy")],
        "final_accuracy": [result_a.get("final_accuracy"), result_b.get("final_accuracy")],
        "wall_seconds": [result_a.get("wall_seconds"), result_b.get("wall_seconds")],
        "same_clients_every_round": same_clients,
        "largest_accuracy_difference": max((abs(r["accuracy_difference"]) for r in table), default=None),
        "largest_loss_difference": max((abs(r["loss_difference"]) for r in table if r["loss_difference"] is not None), default=None),
        "same_final_state": result_a.get("state_sha256") == result_b.get("state_sha256"),
        "first_round_numbers_differ": first_difference(result_a.get("round_fingerprints", []), result_b.get("round_fingerprints", [])),
        "rounds": table,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    record = compare(args.run_a, args.run_b)
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    sys.exit(0 if record["same_clients_every_round"] else 1)


if __name__ == "__main__":
    main()
