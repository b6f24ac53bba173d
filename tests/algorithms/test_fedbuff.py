"""FedBuff on the runtime's round loop: FedAvg in its synchronous limit, a hand-made clock, seeds, resume mid-buffer, errors."""

from __future__ import annotations

import pytest
import torch

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.fedbuff import fedbuff
from fedprior.errors import ConfigError
from fedprior.runtime.checkpoint import load_checkpoint
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import Poisson
from fedprior.runtime.simulation import simulate
from tests.runtime.test_simulation import Interrupt, strip
from tests.support.cli import error_line, invoke
from tests.support.toy_data import toy_images

TASKS = {n: Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=n) for n in (2, 4, 6)}
DATA = [toy_images(8 + 4 * c, seed=c) for c in range(6)]  # unequal sizes: the mean's weights matter
TEST = toy_images(60, seed=99)
CLOCK = ("simulated_time", "clients_in_flight", "buffer_staleness_mean", "buffer_staleness_max", "buffer_without_update")


def run(algorithm, clients: int, rounds: int = 3, seed: int = 3, **hooks):
    loop = RoundLoop(seed=seed, rounds=rounds, fraction=1.0, checkpoint_every=1)
    return simulate(algorithm, lambda c: DATA[c], clients, TEST, loop, **hooks)


def test_with_k_equal_c_equal_m_and_equal_durations_it_is_fedavg():
    """The issue's done-when: K = C = m clients (all N, so both sample the same), equal durations, eta_g = 1, every update fresh
    (staleness 0: s = 1 whatever the function), FedAvg's example weights: each step is FedAvg's round, to float tolerance."""
    task = TASKS[4]
    sync = run(fedavg(task, Runtime(1, 8), model="cnn", lr=0.1), 4)
    buff = run(fedbuff(task, Runtime(1, 8), model="cnn", lr=0.1, buffer_size=4, concurrency=4, weighting="examples"), 4)
    assert sync.state.keys() <= buff.state.keys()
    for name in sync.state:
        torch.testing.assert_close(buff.state[name], sync.state[name], rtol=0, atol=1e-6)
    for a, b in zip(sync.progress.history, buff.progress.history, strict=True):
        assert a["clients"] == b["clients"] == [0, 1, 2, 3]
        assert b["buffer_staleness_max"] == 0 and b["simulated_time"] == b["round"]
        assert a["accuracy"] == pytest.approx(b["accuracy"]) and a["loss"] == pytest.approx(b["loss"], abs=1e-5)
    uniform = run(fedbuff(task, Runtime(1, 8), model="cnn", lr=0.1, buffer_size=4, concurrency=4), 4)  # the paper's 1/K: not FedAvg here
    assert not torch.allclose(uniform.state["model.classifier.3.bias"], sync.state["model.classifier.3.bias"], atol=1e-6)


def test_a_hand_made_clock_gives_the_steps_staleness_and_weights_it_predicts():
    """N = C = 2, K = 1, client 0 takes 1 s, client 1 3 s (tests/algorithms/pieces/test_async_schedule.py works the events
    out): the steps apply client 0 (staleness 0), 0 (0), 1 (2), 0 (1). Step 3 is checked by hand: x_3 = x_2 + eta_g s(2) Delta,
    Delta client 1's change of x_0, trained in round 1 and held in the state for two steps."""
    task = TASKS[2]
    runtime = Runtime(1, 8, client_duration=lambda client, version, model_bytes: (1.0, 3.0)[client])
    algorithm = fedbuff(task, runtime, model="cnn", lr=0.1, buffer_size=1, concurrency=2, server_lr=0.5)
    result = run(algorithm, 2, rounds=4)
    history = result.progress.history
    assert [r["clients"] for r in history] == [[0, 1], [0], [0], [1]]
    assert [r["buffer_staleness_max"] for r in history] == [0, 0, 2, 1]
    assert [r["simulated_time"] for r in history] == [1.0, 2.0, 3.0, 3.0]
    two = run(algorithm, 2, rounds=2).state
    one = run(algorithm, 2, rounds=1)
    assert "async.update.1.model.classifier.3.bias" in one.state  # client 1's update, held since round 1
    three = run(algorithm, 2, rounds=3).state
    x0 = algorithm.init(replace_round(0))
    reply, _ = algorithm.client_update(algorithm.broadcast(x0, replace_round(1)), {}, DATA[1], replace_round(1).for_client(1))
    for name in ("model.classifier.3.bias", "model.features.0.weight"):
        delta = reply.arrays[name] - x0[name]
        torch.testing.assert_close(three[name], two[name] + 0.5 * (2 + 1) ** -0.5 * delta, rtol=0, atol=1e-6)


def replace_round(round_: int):
    from fedprior.algorithms.base import RoundInfo

    return RoundInfo(seed=3, stage="federated", round=round_)


def test_the_same_seed_gives_the_same_run_and_another_seed_another_schedule():
    task = TASKS[6]
    runtime = Runtime(1, 8, client_duration=lambda client, version, model_bytes: 1.0 + 0.7 * client + 0.1 * (version % 2))
    algorithm = fedbuff(task, runtime, model="cnn", lr=0.1, buffer_size=2, concurrency=3)
    a, b, c = run(algorithm, 6, rounds=4), run(algorithm, 6, rounds=4), run(algorithm, 6, rounds=4, seed=4)
    assert strip(a.progress.history) == strip(b.progress.history)
    assert a.state.keys() == b.state.keys() and all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert [r["clients"] for r in a.progress.history] != [r["clients"] for r in c.progress.history]


