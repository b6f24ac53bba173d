"""Rounds under the system model, on hand-made speeds: the exact clients dropped, shortened or cut, and the exact simulated time."""

import math

import pytest
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, Reply
from fedprior.errors import ConfigError
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from fedprior.runtime.system_config import SystemConfig
from fedprior.runtime.system_model import SystemModel
from fedprior.runtime.system_round import examples_of_steps, steps_that_fit
from fedprior.seeding import numpy_rng

SIZES = (10, 10, 10, 10)
SPEEDS = {0: 0.1, 1: 0.2, 2: 0.5, 3: 1.0}  # seconds per example: 1, 2, 5 and 10 s of compute for 10 examples, one epoch
LINK = {c: 100.0 for c in range(4)}  # bytes a second: 100 bytes down and 100 up take 2 s
DATA = [{"x": torch.zeros(n, 1)} for n in SIZES]


def toy(budget: bool = True) -> Algorithm:
    """Broadcasts and replies 25 float32 numbers (100 bytes); each reply says the step budget its client was given (-1: none)."""

    def client_update(message, state, data, info):
        steps = -1.0 if info.local_steps is None else float(info.local_steps)
        return Reply({"v": message.arrays["v"] + 1}, num_examples=int(data["x"].shape[0]), metrics={"budget": steps}), state

    return Algorithm(
        name="toy",
        inputs=("x",),
        init=lambda info: {"v": torch.zeros(25)},
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=client_update,
        aggregate=lambda state, replies, info: {"v": torch.stack([r.arrays["v"] for r in replies]).mean(0)},
        evaluate=lambda state, data: {"accuracy": float(state["v"][0])},
        local_step_budget=budget,
    )


def run(rounds=1, fraction=1.0, epochs=1, batch=5, algorithm=None, **system):
    config = SystemConfig(speed="constant", **system)
    model = SystemModel(config, 0, 4, seconds_per_example=SPEEDS, bandwidths=LINK)
    loop = RoundLoop(seed=0, rounds=rounds, fraction=fraction, client_sizes=SIZES, system=model, local_epochs=epochs, batch_size=batch)
    return simulate(algorithm or toy(), lambda c: DATA[c], 4, DATA[0], loop).progress.history


def test_without_a_deadline_every_client_counts_and_the_round_lasts_as_long_as_the_slowest():
    (record,) = run()
    assert record["client_simulated_seconds"] == {"0": 3.0, "1": 4.0, "2": 7.0, "3": 12.0}
    assert record["round_simulated_seconds"] == 12.0 and record["simulated_time"] == 12.0
    assert record["failed_clients"] == [] and "deadline_dropped" not in record


def test_a_deadline_drops_the_clients_past_it_and_the_round_lasts_until_it():
    (record,) = run(deadline=6.0)
    assert record["deadline_dropped"] == [2, 3] and record["failed_clients"] == [2, 3]
    assert record["failures"]["2"] == "deadline: took 7 s, past system.deadline = 6 s"
    assert record["round_simulated_seconds"] == 6.0
    assert record["accuracy"] == 1.0 and record["upload_bytes"] == 400  # the late replies were sent all the same


def test_partial_work_fedprox_runs_the_steps_that_fit_and_drops_a_client_none_fit():
    # client 2: 6 - 2 s of link = 4 s = 8 examples: one step of 5; client 3: 4 examples, not one step of 5
    (record,) = run(deadline=6.0, partial_work=True)
    assert record["partial_work_steps"] == {"2": 1} and record["deadline_dropped"] == [3]
    assert record["client_budget"] == pytest.approx((-1 - 1 + 1) / 3)  # clients 0 and 1 unbounded, client 2 one step
    assert record["client_simulated_seconds"] == {"0": 3.0, "1": 4.0, "2": 2.0 + 5 * 0.5}
    assert record["clients"] == [0, 1, 2, 3] and record["failed_clients"] == [3]
    assert record["download_bytes"] == 300  # client 3 received nothing: it was dropped before training
    assert record["round_simulated_seconds"] == 6.0


def test_partial_work_fl_bench_runs_a_random_number_of_epochs_drawn_once_per_client():
    history = run(rounds=2, epochs=3, deadline=8.0, partial_work=True, straggler_rule="fl-bench", straggler_min_epochs=1)
    # full work: 30 examples: 2 s of link + 3, 6, 15, 30 s; clients 2 and 3 are past 8 s (client 1 takes 8 s exactly) and run
    # E_k in {1, 2} epochs of 2 steps
    expected = {c: int(numpy_rng(0, "system", "straggler-epochs", c).integers(1, 3)) for c in (2, 3)}
    for record in history:
        assert record["partial_work_steps"] == {str(c): 2 * e for c, e in expected.items()}
        assert record["client_simulated_seconds"] == {"0": 5.0, "1": 8.0, **{str(c): 2.0 + 10 * e * SPEEDS[c] for c, e in expected.items()}}
        assert record["failed_clients"] == []  # waited for, late or not
        assert record["round_simulated_seconds"] == max([8.0, *record["client_simulated_seconds"].values()])
    assert history[1]["simulated_time"] == 2 * history[0]["round_simulated_seconds"]


