"""Client samplers (federation.sampler): uniform as before, size-weighted, Power-of-Choice, a user's own; the in-process choice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.errors import ConfigError, FedpriorError, UserCodeError
from fedprior.experiments.config import load_config
from fedprior.privacy.config import accounting
from fedprior.runtime.checkpoint import load_checkpoint
from fedprior.runtime.clients import global_loss
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import (
    SAMPLERS,
    Draw,
    PowerOfChoice,
    SizeWeighted,
    Uniform,
    chosen_clients,
    register_sampler,
    sample_clients,
    sampler_for,
)
from fedprior.runtime.simulation import simulate
from fedprior.runtime.threads import ThreadPolicy
from fedprior.runtime.traffic import communication
from fedprior.seeding import numpy_rng
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=6)
DATA = [toy_images(8 + 4 * c, seed=c) for c in range(6)]
TEST = toy_images(30, seed=99)
SMALL = ["data.dataset=digits", "federation.num_clients=6", "federation.fraction=0.34"]  # m = 2


def draw(round_=1, count=2, sizes=(10, 10, 10, 10, 10, 10), losses=None, seed=7):
    return Draw(seed, "federated", round_, len(sizes), count, tuple(sizes), losses)


def test_uniform_draws_what_sampling_drew_before_samplers_existed():
    for round_ in range(1, 6):
        before = sorted(int(c) for c in numpy_rng(5, "sampling", "federated", round_).choice(100, size=10, replace=False))
        assert Uniform().select(Draw(5, "federated", round_, 100, 10)) == before == sample_clients(5, "federated", round_, 100, 0.1)
    assert Uniform().select(Draw(5, "federated", 1, 4, 4)) == [0, 1, 2, 3]


def test_size_weighted_follows_the_sizes_and_is_reproducible():
    sizes = (1, 3, 0, 6)  # p = 0.1, 0.3, 0, 0.6
    picks = [SizeWeighted().select(draw(r, count=1, sizes=sizes)) for r in range(1, 3001)]
    freq = np.bincount([p[0] for p in picks], minlength=4) / len(picks)
    assert np.abs(freq - np.array([0.1, 0.3, 0.0, 0.6])).max() < 0.03  # 3 sd of a 0.3 share over 3000 rounds: 0.025
    assert picks == [SizeWeighted().select(draw(r, count=1, sizes=sizes)) for r in range(1, 3001)]
    pairs = [SizeWeighted().select(draw(r, count=2, sizes=sizes)) for r in range(1, 200)]
    assert all(len(set(p)) == 2 and 2 not in p for p in pairs)  # without replacement; a client without data never drawn
    with pytest.raises(FedpriorError, match="only 3 of the 4 clients hold training examples"):
        SizeWeighted().select(draw(count=4, sizes=sizes))
    with pytest.raises(ConfigError, match="needs the clients' sizes"):
        SizeWeighted().select(Draw(7, "federated", 1, 4, 1))


def test_power_of_choice_takes_the_highest_losses_among_size_weighted_candidates():
    sizes = (5, 1, 8, 2, 9, 4, 6, 3)
    loss = {c: float((3 * c) % 8) for c in range(8)}  # 0, 3, 6, 1, 4, 7, 2, 5
    asked: list[list[int]] = []

    def losses(clients):
        asked.append(list(clients))
        return {c: loss[c] for c in clients}

    for r in range(1, 30):
        chosen = PowerOfChoice(5).select(draw(r, count=2, sizes=sizes, losses=losses))
        candidates = asked[-1]
        assert len(candidates) == 5 and candidates == sorted(set(candidates))
        assert candidates == SizeWeighted().select(draw(r, count=5, sizes=sizes))  # step 1: d clients drawn by size, without replacement
        assert chosen == sorted(sorted(candidates, key=lambda c: -loss[c])[:2])
    everyone = PowerOfChoice(8).select(draw(count=3, sizes=sizes, losses=losses))
    assert everyone == [2, 5, 7]  # d = N: the three highest losses of all (7, 6, 5)
    assert PowerOfChoice(2).select(draw(4, count=2, sizes=sizes, losses=losses)) == SizeWeighted().select(draw(4, count=2, sizes=sizes))


def test_power_of_choice_breaks_ties_at_random_reproducibly_and_ranks_a_silent_candidate_last():
    flat = [PowerOfChoice(6).select(draw(r, count=2, losses=lambda cs: dict.fromkeys(cs, 1.0))) for r in range(1, 40)]
    assert flat == [PowerOfChoice(6).select(draw(r, count=2, losses=lambda cs: dict.fromkeys(cs, 1.0))) for r in range(1, 40)]
    assert len({tuple(p) for p in flat}) > 5  # not always the lowest ids
    silent = PowerOfChoice(6).select(draw(count=5, losses=lambda cs: {c: 1.0 for c in cs if c != 0}))
    assert silent == [1, 2, 3, 4, 5]


def test_power_of_choice_candidates_are_checked_in_one_line():
    with pytest.raises(
        ConfigError, match=r"d = 1 must lie between the clients a round trains \(m = 2, federation.fraction x num_clients\) and all the clients \(N = 6\)"
    ):
        PowerOfChoice(1).select(draw(losses=lambda cs: {}))
    for overrides, message in [
        (["federation.sampler='power-of-choice'"], "federation.power_of_choice_candidates: set d"),
        (["federation.sampler='power-of-choice'", "federation.power_of_choice_candidates=7"], "d = 7 must lie between"),
        (["federation.power_of_choice_candidates=3"], "applies with federation.sampler = 'power-of-choice', not 'uniform'"),
        (["federation.sampler='roulette'"], "federation.sampler: unknown sampler 'roulette'; accepted: poisson, power-of-choice, size-weighted, uniform"),
    ]:
        with pytest.raises(ConfigError, match=message) as error:
            load_config("fedavg-cnn", [*SMALL, *overrides])
        assert "\n" not in str(error.value)
    _, config = load_config("fedavg-cnn", [*SMALL, "federation.sampler='power-of-choice'", "federation.power_of_choice_candidates=4"])
    assert config.federation.sampler == "power-of-choice" and config.federation.power_of_choice_candidates == 4


class Broken:
    def select(self, draw):
        return [1 // 0]


class FirstClients:
    def select(self, draw):
        return range(draw.count)


def test_a_registered_sampler_is_named_by_the_config_and_its_choice_checked():
    try:
        register_sampler("first-clients", FirstClients())
        _, config = load_config("fedavg-cnn", [*SMALL, "federation.sampler='first-clients'"])
        assert chosen_clients(sampler_for(config.federation.sampler), draw(count=2)) == [0, 1]
        with pytest.raises(ConfigError, match="already registered"):
            register_sampler("first-clients", FirstClients())
    finally:
        SAMPLERS.pop("first-clients", None)
    with pytest.raises(ConfigError, match="give a new name"):
        register_sampler("uniform", FirstClients())
    with pytest.raises(FedpriorError, match="sampler Twice: chose \\[1, 1\\] in federated round 1; it must choose 2 distinct client ids in 0..5"):
        chosen_clients(type("Twice", (), {"select": lambda self, d: [1, 1]})(), draw())
    with pytest.raises(
        UserCodeError, match="sampler Broken \\(module tests.runtime.test_sampling\\): its select raised ZeroDivisionError: integer division or modulo by zero"
    ):
        chosen_clients(Broken(), draw())


def test_a_sampler_choosing_non_integers_or_registered_as_a_class_is_one_line_naming_it():
    """Probe 5 #3 and #12: ids 0.9, 1.9 were truncated to 0, 1; a class registered in place of an instance failed in round 1."""
    import numpy as np

    floats = type("Floats", (), {"select": lambda self, d: [0.9, 1.9]})()
    with pytest.raises(FedpriorError, match="^sampler Floats: chose \\[0.9, 1.9\\] in federated round 1; client ids are integers, not float$"):
        chosen_clients(floats, draw())
    with pytest.raises(FedpriorError, match="sampler Nothing: chose None in federated round 1; client ids are integers, not NoneType"):
        chosen_clients(type("Nothing", (), {"select": lambda self, d: None})(), draw())
    assert chosen_clients(type("NumPy", (), {"select": lambda self, d: np.array([4, 2])})(), draw()) == [2, 4]
    with pytest.raises(
        ConfigError, match="^sampler 'x2': FirstClients is a class; register an instance of it: register_sampler\\('x2', FirstClients\\(\\)\\)$"
    ):
        register_sampler("x2", FirstClients)
    assert "x2" not in SAMPLERS


