"""The round-loop settings are built once from the config and reach every runtime whole (issue 15 item 6).

Each runtime used to re-list the settings by hand, and a forgotten one took its default
without a word (``run.non_finite`` on Flower, ``run.workers`` in the FST-CBDG report's
baselines). These tests set every field to a value that is not its default and catch the
:class:`RoundLoop` each runtime hands to the round loop.
"""

from __future__ import annotations

import dataclasses

import pytest

from fedprior.algorithms.base import RoundInfo
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import PowerOfChoice
from fedprior.runtime.system_model import SystemModel
from fedprior.runtime.threads import ThreadPolicy
from tests.support.cli import STANDIN

SMALL = ["data.dataset=digits", "federation.num_clients=6", "federation.local_epochs=1"]
NOT_DEFAULT = [
    "run.seed=7",
    "federation.rounds=3",
    "federation.fraction=0.5",
    "run.vectorize=false",
    "federation.evaluate_every=2",
    "run.test_metrics='selectable'",
    "run.non_finite='drop'",
    "federation.wait_for_clients=1.5",
    "run.threads=2",
    "run.device='cpu'",
    "run.start_method='spawn'",
    "run.checkpoint_every=2",
    "run.client_state_memory_mb=64",
    "federation.sampler='power-of-choice'",
    "federation.power_of_choice_candidates=4",
    "federation.local_epochs=2",
    "federation.batch_size=16",
]
SYSTEM = ["system.speed='constant'", "system.seconds_per_example=0.5"]
"""A system model (the local runtime's only: on Flower the clients' real time counts)."""
ATTACK = ["federation.attack='sign_flip'", "federation.malicious_fraction=0.34"]
"""The simulated attack's fields (not for fst-cbdg, whose clients an attack cannot act on)."""


class SixClientSizes:
    """Equal to the partition's sizes of six clients: six positive counts (the partition's own numbers, not restated here)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, tuple) and len(other) == 6 and all(isinstance(n, int) and n > 0 for n in other)


class TwoOfSixClients:
    """Equal to the run's malicious clients under malicious_fraction 0.34 of 6: round(2.04) = 2 distinct ids of the 6 (drawn from the seed)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, frozenset) and len(other) == 2 and other <= set(range(6))


