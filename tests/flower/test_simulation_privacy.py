"""Client-level DP on Flower's simulation engine: the same numbers as in-process, with the clients clipping on the nodes."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("flwr")

from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.experiments.runner import start  # noqa: E402

# Ray starts worker processes and the two runs take about 40 s on 2 busy cores: with the Flower process tests, not in the default run
pytestmark = pytest.mark.federation_processes

DP = [
    "data.dataset=digits",
    "federation.num_clients=6",
    "federation.rounds=2",
    "federation.fraction=0.5",
    "privacy.dp=client",
    "privacy.clipping=adaptive",
    "privacy.noise_multiplier=0.5",
    "privacy.count_stddev=1.0",
]


@pytest.fixture(autouse=True)
def flower_env(monkeypatch):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)


def test_client_side_adaptive_dp_on_flower_sim_gives_the_in_process_numbers(tmp_path, shared_cache):
    out = {}
    for runtime in ("local", "flower-sim"):
        name, config = load_config("fedavg-cnn", [*DP, f"run.runtime='{runtime}'"])
        out[runtime] = start(name, config, tmp_path / runtime, report_extras=False)
    local, flower = out["local"], out["flower-sim"]
    assert len(flower["dp_epsilon_per_round"]) == 2 and flower["dp_epsilon_per_round"] == local["dp_epsilon_per_round"]
    assert flower["history"] == local["history"]
    ours, theirs = ([json.loads(line) for line in (tmp_path / r / "metrics.jsonl").read_text().splitlines()] for r in ("flower-sim", "local"))
    for a, b in zip(ours, theirs, strict=True):  # the clip norm each round used, its noise, the noised unclipped fraction
        for key in ("dp_clip_norm", "dp_noise_std", "dp_unclipped_fraction", "dp_epsilon"):
            assert math.isclose(a[key], b[key], rel_tol=1e-9), key
    assert ours[1]["dp_clip_norm"] != ours[0]["dp_clip_norm"]  # adaptive: C moved after round 1


def test_a_poisson_round_without_clients_releases_on_flower_sim_as_in_process(tmp_path, shared_cache):
    from fedprior.runtime.sampling import Draw, Poisson

    def empty(seed: int) -> list[int]:
        return [r for r in (1, 2) if not Poisson().select(Draw(seed, "federated", r, 6, 1, fraction=0.2))]

    seed = next(s for s in range(100) if empty(s) == [1])  # round 1 samples nobody, round 2 somebody
    args = ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=2", "federation.fraction=0.2", "privacy.dp=server", f"run.seed={seed}"]
    out = {}
    for runtime in ("local", "flower-sim"):
        name, config = load_config("fedavg-cnn", [*args, f"run.runtime='{runtime}'"])
        out[runtime] = start(name, config, tmp_path / runtime, report_extras=False)
    assert out["flower-sim"]["history"] == out["local"]["history"]
    assert out["flower-sim"]["dp_epsilon_per_round"] == out["local"]["dp_epsilon_per_round"]
    first = [json.loads(line) for line in (tmp_path / "flower-sim" / "metrics.jsonl").read_text().splitlines() if '"round": 1,' in line][0]
    assert first["clients"] == [] and "noised mean of no updates was released" in first["note"] and math.isclose(first["dp_noise_std"], 1.0 / 1.2)


def test_client_side_dp_under_secagg_on_flower_sim_matches_the_in_process_run_within_the_quantization_bound(tmp_path, shared_cache):
    """Distributed DP (clients clip, SecAgg+ sums, the server adds the noise) on Ray's virtual SuperNodes, one round: the model is
    the in-process run's within SecAgg+'s quantization of the sum over m (the noise is the round's server stream: the same), and
    the adaptive C and the noise std are exactly the in-process ones (the count of unclipped updates is summed exactly)."""
    import torch

    from fedprior.flower.secagg import SecAggOptions, sum_quantization_bound
    from fedprior.runtime.checkpoint import load_checkpoint

    one_round = [*DP, "federation.rounds=1", "federation.fraction=1.0"]  # q = 1: every node in the round (Poisson's count would vary)
    start(*load_config("fedavg-cnn", [*one_round, "run.runtime='local'"]), tmp_path / "local", report_extras=False)
    name, config = load_config("fedavg-cnn", [*one_round, "run.runtime='flower-sim'"])
    secure = start(name, config, tmp_path / "secure", report_extras=False, runtime_options={"secagg": SecAggOptions()})
    assert secure["failed_updates"] == 0
    ours, theirs = (json.loads((tmp_path / r / "metrics.jsonl").read_text().splitlines()[0]) for r in ("secure", "local"))
    assert ours["upload_bytes_by_client"].keys() == {"-1"} and ours["dp_checked_replies"] == 0 and theirs["dp_checked_replies"] == 6
    for key in ("dp_clip_norm", "dp_noise_std", "dp_unclipped_fraction", "dp_epsilon"):
        assert ours[key] == theirs[key], key
    m = 6  # federation.fraction 1 of 6 clients, each on its own virtual node
    bound = sum_quantization_bound(SecAggOptions(), m) / m
    local, flower = (load_checkpoint(tmp_path / r / "checkpoint.safetensors").server for r in ("local", "secure"))
    largest = 0.0
    for key, value in local.items():
        if key.startswith("privacy.") or not value.is_floating_point():
            continue
        gap = (flower[key].double() - value.double()).abs()
        assert bool((gap <= bound + 2 * torch.finfo(value.dtype).eps * value.double().abs()).all()), key
        largest = max(largest, float(gap.max()))
    assert 0 < largest  # quantized: not the plain path
    assert torch.equal(flower["privacy.clip_norm"], local["privacy.clip_norm"])