def run(sampler, rounds=2, algorithm=None, **kw):
    algorithm = algorithm or fedavg(TASK, Runtime(1, 8), model="cnn", lr=0.1)
    sizes = tuple(d["y"].shape[0] for d in DATA)
    loop = RoundLoop(seed=3, rounds=rounds, fraction=0.34, threads=ThreadPolicy(1, 1, 1), sampler=sampler, client_sizes=sizes)
    return algorithm, simulate(algorithm, DATA.__getitem__, 6, TEST, loop, **kw)


class Stop(Exception):
    pass


def stop_after_round_one(record):
    if record.get("round") == 1:
        raise Stop


def test_in_process_power_of_choice_trains_the_candidates_with_the_highest_loss_of_the_global_model(tmp_path):
    algorithm, result = run(PowerOfChoice(4))
    first = result.progress.history[0]
    state = algorithm.init(RoundInfo(seed=3, stage="federated", round=0))
    losses = {c: global_loss(algorithm, state, DATA[c]) for c in first["candidates"]}
    assert len(first["candidates"]) == 4 and first["candidate_losses"] == [losses[c] for c in first["candidates"]]
    assert first["clients"] == sorted(sorted(losses, key=losses.get, reverse=True)[:2])
    assert first["selection_download_bytes"] == 4 * sum(t.numel() * t.element_size() for t in state.values())
    second = result.progress.history[1]
    assert len(second["candidates"]) == 4 and second["clients"] != first["clients"]
    path = tmp_path / "checkpoint.safetensors"
    with pytest.raises(Stop):  # stopped after round 1, resumed: round 2 asks the same candidates and trains the same clients
        run(PowerOfChoice(4), checkpoint_path=path, on_round=stop_after_round_one)
    again = run(PowerOfChoice(4), checkpoint_path=path, start=load_checkpoint(path))[1].progress.history
    assert [r["clients"] for r in again] == [r["clients"] for r in result.progress.history]
    assert again[1]["candidate_losses"] == second["candidate_losses"]
    assert communication(result.progress.history)["selection_download_bytes"] == 2 * first["selection_download_bytes"]
    uniform = run(Uniform(), rounds=1)[1].progress.history
    assert "candidates" not in uniform[0] and "selection_download_bytes" not in {**uniform[0], **communication(uniform)}