class ConstantSpeeds:
    """Equal to the run's system model under SYSTEM: 0.5 s an example for every one of the six clients, the run's seed."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SystemModel) and other.seed == 7 and other.num_clients == 6 and other.seconds_per_example(5) == 0.5


def expected(workers: int, concurrent: int = 1, attack: bool = True, system: bool = True) -> dict:
    """What each field must be under NOT_DEFAULT (every field of RoundLoop must be listed: a new one fails here)."""
    return {
        "seed": 7,
        "rounds": 3,
        "fraction": 0.5,
        "vectorize": False,
        "evaluate_every": 2,
        "test_metrics": "selectable",
        "non_finite": "drop",
        "wait_for_clients": 1.5,
        "retry_every": RoundLoop.retry_every,  # no config field: the loop's own constant
        "threads": ThreadPolicy(2, 2, 2),
        "workers": workers,
        "concurrent_clients": concurrent,
        "device": "cpu",
        "start_method": "spawn",
        "checkpoint_every": 2,
        "client_state_memory": 64 * 2**20,
        "sampler": PowerOfChoice(4),
        "client_sizes": SixClientSizes(),
        "before_round": None,  # a privacy budget (privacy.max_epsilon) needs DP, which power-of-choice cannot run with: test_budget_builds_the_loops_check
        "malicious_clients": TwoOfSixClients() if attack else frozenset(),
        "system": ConstantSpeeds() if system else None,
        "local_epochs": 2,
        "batch_size": 16,
    }


def test_budget_builds_the_loops_check(shared_cache):
    tiny = ["data.dataset=digits", "federation.num_clients=20", "federation.rounds=3", "run.threads=1"]
    assert build_experiment(*load_config("dp-fedavg-cnn", tiny)).round_loop().before_round is None  # no budget, nothing asked
    experiment = build_experiment(*load_config("dp-fedavg-cnn", [*tiny, "privacy.max_epsilon=0.5"]))
    check = experiment.round_loop().before_round
    assert check is not None
    state = experiment.algorithm.init(RoundInfo(seed=0, stage="federated", round=0))
    said = check(state)  # one round at q = 0.1, z = 1 already spends more than 0.5
    assert said is not None and said["stopped_by"] == "privacy.max_epsilon" and said["dp_epsilon"] == 0.0 and said["dp_epsilon_next"] > 0.5


def assert_every_field(loop: RoundLoop, workers: int, concurrent: int = 1, attack: bool = True, system: bool = True) -> None:
    want = expected(workers, concurrent, attack, system)
    assert {f.name for f in dataclasses.fields(RoundLoop)} == set(want), "a RoundLoop field is missing from this test's expectations"
    for name, value in want.items():
        assert getattr(loop, name) == value, f"{name}: {getattr(loop, name)!r}, config says {value!r}"
    defaults = RoundLoop(seed=0, rounds=10, fraction=0.1)
    for name in want:  # the check above could not pass by defaults alone (device, retry_every and Flower's workers have no other value here)
        if (
            name not in ("device", "retry_every", "before_round")
            and not (name == "workers" and workers == 1)
            and not (name == "concurrent_clients" and concurrent == 1)
            and not (name == "malicious_clients" and not attack)
            and not (name == "system" and not system)
        ):
            assert getattr(defaults, name) != want[name], name


class Caught(Exception):
    """Raised by the patched round loop once it has the settings."""


@pytest.fixture
def caught(monkeypatch):
    """Every RoundLoop handed to ``run_rounds``, in-process or on Flower (the loop then stops)."""
    from fedprior.flower import server_app
    from fedprior.runtime import simulation

    seen: list[RoundLoop] = []

    def run_rounds(algorithm, pool, test_data, loop, **_):
        seen.append(loop)
        raise Caught

    monkeypatch.setattr(simulation, "run_rounds", run_rounds)
    monkeypatch.setattr(server_app, "run_rounds", run_rounds)
    return seen


def test_the_experiment_builds_every_field_from_the_config():
    name, config = load_config("fedavg-cnn", [*SMALL, *NOT_DEFAULT, *ATTACK, *SYSTEM, "run.workers=2", "run.concurrent_clients=2"])
    with pytest.warns(UserWarning, match="run.concurrent_clients = 2 on cpu"):
        assert_every_field(build_experiment(name, config).round_loop(), workers=2, concurrent=2)


def test_the_in_process_runner_passes_every_field(caught, tmp_path):
    from fedprior.experiments.runner import start

    name, config = load_config("fedavg-cnn", [*SMALL, *NOT_DEFAULT, *ATTACK, *SYSTEM, "run.workers=2", "run.concurrent_clients=2"])
    with pytest.raises(Caught), pytest.warns(UserWarning, match="run.concurrent_clients = 2 on cpu"):
        start(name, config, tmp_path / "run")
    assert len(caught) == 1
    assert_every_field(caught[0], workers=2, concurrent=2)


def test_the_flower_runtimes_pass_every_field(caught, tmp_path):
    """flower-sim and a flower-local ServerApp both go through ``federate_experiment`` (workers: the local runtime's only)."""
    pytest.importorskip("flwr")
    from fedprior.flower.server_app import Settings, federate_experiment
    from fedprior.results.run_dir import RunDir

    name, config = load_config("fedavg-cnn", [*SMALL, *NOT_DEFAULT, *ATTACK, "run.runtime='flower-sim'"])
    experiment = build_experiment(name, config)
    with pytest.raises(Caught):
        federate_experiment(None, experiment, RunDir(tmp_path / "run"), None, None, Settings(), None)
    assert_every_field(caught[0], workers=1, system=False)


def test_the_fst_cbdg_reports_baselines_run_with_the_runs_settings(caught, shared_cache):
    from fedprior.papers.fst_cbdg.report import baseline_curves

    name, config = load_config("fst-cbdg", [*STANDIN, "federation.num_clients=6", *NOT_DEFAULT, *SYSTEM, "run.workers=2"])
    experiment = build_experiment(name, config)
    with pytest.raises(Caught):
        baseline_curves(experiment)
    assert_every_field(caught[0], workers=2, attack=False)
    assert caught[0] == experiment.round_loop()
