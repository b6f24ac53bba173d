"""The simulated clock of asynchronous aggregation: hand-made event sequences, the invariants the runtime relies on, seeds."""

from __future__ import annotations

import random

import pytest

from fedprior.algorithms.pieces.async_schedule import Schedule, check_federation, staleness_weight
from fedprior.errors import ConfigError


def by_client(table: dict[int, float]):
    return lambda client, version: table[client]


def steps(schedule: Schedule, count: int, seed: int = 0):
    clock, out = schedule.start(seed), []
    for _ in range(count):
        step = schedule.advance(clock, seed)
        out.append(step)
        clock = step.after
    return out


def test_a_hand_made_sequence_with_one_update_a_step():
    """N = C = 2, K = 1, client 0 takes 1 s and client 1 takes 3 s: every replacement is forced (one idle client).

    t=0: 0 and 1 download v0. t=1: 0 arrives (staleness 0), v1, 0 downloads v1. t=2: 0 arrives (0), v2, 0 downloads v2.
    t=3: 1 (dispatched first) and 0 arrive together: 1 first (staleness 2 - 0 = 2), v3, 1 downloads v3; then 0 (3 - 2 = 1), v4.
    """
    out = steps(Schedule(1, 2, 2, by_client({0: 1.0, 1: 3.0})), 4)
    assert [[(e.client, s.version - e.version, e.finish) for e in s.arrivals] for s in out] == [[(0, 0, 1.0)], [(0, 0, 2.0)], [(1, 2, 3.0)], [(0, 1, 3.0)]]
    assert [[e.client for e in s.trained] for s in out] == [[0, 1], [0], [0], [1]]
    assert [s.after.time for s in out] == [1.0, 2.0, 3.0, 3.0]


def test_replacements_owed_at_an_instant_wait_for_its_last_arrival_and_download_the_new_model():
    """N = C = 3, K = 2, durations 1, 5, 2 s. At t=5 client 1 (v0) and client 0 (v2) arrive together: the step they fill is
    taken before any replacement, so client 1 downloads v3, not v2 (which it could, idle and not yet on v2, were it
    replaced at once)."""
    out = steps(Schedule(2, 3, 3, by_client({0: 1.0, 1: 5.0, 2: 2.0})), 3)
    assert [[(e.client, s.version - e.version) for e in s.arrivals] for s in out] == [[(0, 0), (2, 0)], [(0, 0), (2, 0)], [(1, 2), (0, 0)]]
    assert [[e.client for e in s.trained] for s in out] == [[0, 1, 2], [0, 2], [0, 2]]
    assert sorted((e.client, e.version, e.finish) for e in out[-1].after.flight) == [(0, 3, 6.0), (1, 3, 10.0), (2, 2, 6.0)]


@pytest.mark.parametrize(("k", "c", "n"), [(1, 3, 7), (2, 4, 6), (3, 3, 3), (2, 5, 40)])
def test_every_update_is_trained_before_it_is_applied_and_the_flight_stays_full(k, c, n):
    """What the runtime relies on (engines/asynchronous.py): each step applies K arrivals, each trained on its version in
    the round of that version or before; a client trains at most once on a version; C stay in flight; time never goes back."""
    speed = {client: random.Random(client).uniform(0.2, 3.0) for client in range(n)}
    out = steps(Schedule(k, c, n, lambda client, version: speed[client] * (1 + (version % 3) / 7)), 40, seed=5)
    trained = set()
    time = 0.0
    for step in out:
        assert len({e.client for e in step.trained}) == len(step.trained) and all(e.version == step.version for e in step.trained)
        trained |= {e.order for e in step.trained}
        assert len(step.arrivals) == k and all(e.order in trained for e in step.arrivals)
        assert all(e.version <= step.version for e in step.arrivals)
        assert [e.finish for e in step.arrivals] == sorted(e.finish for e in step.arrivals) and step.arrivals[0].finish >= time
        time = step.after.time
        assert len(step.after.flight) == c and len({e.client for e in step.after.flight}) == c


def test_the_draws_follow_the_seed_only():
    schedule = Schedule(2, 4, 30, lambda client, version: 1.0 + client / 10)
    a, b, other = steps(schedule, 10, seed=1), steps(schedule, 10, seed=1), steps(schedule, 10, seed=2)
    assert a == b
    assert [s.trained for s in a] != [s.trained for s in other]


def test_equal_durations_with_k_equal_c_are_synchronous_rounds():
    out = steps(Schedule(3, 3, 9), 5, seed=4)
    assert all(s.after.time == s.version + 1 for s in out)
    assert all(len(s.trained) == 3 and [e.order for e in s.arrivals] == [e.order for e in s.trained] for s in out)  # every update fresh


def test_staleness_weights_by_hand():
    assert staleness_weight([0, 3, 8], "polynomial", 0.5, 0.0) == [1.0, 0.5, 1 / 3]  # FedBuff's 1 / sqrt(1 + tau)
    assert staleness_weight([0, 4, 6], "hinge", 10.0, 4.0) == [1.0, 1.0, 1 / 21]  # 1 / (a (tau - b) + 1)
    assert staleness_weight([0, 9], "constant", 0.5, 4.0) == [1.0, 1.0]


def test_sizes_and_sampler_are_checked_in_one_line():
    with pytest.raises(ConfigError, match=r"^algorithm.buffer_size: 5 updates .*accepted: 1 to algorithm.concurrency \(4\)$"):
        Schedule(5, 4, 10)
    with pytest.raises(ConfigError, match=r"^algorithm.concurrency: 12 clients in flight of 10; accepted: 1 to federation.num_clients \(10\)$"):
        check_federation("fedbuff", {"buffer_size": 2, "concurrency": 12}, 10, "uniform")
    with pytest.raises(ConfigError, match=r"^federation.sampler: algorithm 'fedasync' samples its own clients.*accepted: uniform$"):
        check_federation("fedasync", {"concurrency": 2}, 10, "poisson")
    check_federation("fedavg", {}, 10, "poisson")  # not asynchronous: nothing asked
