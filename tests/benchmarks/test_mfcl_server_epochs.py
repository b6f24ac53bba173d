"""benchmarks/mfcl_server_epochs.py: a kept MFCL cell's server epochs read from its history, against its untrained twin."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import mfcl_server_epochs  # noqa: E402


def keep(root: Path, name: str, result: dict, config: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "config.toml").write_text(config)


def test_the_last_server_epochs_of_the_history_against_the_untrained_twin(tmp_path):
    # 15 sensor rounds evaluated too (a run with eval_features = "sensor" would), then 3 server epochs
    history = [0.30] * 15 + [0.66, 0.63, 0.58]
    keep(tmp_path, "MFCL_PN_--Sc2--seed1", {"history": history, "initial_accuracy": 0.10}, "[algorithm]\nserver_epochs = 3\n")
    keep(tmp_path, "MFCL_PN_untrained--Sc2--seed1", {"history": [], "initial_accuracy": 0.574})
    keep(tmp_path, "FedSimCLR--Sc2--seed1", {"history": [0.7], "initial_accuracy": 0.5})
    record = mfcl_server_epochs.main([str(tmp_path), "--out", str(tmp_path / "out.json")])
    (trace,) = record["cells"]  # the untrained row and FedSimCLR are not traced
    assert (trace["row"], trace["column"], trace["seed"]) == ("MFCL(PN)", "Sc2", 1)
    assert trace["after_epoch"] == [66.0, 63.0, 58.0] and trace["untrained"] == 57.4
    assert trace["minus_untrained"] == [8.6, 5.6, 0.6] and trace["best_epoch"] == 1
