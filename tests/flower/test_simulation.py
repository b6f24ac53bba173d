"""run.runtime = "flower-sim": the same numbers as the in-process runtime, faults, resume after a server crash.

Each test runs Flower's simulation engine (Ray, num_cpus=1 per client) on the
embedded digits data: a few clients, a few rounds.
"""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import MessageType  # noqa: E402

from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.experiments.runner import resume, start  # noqa: E402
from fedprior.runtime.checkpoint import load_checkpoint  # noqa: E402

pytestmark = pytest.mark.slow
FLWR_DATASETS = importlib.util.find_spec("flwr_datasets") is not None

CNN = ("fedavg-cnn", ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=3", "federation.fraction=0.5"])
ROBUST = (
    "krum-fedavg-cnn",  # Krum, and clients 2 of 6 flipping their update's sign: the attack runs on the Flower nodes too
    [
        "data.dataset=digits",
        "federation.num_clients=6",
        "federation.rounds=2",
        "federation.fraction=0.5",
        "algorithm.krum_f=0",
        "federation.malicious_fraction=0.34",
    ],
)
PER_CLIENT = (
    "fedbm-fedrod",  # per-client evaluation: the broadcast asks for the P-heads, the nodes upload them, the server scores each client's split
    [
        "data.dataset=digits",
        "data.train_subset=0",
        "federation.num_clients=6",
        "federation.rounds=2",
        "federation.fraction=0.5",
        "partition.local_test_fraction=0.2",
    ],
)
POWER_OF_CHOICE = (  # the candidates' losses are asked of the Flower nodes by an EVALUATE message: the same clients train
    "fedavg-cnn",
    [
        "data.dataset=digits",
        "federation.num_clients=6",
        "federation.rounds=3",
        "federation.fraction=0.34",
        "federation.sampler='power-of-choice'",
        "federation.power_of_choice_candidates=4",
    ],
)
FLWR_DIRICHLET = (  # flwr-datasets' own DirichletPartitioner (partition.scheme = 'flwr:...', the hf extra) splits the clients on the nodes too
    "fedavg-cnn",
    [
        "data.dataset=digits",
        "federation.num_clients=6",
        "federation.rounds=2",
        "federation.fraction=0.5",
        "partition.scheme='flwr:DirichletPartitioner'",
        "partition.alpha=0.5",
    ],
)
FEDBN = (  # the BN layers stay on the nodes (no per-client evaluation: nothing asks for them)
    "fedbn-rotated",
    ["data.dataset=digits", "federation.num_clients=4", "federation.rounds=2", "federation.fraction=0.5", "partition.local_test_fraction=0"],
)
FST = (
    "fst-cbdg",
    ["data.dataset=digits", "encoder.recipe=v1", "encoder.pretrain_images=300", "federation.num_clients=8", "federation.rounds=3", "federation.fraction=0.5"],
)


@pytest.fixture(autouse=True)
def flower_env(monkeypatch, tmp_path_factory):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)


def run(experiment, runtime, path, **kw):
    preset, overrides = experiment
    name, config = load_config(preset, [*overrides, f"run.runtime='{runtime}'"])
    return start(name, config, path, report_extras=False, **kw)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs by (experiment, runtime), each done once for the module (a Ray start costs seconds)."""
    done = {}

    def get(experiment, runtime):
        key = (experiment[0], tuple(experiment[1]), runtime)
        if key not in done:
            path = tmp_path_factory.mktemp(f"{experiment[0]}-{runtime}")
            done[key] = (run(experiment, runtime, path / "run"), path / "run")
        return done[key]

    return get


def records(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def comparable(record):
    return {k: v for k, v in record.items() if k not in ("seconds", "failed_clients")}


def assert_flower_run_is_the_local_one(flower, local, flower_dir, local_dir):
    """The flower-sim run's history, round records (clients, none failed, numbers to float rounding) and final server state
    are the in-process run's."""
    assert flower["history"] == local["history"] and abs(flower["final_accuracy"] - local["final_accuracy"]) <= 1e-4
    ours, theirs = records(flower_dir), records(local_dir)
    assert [r["clients"] for r in ours] == [r["clients"] for r in theirs] and all(r["failed_clients"] == [] for r in ours)
    for a, b in zip(map(comparable, ours), map(comparable, theirs), strict=True):
        assert all(a[k] == b[k] if not isinstance(a[k], float) else math.isclose(a[k], b[k], rel_tol=1e-6) for k in a)
    assert_same_server_state(flower_dir, local_dir, exact=False)