def test_over_selection_keeps_the_first_m_to_finish():
    # m = 2 of 4; x = 0.5 samples ceil(3) clients; the two fastest of them are kept, the round ends when the second arrives
    (record,) = run(fraction=0.5, over_selection=0.5)
    sampled = record["clients"]
    assert len(sampled) == 3
    kept = sorted(sampled, key=lambda c: SPEEDS[c])[:2]
    assert record["over_selected_dropped"] == sorted(set(sampled) - set(kept))
    assert record["round_simulated_seconds"] == 2.0 + 10 * SPEEDS[kept[1]]
    assert record["failed_clients"] == []  # cut, not failed: the round had its m replies
    assert sorted(record["client_simulated_seconds"]) == [str(c) for c in sampled]


def test_unavailable_clients_fail_the_round_without_training():
    history = run(rounds=4, availability="bernoulli", availability_p=0.5)
    model = SystemModel(SystemConfig(speed="constant", availability="bernoulli", availability_p=0.5), 0, 4)
    for step, record in enumerate(history, start=1):
        off = [c for c in range(4) if not model.available(c, step)]
        assert record.get("unavailable_clients", []) == off and record["failed_clients"] == off
        assert sorted(record["client_simulated_seconds"]) == [str(c) for c in range(4) if c not in off]
    assert any(r.get("unavailable_clients") for r in history)
    assert history[-1]["simulated_time"] == pytest.approx(sum(r["round_simulated_seconds"] for r in history))


def test_the_same_seed_gives_the_same_rounds():
    a = run(rounds=3, fraction=0.5, over_selection=0.5, deadline=6.0)
    b = run(rounds=3, fraction=0.5, over_selection=0.5, deadline=6.0)
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in a] == [{k: v for k, v in r.items() if k != "seconds"} for r in b]


def test_partial_work_is_refused_for_an_algorithm_without_a_step_budget():
    with pytest.raises(ConfigError, match=r"^system.partial_work: algorithm 'toy' cannot stop its local work early"):
        run(deadline=6.0, partial_work=True, algorithm=toy(budget=False))


def test_steps_that_fit_count_epochs_then_full_batches():
    assert steps_that_fit(4.0, 0.5, 10, 1, 5) == 1
    assert steps_that_fit(100.0, 0.5, 10, 3, 5) == 6  # the full update
    assert steps_that_fit(12.0, 0.5, 10, 3, 4) == 2 * 3 + 1  # 24 examples: two epochs of 3 steps (4, 4, 2), then one full batch
    assert steps_that_fit(11.5, 0.5, 10, 3, 4) == 2 * 3  # 23 examples: the fourth of the third epoch does not fit
    assert examples_of_steps(5, 10, 4) == 18 and steps_that_fit(0.0, 0.5, 10, 3, 4) == 0
    assert all(examples_of_steps(steps_that_fit(t, 0.3, 10, 3, 4), 10, 4) * 0.3 <= t + 1e-12 for t in [x / 7 for x in range(80)])
    assert math.isclose(examples_of_steps(9, 10, 4), 30)


def test_a_resumed_run_continues_the_simulated_clock(tmp_path):
    from fedprior.runtime.checkpoint import load_checkpoint

    config = SystemConfig(speed="constant", deadline=6.0, partial_work=True, availability="bernoulli", availability_p=0.7)
    model = SystemModel(config, 0, 4, seconds_per_example=SPEEDS, bandwidths=LINK)

    def loop(rounds):
        return RoundLoop(seed=0, rounds=rounds, fraction=1.0, client_sizes=SIZES, system=model, local_epochs=1, batch_size=5)

    whole = simulate(toy(), lambda c: DATA[c], 4, DATA[0], loop(4)).progress.history
    simulate(toy(), lambda c: DATA[c], 4, DATA[0], loop(2), checkpoint_path=tmp_path / "c.safetensors")
    start = load_checkpoint(tmp_path / "c.safetensors")
    resumed = simulate(toy(), lambda c: DATA[c], 4, DATA[0], loop(4), checkpoint_path=tmp_path / "c.safetensors", start=start).progress.history
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in resumed] == [{k: v for k, v in r.items() if k not in drop} for r in whole]
    assert resumed[-1]["simulated_time"] == pytest.approx(sum(r["round_simulated_seconds"] for r in whole))
