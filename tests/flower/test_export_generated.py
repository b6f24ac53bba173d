"""Issue 53 item 5: a generated federation (data.dataset = 'synthetic') on Flower: the export writes the generator's
description, not N clients' data; a node generates a client's training split when a round asks for it, the arrays of
the in-process run bit for bit."""

from __future__ import annotations

import json
import tracemalloc

import pytest
import torch

pytest.importorskip("flwr")

from fedprior.data.synthetic import SyntheticFederation  # noqa: E402
from fedprior.experiments.build import build_experiment  # noqa: E402
from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.flower.export import CLIENTS_FILE, NODE_FILE, TASK_FILE, NodeData, export_all, export_nodes  # noqa: E402

RUN = ["run.threads=1", "run.workers=1", "run.device=cpu"]
SMALL = ("fedavg-synthetic", [*RUN, "federation.num_clients=12", "federation.rounds=2", "federation.fraction=0.25", "federation.local_epochs=1"])


def test_a_million_generated_clients_export_a_description_and_no_client(tmp_path, monkeypatch):
    _, config = load_config("fedavg-synthetic", [*RUN, "federation.num_clients=1000000", "federation.fraction=0.0001"])
    experiment = build_experiment("fedavg-synthetic", config)

    def refuse(self, client):
        raise AssertionError(f"the export generated client {client}")

    monkeypatch.setattr(SyntheticFederation, "client", refuse)
    tracemalloc.start()
    try:
        folder = export_all(experiment, tmp_path / "data")
        nodes = export_nodes(experiment, tmp_path / "nodes", 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # no client generated (refuse), no list of 10^6 ids (36 MB as Python ints)
    written = sum(f.stat().st_size for d in (folder, *nodes) for f in d.iterdir())
    assert written < 64_000 and not (folder / CLIENTS_FILE).exists()
    assert json.loads((folder / TASK_FILE).read_text())["generated"] == {
        "dataset": "synthetic",
        "num_clients": 1_000_000,
        "alpha": 1.0,
        "beta": 1.0,
        "iid": False,
        "seed": config.run.seed,
        "fields": ["x", "y"],
    }
    assert json.loads((nodes[1] / NODE_FILE).read_text())["range"] == [1, 1_000_000, 3]
    assert NodeData(nodes[1]).hosted == range(1, 1_000_000, 3) and NodeData(folder).hosted == range(1_000_000)
    monkeypatch.undo()
    node = NodeData(folder)
    for client in (0, 123_457, 999_999):
        ours, theirs = node.client_data(client), experiment.client_data(client)
        assert ours.keys() == theirs.keys() == {"x", "y"}
        for k in ours:
            assert ours[k].dtype == theirs[k].dtype and ours[k].stride() == theirs[k].stride() and torch.equal(ours[k], theirs[k])


def test_a_node_refuses_a_client_outside_the_generated_federation(tmp_path):
    _, config = load_config(*SMALL)
    node = NodeData(export_all(build_experiment("fedavg-synthetic", config), tmp_path))
    with pytest.raises(Exception, match="client 12 is not one of the 12 generated clients"):
        node.client_data(12)


@pytest.mark.federation_processes  # a Ray start (23 s alone on this 2-core machine): with CI's Flower step, like test_simulation.py's extra cases
def test_flower_sim_fedavg_synthetic_gives_the_in_process_numbers(tmp_path, monkeypatch):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)
    from tests.flower.test_simulation import assert_flower_run_is_the_local_one, run

    local = run(SMALL, "local", tmp_path / "local")
    flower = run(SMALL, "flower-sim", tmp_path / "flower", runtime_options={"keep_files": True})
    assert not (tmp_path / "flower" / "flower" / "data" / CLIENTS_FILE).exists()  # the virtual nodes generated their clients
    assert_flower_run_is_the_local_one(flower, local, tmp_path / "flower", tmp_path / "local")
