"""benchmarks/paper_scale.py runs (FedDB's setting at small scale, one timed round) and writes what docs/runtime.md says."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.benchmark  # 40-60 s: with the benchmarks
def test_paper_scale_times_the_plain_loop_and_profiles_the_pieces_of_a_client_step(tmp_path):
    """Issue 43 item 3: the yardstick (a plain PyTorch loop of the same network) and its ratio, the varying-shapes mode, and
    the profile's launch counts of each piece of a client step, in one record."""
    out = tmp_path / "paper_scale_cpu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(ROOT / "benchmarks" / "paper_scale.py"), "--only", "fixmatch", "--rounds", "1", "--no-evaluation"]
    command += ["--shapes", "varying", "--plain-steps", "2", "--profile", "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True, env=env, timeout=600)
    setting = json.loads(out.read_text())["settings"]["fixmatch"]
    assert setting["shapes"] == "varying" and setting["cudnn_benchmark"] is False
    plain = setting["plain_loop"]
    assert plain["model"] == "convnet" and plain["batch"] == 100 and plain["tflops"] > 0  # 2,000 images over 20 clients
    assert setting["plain_loop_ratio"] == pytest.approx(setting["client_tflops"] / plain["tflops"], rel=1e-3)
    pieces = setting["profile"]["pieces"]
    assert setting["profile"]["round"]["aten_calls"] > pieces["forward_backward"]["aten_calls"] > 0
    assert setting["profile"]["round"]["optimizer_steps"] == 2 * 5  # 2 clients a round, E = 5 full-batch steps each
    assert setting["profile"]["plain_step"]["optimizer_steps"] == 1 and setting["profile"]["plain_step"]["aten_calls"] > 0
    assert pieces["strong_view"]["aten_calls"] > pieces["weak_view"]["aten_calls"] > 0


def test_varying_shapes_gives_each_client_and_round_its_own_share_of_unlabeled_images():
    """``--shapes varying``: the share kept is drawn from (round, client), the same in both timed passes, within the range."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import paper_scale
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    import torch

    from fedprior.algorithms.base import Algorithm, Broadcast, ClientInfo, Reply

    seen = []

    def client_update(message, state, data, info):
        seen.append((info.round, info.client_id, data["x_unlabeled"].shape[0], data["y_unlabeled"].shape[0], data["x_labeled"].shape[0]))
        return Reply({}, num_examples=1), state

    def unused(*args):
        raise AssertionError("not called")

    algorithm = paper_scale.with_varying_shapes(
        Algorithm(
            name="probe", inputs=("x_labeled", "x_unlabeled"), init=unused, broadcast=unused, client_update=client_update, aggregate=unused, evaluate=unused
        )
    )
    data = {"x_labeled": torch.zeros(7, 1), "x_unlabeled": torch.zeros(200, 1), "y_unlabeled": torch.zeros(200)}
    for round_ in (1, 2):
        for client in (0, 1, 2):
            algorithm.client_update(Broadcast({}), {}, data, ClientInfo(seed=0, stage="federated", round=round_, client_id=client))
    algorithm.client_update(Broadcast({}), {}, data, ClientInfo(seed=0, stage="federated", round=1, client_id=0))
    kept = [s[2] for s in seen]
    assert all(20 <= k <= 200 for k in kept) and len(set(kept[:6])) > 1  # a share in [0.1, 1.0], not one size for all
    assert all(s[2] == s[3] and s[4] == 7 for s in seen)  # the hidden labels follow; the labeled images are untouched
    assert kept[6] == kept[0]  # the same (round, client) gives the same shape