@pytest.mark.parametrize(
    "experiment",
    # the attack, per-client, Power-of-Choice and flwr-datasets Dirichlet cases start Ray once more (~30 s each): they run with CI's Flower step (-m federation_processes), not in the default suite
    [
        CNN,
        FST,
        pytest.param(ROBUST, marks=pytest.mark.federation_processes),
        pytest.param(PER_CLIENT, marks=pytest.mark.federation_processes),
        pytest.param(POWER_OF_CHOICE, marks=pytest.mark.federation_processes),
        pytest.param(FLWR_DIRICHLET, marks=[pytest.mark.federation_processes, pytest.mark.skipif(not FLWR_DATASETS, reason="needs the hf extra")]),
        pytest.param(FEDBN, marks=pytest.mark.federation_processes),
    ],
    ids=["fedavg-cnn", "fst-cbdg", "krum-under-attack", "fedrod-per-client", "power-of-choice", "flwr-dirichlet", "fedbn-rotated"],
)
def test_flower_sim_gives_the_in_process_numbers(experiment, shared_cache, runs):
    local, local_dir = runs(experiment, "local")
    flower, flower_dir = runs(experiment, "flower-sim")
    assert flower["runtime"] == "flower-sim" and local["runtime"] == "local"
    assert flower.keys() == local.keys()
    assert ("final_client_accuracy" in flower) == (experiment is PER_CLIENT)  # each client's own model on its local test split
    assert abs(flower["final_accuracy"] - local["final_accuracy"]) <= 1e-4
    assert flower["history"] == local["history"] and flower["initial_accuracy"] == local["initial_accuracy"]
    ours, theirs = records(flower_dir), records(local_dir)
    assert [r["clients"] for r in ours] == [r["clients"] for r in theirs]
    assert all(r["failed_clients"] == [] for r in ours)
    if experiment is POWER_OF_CHOICE:  # the nodes answered: every round ranked its 4 candidates by their losses
        assert all(len(r["candidates"]) == 4 and None not in r["candidate_losses"] for r in ours)
    for a, b in zip(map(comparable, ours), map(comparable, theirs), strict=True):
        assert a.keys() == b.keys()
        # Ray's actors train with one thread: a client's mean training loss may differ in the 8th digit
        assert all(a[k] == b[k] if not isinstance(a[k], float) else math.isclose(a[k], b[k], rel_tol=1e-6) for k in a if k != "candidate_losses")
        assert all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(a.get("candidate_losses", []), b.get("candidate_losses", []), strict=True))
    assert sorted(p.name for p in flower_dir.iterdir()) == sorted(p.name for p in local_dir.iterdir())
    # the final models agree to float rounding: a simulated node trains its one client with one thread,
    # the in-process runtime trains the sampled clients as one batch with every core
    assert_same_server_state(flower_dir, local_dir, exact=False)


@pytest.mark.federation_processes
def test_fedbn_on_flower_never_sends_its_bn_layers_to_the_server(shared_cache, runs):
    """FedBN (issue 55, item 4) on flower-sim: the server's state after the run holds no batch-norm tensor (the nodes kept theirs)."""
    from fedprior.algorithms.fedbn import batch_norm_keys
    from fedprior.models import build_model
    from fedprior.task import Task

    _, flower_dir = runs(FEDBN, "flower-sim")
    server = load_checkpoint(flower_dir / "checkpoint.safetensors").server
    bn = batch_norm_keys(build_model("convnet-small", Task(num_classes=10, input_shape=(1, 8, 8), class_names=tuple("0123456789"), num_clients=4)))
    assert bn and any(k.startswith("model.") for k in server)
    assert not bn & set(server) and not any(k.startswith("eval.") for k in server)


def assert_same_server_state(a, b, exact=True):
    ours, theirs = (load_checkpoint(d / "checkpoint.safetensors").server for d in (a, b))
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert torch.equal(ours[k], theirs[k]) if exact else torch.allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-6), k


def faulty_mods(flags):
    """A Flower mod: client 2's ClientApp always raises; in round 1 every client's raises the first time it is asked."""

    def mod(message, context, call_next):
        if message.metadata.message_type == MessageType.TRAIN:
            round_, client = int(message.content["round"]["round"]), int(context.node_config["partition-id"])
            first_ask = flags / f"round-{round_}-client-{client}"
            if client == 2 or (round_ == 1 and not first_ask.exists()):
                first_ask.touch()
                raise RuntimeError("injected fault")
        return call_next(message, context)

    return [mod]


