"""A run on Synthetic(alpha, beta) (data.dataset = 'synthetic'): lazy set-up at any N, one small round, the refusals."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from fedprior.data.synthetic import TEST_CLIENTS, SyntheticFederation
from fedprior.errors import ConfigError
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start

RUN = ["run.threads=1", "run.workers=1", "run.device=cpu"]


def test_a_million_clients_are_set_up_without_generating_one(monkeypatch):
    """Set-up draws the sizes (4 MB) and the global test set's clients, and no other client; memory stays far below 500 MB."""
    made: list[int] = []
    original = SyntheticFederation.client
    monkeypatch.setattr(SyntheticFederation, "client", lambda self, k: made.append(k) or original(self, k))
    _, config = load_config("fedavg-synthetic", [*RUN, "federation.num_clients=1000000", "federation.fraction=0.0001"])
    tracemalloc.start()
    try:
        experiment = build_experiment("fedavg-synthetic", config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert experiment.generated is not None and experiment.generated.sizes.nbytes == 4_000_000
    assert sorted(made) == list(range(TEST_CLIENTS))  # the global test set's clients only
    assert peak < 200e6
    loop = experiment.round_loop()
    assert len(loop.client_sizes) == 1_000_000 and loop.client_sizes[123_456] == experiment.client_size(123_456)
    data = experiment.client_data(999_999)
    assert data["x"].shape == (experiment.client_size(999_999), 60)
    np.testing.assert_array_equal(data["y"].numpy(), experiment.generated.client(999_999).y_train)


def test_one_small_round_of_fedavg_synthetic(tmp_path):
    _, config = load_config(
        "fedavg-synthetic", [*RUN, "federation.num_clients=8", "federation.fraction=0.25", "federation.rounds=1", "federation.local_epochs=1"]
    )
    summary = start("fedavg-synthetic", config, tmp_path / "run")
    assert summary["dataset"] == "synthetic" and summary["num_clients"] == 8 and summary["client_updates"] == 2
    assert math.isfinite(summary["final_accuracy"]) and summary["final_accuracy"] != summary["initial_accuracy"]
    again = start("fedavg-synthetic", config, tmp_path / "again")
    assert again["round_fingerprints"] == summary["round_fingerprints"]
    assert (tmp_path / "run" / "partition.png").is_file()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["partition.scheme=dirichlet"], "partition.scheme: the synthetic federation comes split by client; accepted: natural"),
        (["data.root=/tmp"], "data.root: the synthetic federation is generated"),
        (["data.synthetic_iid=true"], "data.synthetic_alpha: Synthetic IID"),
        (["run.model_selection=validation"], "run.model_selection: the synthetic federation has no validation split"),
        (["partition.local_test_fraction=0.2"], "partition.local_test_fraction: each synthetic client already holds out 20%"),
    ],
)
def test_what_a_generated_federation_refuses(overrides, message):
    extra = ["data.synthetic_alpha=0.5"] if overrides == ["data.synthetic_iid=true"] else []
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
        load_config("fedavg-synthetic", [*extra, *overrides])


def test_synthetic_fields_only_with_the_synthetic_dataset():
    with pytest.raises(ConfigError, match="^data.synthetic_beta: applies to data.dataset = 'synthetic' only"):
        load_config("fedavg-cnn", ["data.synthetic_beta=0.5"])