def test_power_of_choice_is_refused_for_an_algorithm_whose_clients_hold_no_labels():
    algorithm = fedavg(TASK, Runtime(1, 8), model="cnn", lr=0.1)
    unlabeled = algorithm.with_(name="no-labels", inputs=("x",))
    with pytest.raises(FedpriorError, match="algorithm 'no-labels' gives its clients no labels \\(inputs: x\\)") as error:
        run(PowerOfChoice(4), algorithm=unlabeled)
    assert "\n" not in str(error.value)


def test_poisson_sampling_takes_each_client_with_probability_q_a_variable_number_zero_included():
    from fedprior.runtime.sampling import Poisson, variable_count

    poisson = sampler_for("poisson")
    assert isinstance(poisson, Poisson) and variable_count(poisson) and not variable_count(Uniform())

    def pick(round_: int, n: int = 10, q: float = 0.2) -> list[int]:
        return chosen_clients(poisson, Draw(7, "federated", round_, n, max(1, round(q * n)), fraction=q), "poisson")

    picks = [pick(r) for r in range(1, 3001)]
    counts = np.array([len(p) for p in picks])
    share = np.bincount([c for p in picks for c in p], minlength=10) / len(picks)
    assert np.abs(share - 0.2).max() < 0.025  # each client joins 20% of the rounds (3 sd over 3000 rounds: 0.022)
    assert counts.mean() == pytest.approx(2.0, abs=0.1) and len(set(counts.tolist())) > 4  # qN on average, varying
    assert (counts == 0).mean() == pytest.approx(0.8**10, abs=0.03)  # rounds that sample nobody: (1 - q)^N = 0.107
    assert picks[:50] == [pick(r) for r in range(1, 51)]  # the round's own stream: the same clients again (resume, other runtimes)
    assert all(p == sorted(set(p)) for p in picks)
    # a fixed-size sampler's count is still checked
    with pytest.raises(FedpriorError, match=r"it must choose 2 distinct client ids in 0\.\.9"):
        chosen_clients(poisson.__class__.__new__(type("Fixed", (), {"select": lambda self, draw: [1]})), Draw(7, "federated", 1, 10, 2))