def test_failing_clients_are_logged_the_round_aggregates_the_others_and_a_round_nobody_answered_is_retried(tmp_path, shared_cache):
    """Round 1: every client fails, so the round is not counted and is retried (federation.wait_for_clients);
    the second time only client 2 fails. Whenever client 2 is sampled its failure is recorded and the others
    are aggregated."""
    from fedprior.flower.client_app import client_app

    (tmp_path / "flags").mkdir()
    preset, overrides = CNN
    summary = run(
        (preset, [*overrides, "federation.wait_for_clients=60"]),
        "flower-sim",
        tmp_path / "run",
        runtime_options={"client_app": client_app(mods=faulty_mods(tmp_path / "flags"))},
    )
    rounds = records(tmp_path / "run")
    assert summary["rounds"] == 3 and len(rounds) == 3
    first, second, third = rounds
    assert first["attempts"] == 2 and "aggregated" not in first  # nobody answered the first time; the retry trained
    assert first["failed_clients"] == ([2] if 2 in first["clients"] else [])
    assert 2 in second["clients"] and second["failed_clients"] == [2]
    assert "injected fault" in second["failures"]["2"] and "aggregated" not in second
    assert third["failed_clients"] == ([2] if 2 in third["clients"] else [])
    assert summary["failed_updates"] == sum(len(r["failed_clients"]) for r in rounds) >= 1
    assert load_checkpoint(tmp_path / "run" / "checkpoint.safetensors").progress.round == 3


def test_run_non_finite_drop_applies_on_flower_as_in_process(tmp_path, shared_cache):
    """run.non_finite = 'drop' reaches the Flower round loop: diverged updates are left out and counted, not a stop."""
    preset, overrides = CNN
    summary = run((preset, [*overrides, "federation.rounds=2", "algorithm.lr=1e30", "run.non_finite='drop'"]), "flower-sim", tmp_path / "run")
    assert summary["rounds"] == 2 and summary["failed_updates"] == summary["client_updates"] == 6  # 3 a round, all diverged
    assert summary["rounds_without_update"] == [1, 2]


class Crash(Exception):
    pass


def test_a_server_restarted_mid_run_resumes_from_its_checkpoint(tmp_path, shared_cache, runs):
    """FST-CBDG keeps soft pseudo-labels on its clients: they come back from the nodes' disks after the restart.

    The resumed run must end bit for bit where an uninterrupted Flower run ends (without the
    client states it would not: the pseudo-labels start again from the zero-shot ones).
    """
    reference, reference_dir = runs(FST, "flower-sim")

    def crash_after_round_two(record):
        if record.get("round") == 2:
            raise Crash()

    with pytest.raises(Crash):
        run(FST, "flower-sim", tmp_path / "run", on_round=crash_after_round_two)
    assert load_checkpoint(tmp_path / "run" / "checkpoint.safetensors").progress.round == 2
    assert any((tmp_path / "run" / "flower" / "data" / "state").rglob("*.safetensors"))  # client states on the nodes
    resumed = resume(tmp_path / "run", report_extras=False)
    assert resumed["history"] == reference["history"] and resumed["final_accuracy"] == reference["final_accuracy"]
    assert [r["clients"] for r in records(tmp_path / "run")] == [r["clients"] for r in records(reference_dir)]
    assert_same_server_state(tmp_path / "run", reference_dir)
    assert not (tmp_path / "run" / "flower").exists()  # finished: the exported data and client states are gone


def test_the_server_app_flwr_run_loads_runs_the_experiment_its_run_config_names(tmp_path, shared_cache, runs):
    """``flwr run . -c "preset=... overrides=..."``: the module-level ServerApp's entry point, on the simulation engine."""
    from flwr.app import Context, RecordDict
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from fedprior.experiments import flower_app
    from fedprior.flower.client_app import app as client_app
    from fedprior.flower.server_app import RUN_CONFIG_DEFAULTS
    from fedprior.flower.simulation import backend_config

    preset, overrides = CNN
    run_config = {**RUN_CONFIG_DEFAULTS, "preset": preset, "overrides": "; ".join(overrides), "run-dir": str(tmp_path / "run"), "min-nodes": 6}
    wrapper = ServerApp()

    @wrapper.main()
    def main(grid, context):
        flower_app.main(grid, Context(run_id=context.run_id, node_id=0, node_config={}, state=RecordDict(), run_config=run_config))

    run_simulation(server_app=wrapper, client_app=client_app, num_supernodes=6, backend_config=backend_config())
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    reference, reference_dir = runs(CNN, "local")
    assert result["runtime"] == "flower-sim" and result["history"] == reference["history"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == sorted(p.name for p in reference_dir.iterdir())