def test_a_run_killed_mid_buffer_resumes_to_the_uninterrupted_numbers(tmp_path):
    """Killed after step 2 of 5 with updates computed but not yet arrived (C = 3 > K = 2, unequal durations): the held
    updates and the clock are in the checkpoint, and the resumed run ends as the uninterrupted one, bit for bit."""
    task = TASKS[6]
    runtime = Runtime(1, 8, client_duration=lambda client, version, model_bytes: 1.0 + 0.7 * client)
    algorithm = fedbuff(task, runtime, model="cnn", lr=0.1, buffer_size=2, concurrency=3)
    full = run(algorithm, 6, rounds=5, checkpoint_path=tmp_path / "full.safetensors")

    def interrupt(record):
        if record.get("step") == 2:
            raise Interrupt

    path = tmp_path / "cut.safetensors"
    with pytest.raises(Interrupt):
        run(algorithm, 6, rounds=5, checkpoint_path=path, on_round=interrupt)
    saved = load_checkpoint(path)
    assert len(saved.progress.history) == 2 and any(k.startswith("async.update.") for k in saved.server)  # mid-buffer
    resumed = run(algorithm, 6, rounds=5, checkpoint_path=path, start=saved)
    assert strip(resumed.progress.history) == strip(full.progress.history)
    assert resumed.state.keys() == full.state.keys() and all(torch.equal(resumed.state[k], full.state[k]) for k in full.state)


def test_bad_hyperparameters_are_one_line_config_errors():
    task = TASKS[6]
    with pytest.raises(ConfigError, match=r"^algorithm.buffer_size: 4 updates .*accepted: 1 to algorithm.concurrency \(3\)$"):
        fedbuff(task, Runtime(1, 8), buffer_size=4, concurrency=3)
    with pytest.raises(ConfigError, match=r"^algorithm.model: fedbuff trains an image model; accepted: cnn"):
        fedbuff(task, Runtime(1, 8), model="linear")
    line = error_line(invoke("run", "fedavg-cnn", "--algorithm", "fedbuff", "--set", "algorithm.concurrency=101", "--dry-run"))
    assert line == "error: algorithm.concurrency: 101 clients in flight of 100; accepted: 1 to federation.num_clients (100)"
    line = error_line(invoke("run", "fedavg-cnn", "--algorithm", "fedbuff", "--set", "algorithm.buffer_size=0", "--dry-run"))
    assert line.startswith("error: algorithm.buffer_size:") and "1" in line
    line = error_line(invoke("run", "fedavg-cnn", "--algorithm", "fedbuff", "--set", "federation.sampler=size-weighted", "--dry-run"))
    assert line.startswith("error: federation.sampler: algorithm 'fedbuff' samples its own clients") and line.endswith("accepted: uniform")
    line = error_line(invoke("run", "fedavg-cnn", "--algorithm", "fedbuff", "--set", "privacy.dp=server", "--set", "privacy.noise_multiplier=0.5", "--dry-run"))
    assert line.startswith("error: privacy.dp: algorithm 'fedbuff' reads its clients' replies other than through their mean")
    algorithm = fedbuff(task, Runtime(1, 8), buffer_size=2, concurrency=3)
    loop = RoundLoop(seed=0, rounds=1, fraction=0.5, sampler=Poisson())
    with pytest.raises(ConfigError, match=r"^federation.sampler: algorithm 'fedbuff' chooses its own clients"):
        simulate(algorithm, lambda c: DATA[c], 6, TEST, loop)


def test_the_system_model_times_its_clients_with_the_models_bytes_and_the_synchronous_fields_are_refused():
    """Under ``[system]`` the clock's durations are the device model's: (bytes down + up) / b_k + n_k E s_k, the bytes the
    model's own (its parameters and buffers as broadcast); deadline, partial work, over-selection, availability refused."""
    from fedprior.algorithms.engines.asynchronous import clock_durations
    from fedprior.experiments.client_side import runtime_of
    from fedprior.experiments.config import load_config

    _, config = load_config("fedavg-cnn", ["system.speed=constant", "system.seconds_per_example=0.01", "system.bandwidth=1000"], algorithm="fedbuff")
    runtime = runtime_of(config, torch.device("cpu"), client_sizes=(10,) * 99 + (30,))
    assert runtime.client_duration is not None and runtime.client_duration(99, 4, 500) == (500 + 500) / 1000 + 30 * 1 * 0.01
    assert runtime_of(config, torch.device("cpu")).client_duration is None  # no sizes given (a worker's client side): not needed
    net_bytes: list[int] = []
    seen = Runtime(1, 8, client_duration=lambda client, version, model_bytes: net_bytes.append(model_bytes) or 1.0)
    algorithm = fedbuff(TASKS[6], seen, model="cnn", lr=0.1, buffer_size=2, concurrency=3)
    state = algorithm.init(RoundInfo(seed=0, stage="train", round=1))
    model = sum(v.numel() * v.element_size() for k, v in state.items() if k.startswith("model."))
    assert net_bytes and set(net_bytes) == {model}  # every duration asked with the model's bytes
    assert clock_durations(Runtime(1, 8), None)(5, 2) == 1.0  # type: ignore[arg-type]  # no device model: 1.0 each
    line = error_line(invoke("run", "fedavg-cnn", "--algorithm", "fedbuff", "--set", "system.speed=constant", "--set", "system.deadline=5", "--dry-run"))
    assert line.startswith("error: system.deadline: algorithm 'fedbuff' runs on its own simulated clock")
