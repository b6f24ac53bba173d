"""benchmarks/paper_scale.py runs (FedDB's setting at small scale, one timed round) and writes what docs/runtime.md says."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.benchmark  # 20-30 s: with the benchmarks (pytest -m benchmark), not in the default run
def test_paper_scale_benchmark_writes_counted_rounds(tmp_path):
    out = tmp_path / "paper_scale_cpu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(ROOT / "benchmarks" / "paper_scale.py"), "--only", "feddb", "--rounds", "1", "--no-evaluation", "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True, env=env, timeout=300)
    record = json.loads(out.read_text())
    assert record["command"].startswith("python benchmarks/paper_scale.py") and record["machine"]["cores"]
    feddb = record["settings"]["feddb"]
    assert feddb["timed_rounds"] == 1 and feddb["seconds_per_round"] > 0
    assert feddb["tflop_per_round"] > 0 and feddb["achieved_tflops"] > 0
    assert feddb["client_seconds_per_round"] <= feddb["seconds_per_round"]
    assert feddb["peak_tflops"] is None and feddb["ratio_to_peak"] is None  # the CPU has no peak in the table
    assert feddb["projected_seconds"] == pytest.approx(800 * feddb["seconds_per_round"], rel=1e-3, abs=0.1)
