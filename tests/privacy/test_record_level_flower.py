"""privacy.dp = 'sample' on Flower's simulation engine: the nodes run DP-SGD and keep each client's accountant; the in-process numbers."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr")
pytest.importorskip("opacus")

from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.experiments.runner import start  # noqa: E402
from tests.privacy.test_record_level import TINY  # noqa: E402

# Ray starts worker processes: with the Flower process tests, not in the default run
pytestmark = pytest.mark.federation_processes


@pytest.fixture(autouse=True)
def flower_env(monkeypatch):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)


def test_record_level_dp_on_flower_sim_gives_the_in_process_numbers(tmp_path, shared_cache):
    out = {}
    for runtime in ("local", "flower-sim"):
        name, config = load_config("fedavg-cnn", [*TINY, "federation.rounds=3", f"run.runtime='{runtime}'"])
        out[runtime] = start(name, config, tmp_path / runtime, report_extras=False)
    local, flower = out["local"], out["flower-sim"]
    assert len(flower["dp_epsilon_per_round"]) == 3 and flower["dp_epsilon_per_round"] == local["dp_epsilon_per_round"]
    assert flower["dp_epsilon_median"] == local["dp_epsilon_median"] and flower["history"] == local["history"]
    assert local["dp_epsilon_per_round"][-1] > local["dp_epsilon_per_round"][0]
    # 6 draws of 4 clients: some client trains twice, and its node composes its steps with those it kept from before
