"""The system model: each client's duration from its speed and bandwidth, availability, determinism, nothing held per client."""

import math

import numpy as np
import pytest

from fedprior.runtime.system_config import FEDSCALE_SECONDS_PER_EXAMPLE, SystemConfig
from fedprior.runtime.system_model import SystemModel, local_work, update_durations
from fedprior.seeding import numpy_rng


def test_the_model_is_off_by_default():
    assert SystemModel.of_config(SystemConfig(), 0, 10) is None
    assert SystemModel.of_config(None, 0, 10) is None
    assert SystemModel.of_config(SystemConfig(speed="constant"), 0, 10) is not None


def test_a_duration_is_download_plus_work_over_speed_plus_upload():
    model = SystemModel(SystemConfig(speed="constant", seconds_per_example=0.01, bandwidth=1000.0), 0, 4)
    # 2000 bytes down at 1000 B/s, 50 examples x 3 epochs at 0.01 s each, 500 bytes up
    assert model.client_duration(2, 1, local_work(50, 3), 2000, 500) == pytest.approx(2.0 + 1.5 + 0.5, abs=1e-12)
    hand = SystemModel(SystemConfig(speed="constant"), 0, 4, seconds_per_example={1: 0.5}, bandwidths={1: 10.0})
    assert hand.client_duration(1, 7, 4.0, 30, 20) == 3.0 + 2.0 + 2.0


def test_lognormal_speeds_are_fedscales_model_drawn_once_per_client_from_the_seed():
    config = SystemConfig(speed="lognormal", bandwidth_sigma=0.5)
    a, b, other = SystemModel(config, 5, 10**6), SystemModel(config, 5, 10**6), SystemModel(config, 6, 10**6)
    clients = [0, 17, 999_999]
    assert [a.seconds_per_example(c) for c in clients] == [b.seconds_per_example(c) for c in clients]
    assert [a.seconds_per_example(c) for c in clients] != [other.seconds_per_example(c) for c in clients]
    # s_k = 0.005 e exp(0.6 z_k), z_k the first normal of the client's own stream: FedScale's 0.005 x lognormal(1, 0.6)
    z = numpy_rng(5, "system", "speed", 17).standard_normal()
    assert a.seconds_per_example(17) == pytest.approx(0.005 * math.exp(1 + 0.6 * z), rel=1e-12)
    assert a.seconds_per_example(17) == a.seconds_per_example(17)  # a device keeps its speed
    assert a.bandwidth(3) != a.bandwidth(4)
    speeds = np.array([a.seconds_per_example(c) for c in range(4000)])
    assert abs(np.log(speeds).std() - 0.6) < 0.03 and abs(np.median(speeds) / FEDSCALE_SECONDS_PER_EXAMPLE - 1) < 0.05
    assert not vars(a)["_speeds"]  # nothing per client is held


def test_bernoulli_availability_is_seeded_per_client_and_round():
    model = SystemModel(SystemConfig(speed="constant", availability="bernoulli", availability_p=0.3), 1, 1000)
    seen = np.array([[model.available(c, r) for c in range(1000)] for r in (1, 2)])
    assert abs(seen.mean() - 0.3) < 0.04
    assert (seen[0] != seen[1]).any()
    assert [model.available(c, 1) for c in range(50)] == list(seen[0, :50])
    assert model.available(7, 1) == (numpy_rng(1, "system", "availability", 1, 7).random() < 0.3)


def test_diurnal_availability_is_on_for_its_share_of_every_period():
    model = SystemModel(SystemConfig(speed="constant", availability="diurnal", availability_p=0.25, diurnal_period=8), 2, 50)
    for client in range(50):
        on = [model.available(client, r) for r in range(1, 17)]
        assert sum(on[:8]) == 2 and on[:8] == on[8:]  # 2 rounds of 8, the same ones each period
    phases = {tuple(model.available(c, r) for r in range(1, 9)) for c in range(50)}
    assert len(phases) > 1  # the clients' phases differ


def test_an_unknown_client_is_refused():
    model = SystemModel(SystemConfig(speed="constant"), 0, 3)
    with pytest.raises(ValueError, match="client 3 is not one of the 3 clients"):
        model.seconds_per_example(3)


def test_an_asynchronous_server_gets_each_clients_full_update_duration():
    model = SystemModel(SystemConfig(speed="constant"), 0, 3, seconds_per_example={0: 0.1, 1: 0.2, 2: 0.3}, bandwidths={0: 50.0, 1: 50.0, 2: 100.0})
    duration = update_durations(model, (10, 20, 30), 2)
    assert [duration(c, 7, 100) for c in range(3)] == [4.0 + 2.0, 4.0 + 8.0, 2.0 + 18.0]  # (100 + 100) bytes over b_k, then 2 epochs of n_k s_k