TINY_DP = ["data.dataset=digits", "federation.num_clients=6", "federation.fraction=0.2", "federation.rounds=4", "run.threads=1", "run.workers=1"]
"""6 clients, each joining with probability 0.2: (0.8)^6 = 26% of the rounds sample nobody."""


def empty_rounds(seed: int, rounds: int, q: float = 0.2) -> list[int]:
    """The rounds of ``seed`` in which Poisson sampling of 6 clients at rate ``q`` takes nobody."""
    from fedprior.runtime.sampling import Poisson

    return [r for r in range(1, rounds + 1) if not Poisson().select(Draw(seed, "federated", r, 6, 1, fraction=q))]


@pytest.mark.slow
def test_rounds_without_clients_release_under_dp_and_keep_the_state_without(tmp_path, shared_cache):
    from fedprior.experiments.runner import resume, start

    seed = next(s for s in range(50) if empty_rounds(s, 4) and len(empty_rounds(s, 4)) < 4)
    empty = empty_rounds(seed, 4)
    name, config = load_config("fedavg-cnn", [*TINY_DP, f"run.seed={seed}", "privacy.dp=server", "privacy.noise_multiplier=0.3"])
    assert config.federation.sampler == "poisson"
    run = start(name, config, tmp_path / "dp", report_extras=False)
    records = [json.loads(line) for line in (tmp_path / "dp" / "metrics.jsonl").read_text().splitlines() if '"step"' in line]
    assert len(run["dp_epsilon_per_round"]) == 4 and run["dp_epsilon_per_round"] == sorted(set(run["dp_epsilon_per_round"]))  # 4 releases
    for r in records:
        assert (r["clients"] == []) == (r["round"] in empty)
        assert r["dp_noise_std"] == pytest.approx(0.3 * 1.0 / 1.2) and r["dp_bound"] == "pld, add-or-remove, poisson q = 0.2"
    assert all("noised mean of no updates was released" in r["note"] for r in records if r["round"] in empty)
    acc = accounting(config.privacy, "poisson", 6, 0.2)
    assert run["dp_epsilon"] == acc.epsilon(4) and run["dp_accounting"]["relation"] == "add-or-remove"
    assert "PLD accountant, add-or-remove neighbours, poisson sampling q = 0.2" in (tmp_path / "dp" / "report.md").read_text()
    # resumed after round 1: the same numbers
    name, first = load_config("fedavg-cnn", [*TINY_DP, f"run.seed={seed}", "privacy.dp=server", "privacy.noise_multiplier=0.3", "federation.rounds=1"])
    start(name, first, tmp_path / "again", report_extras=False)
    resumed = resume(tmp_path / "again", config=config, report_extras=False)
    assert resumed["history"] == run["history"] and resumed["dp_epsilon_per_round"] == run["dp_epsilon_per_round"]
    # two worker processes (q = 0.34: m = 2, so two workers start): the numbers of one process; a round without clients asks no worker
    wide = next(s for s in range(50) if empty_rounds(s, 4, 0.34))
    both = [*TINY_DP, f"run.seed={wide}", "federation.fraction=0.34", "privacy.dp=server", "privacy.noise_multiplier=0.3"]
    one = start(*load_config("fedavg-cnn", both), tmp_path / "one", report_extras=False)
    two = start(*load_config("fedavg-cnn", [*both, "run.workers=2"]), tmp_path / "two", report_extras=False)
    assert two["history"] == one["history"] and two["dp_epsilon_per_round"] == one["dp_epsilon_per_round"]
    assert [] in [json.loads(line).get("clients") for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    # without DP the same sampler keeps the state in a round that sampled nobody
    name, plain = load_config("fedavg-cnn", [*TINY_DP, f"run.seed={seed}", "federation.sampler=poisson"])
    start(name, plain, tmp_path / "plain", report_extras=False)
    records = [json.loads(line) for line in (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines() if '"step"' in line]
    assert [r["round"] for r in records if r.get("aggregated") is False] == empty
    assert all(r["note"] == "no client was sampled; the previous state is kept" for r in records if r["round"] in empty)
