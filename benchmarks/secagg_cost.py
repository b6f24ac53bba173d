"""Per-round seconds and test accuracy, plain vs SecAgg+: FedAvg's CNN on 4 digits clients, 3 rounds, every client each round.

Run: ``PYTHONPATH=src python benchmarks/secagg_cost.py``. The round loop runs over the loopback Grid of
tests/flower/test_secagg.py (fedprior's ClientApp and Flower's SecAgg+ in this process), so it times the
protocol's computation, not a network (docs/privacy-robustness.md quotes its output).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    logging.disable(logging.WARNING)
    from flwr.supercore.task_identity import TaskIdentity

    from fedprior.experiments.build import build_experiment
    from fedprior.experiments.config import load_config
    from fedprior.flower.secagg import SecAggOptions
    from tests.flower.test_secagg import federate_on_loopback

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0  # what a ServerApp process has
    overrides = ["data.dataset=digits", "federation.num_clients=4", "federation.rounds=3", "federation.fraction=1.0", "run.threads=1"]
    experiment = build_experiment(*load_config("fedavg-cnn", overrides))
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, options in (("plain", None), ("secagg", SecAggOptions())):
            result = federate_on_loopback(experiment, Path(folder) / name, name, options)
            out[name] = [{"round": r["round"], "seconds": round(r["seconds"], 3), "accuracy": r["accuracy"]} for r in result.progress.history]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
