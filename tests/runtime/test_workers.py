"""run.workers: worker processes give the numbers of one process; a dead worker's clients are redone, and fail only if the redo dies too; evaluate_every."""

import faulthandler
import json
import os
import signal

import pytest
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, Reply, Runtime, Stage, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.scaffold import scaffold
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import run_rounds, simulate
from fedprior.runtime.threads import ThreadPolicy
from fedprior.runtime.workers import WorkerClients, WorkerError
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=6)
DATA = [toy_images(24, seed=c) for c in range(6)]
TEST = toy_images(60, seed=99)
ONE_THREAD = ThreadPolicy(train=1, evaluate=1, encode=1)


def strip(history):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in history]


def run(algo, **kw):
    loop = RoundLoop(seed=3, rounds=kw.pop("rounds", 3), fraction=0.5, threads=ONE_THREAD, **kw)
    return simulate(algo, lambda c: DATA[c], 6, TEST, loop)


def assert_same_run(a, b):
    assert strip(a.progress.history) == strip(b.progress.history)
    assert a.state.keys() == b.state.keys() and all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert a.client_states.keys() == b.client_states.keys()
    for c, state in a.client_states.items():
        assert state.keys() == b.client_states[c].keys() and all(torch.equal(v, b.client_states[c][k]) for k, v in state.items())


@pytest.mark.parametrize(
    "make",
    [
        lambda: fedavg(TASK, Runtime(1, 8), lr=0.1),
        lambda: scaffold(TASK, Runtime(1, 8), lr=0.05),
    ],
    ids=["fedavg-cnn", "scaffold-cnn"],
)
def test_two_workers_give_the_history_and_client_states_of_one_process(make):
    algo = make()
    alone, pooled = run(algo), run(algo, workers=2)
    assert_same_run(alone, pooled)
    if algo.name == "scaffold":  # the control variates c_i travelled to the workers and back
        assert pooled.client_states and all(any(v.abs().sum() > 0 for v in s.values()) for s in pooled.client_states.values())


@pytest.mark.slow
def test_a_spawned_worker_rebuilds_the_experiment_and_gives_the_same_numbers(shared_cache):
    """The CUDA path starts workers by spawn from the picklable ClientSide; here on the CPU, one worker."""
    name, config = load_config(
        "fedavg-cnn", ["data.dataset=digits", "federation.num_clients=6", "federation.fraction=0.5", "federation.rounds=1", "run.device=cpu"]
    )
    experiment = build_experiment(name, config)
    loop = RoundLoop(seed=0, rounds=1, fraction=0.5, threads=ONE_THREAD)
    alone = simulate(experiment.algorithm, experiment.client_data, 6, experiment.test, loop)
    with WorkerClients(experiment.algorithm, experiment.client_data, 6, workers=1, setup=experiment.client_side(), start_method="spawn") as pool:
        spawned = run_rounds(experiment.algorithm, pool, experiment.test, loop)
        assert pool.workers[0].process.pid != os.getpid()
    assert_same_run(alone, spawned)


def suicidal_algorithm(victim: int, fatal_round: int, parent: int) -> Algorithm:
    """A toy whose client ``victim`` kills its worker process in ``fatal_round`` (never the test's own process)."""

    def client_update(message, state, data, info):
        if info.client_id == victim and info.round == fatal_round and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        seen = state.get("seen", torch.zeros(())) + 1
        draw = torch.rand(())  # torch's global generator, as dropout would use it
        return Reply({"v": message.arrays["v"] + info.client_id + draw, "draw": draw}, int(data["x"].shape[0])), {"seen": seen}

    return Algorithm(
        name="toy",
        inputs=("x",),
        init=lambda info: {"v": torch.zeros(())},
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=client_update,
        aggregate=lambda state, replies, info: {"v": torch.stack([r.arrays["v"] for r in replies]).mean()},
        evaluate=lambda state, data: {"accuracy": 0.5},
    )


def test_a_worker_that_dies_once_has_its_clients_redone_by_a_new_worker_with_the_numbers_of_one_process(tmp_path):
    """A segfault in a worker (here raised by client 1's update in round 2, the first time only) costs no update."""
    victim, parent, marker = 1, os.getpid(), tmp_path / "crashed"

    def client_update(message, state, data, info):
        if info.client_id == victim and info.round == 2 and os.getpid() != parent:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL))  # only the first worker that trains it crashes
            except FileExistsError:
                pass
            else:
                faulthandler.disable()  # no "Fatal Python error" dump in the test's output
                os.kill(os.getpid(), signal.SIGSEGV)
        return toy.client_update(message, state, data, info)

    toy = suicidal_algorithm(-1, 0, parent)
    algo = toy.with_(client_update=client_update)
    alone = run(algo, rounds=3, vectorize=False)
    with pytest.warns(RuntimeWarning, match=rf"died \(killed by signal {int(signal.SIGSEGV)}\) during the update of clients \[{victim}\]; a new worker redoes"):
        pooled = run(algo, rounds=3, workers=2, vectorize=False)
    assert marker.exists() and all(r["failed_clients"] == [] for r in pooled.progress.history)
    assert_same_run(alone, pooled)


def test_a_client_whose_update_kills_every_worker_fails_and_the_run_goes_on_with_a_new_worker():
    victim = 1
    algo = suicidal_algorithm(victim, fatal_round=2, parent=os.getpid())
    with pytest.warns(RuntimeWarning, match="a new worker redoes"):  # once: the worker that redoes it dies too
        result = simulate(algo, lambda c: DATA[c], 6, TEST, RoundLoop(seed=3, rounds=4, fraction=1.0, threads=ONE_THREAD, workers=2, vectorize=False))
    history = result.progress.history
    assert [r["failed_clients"] for r in history] == [[], [victim], [], []]
    assert "died (killed by signal 9) during the update; each of the 2 workers that trained it died" in history[1]["failures"][str(victim)]
    assert sorted(map(int, history[1]["upload_bytes_by_client"])) == [c for c in range(6) if c != victim]  # the others replied
    assert history[1].get("aggregated", True) and "accuracy" in history[1]
    # the victim kept its old state through the failed round, and trained again afterwards
    assert int(result.client_states[victim]["seen"]) == 3 and int(result.client_states[0]["seen"]) == 4


def test_draws_from_the_global_generator_are_the_same_in_any_process():
    algo = suicidal_algorithm(-1, 0, os.getpid())
    draws = []
    algo = algo.with_(
        aggregate=lambda state, replies, info: (
            draws.append([float(r.arrays["draw"]) for r in replies]) or {"v": torch.stack([r.arrays["v"] for r in replies]).mean()}
        )
    )
    alone, pooled = run(algo, vectorize=False), run(algo, workers=2, vectorize=False)
    assert_same_run(alone, pooled)
    assert draws[:3] == draws[3:] and len(set(draws[0])) == len(draws[0]) and draws[0] != draws[1]


def test_an_exception_in_a_worker_stops_the_run_with_the_worker_traceback():
    def client_update(message, state, data, info):
        raise ValueError("a bug in client_update")

    algo = suicidal_algorithm(0, 0, os.getpid()).with_(client_update=client_update)
    with pytest.raises(WorkerError, match="ValueError: a bug in client_update"):
        simulate(algo, lambda c: DATA[c], 6, TEST, RoundLoop(seed=3, rounds=1, fraction=1.0, workers=2))


def staged_algorithm() -> Algorithm:
    toy = suicidal_algorithm(-1, 0, os.getpid())
    return toy.with_(stages=(Stage("one"), Stage("two", rounds=3), Stage("three", rounds=2, evaluate=False)))


def test_evaluate_every_k_rounds_and_the_last_round_of_each_stage():
    result = simulate(staged_algorithm(), lambda c: DATA[c], 6, TEST, RoundLoop(seed=0, rounds=5, fraction=0.5, evaluate_every=2))
    evaluated = [(r["stage"], r["round"]) for r in result.progress.history if "accuracy" in r]
    assert evaluated == [("one", 2), ("one", 4), ("one", 5), ("two", 2), ("two", 3)]
    assert all("accuracy" not in r and "loss" not in r for r in result.progress.history if (r["stage"], r["round"]) not in evaluated)
    every = simulate(staged_algorithm(), lambda c: DATA[c], 6, TEST, RoundLoop(seed=0, rounds=5, fraction=0.5))
    assert sum("accuracy" in r for r in every.progress.history) == 8  # stage three is never evaluated


def test_a_run_with_workers_and_evaluate_every_reports_them(tmp_path, shared_cache):
    name, config = load_config(
        "fedavg-cnn",
        ["data.dataset=digits", "federation.num_clients=6", "federation.fraction=0.5", "federation.rounds=3", "federation.evaluate_every=2", "run.workers=2"],
    )
    summary = start(name, config, tmp_path / "run")
    assert summary["workers"] == 2 and summary["device"] == "cpu" and summary["threads"]["train"] == 1
    assert summary["evaluated_rounds"] == [2, 3] and len(summary["history"]) == 2 and summary["rounds"] == 3
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert ["accuracy" in m for m in metrics] == [False, True, True]
    assert summary["final_accuracy"] == metrics[-1]["accuracy"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| 2 |" in report and "| 1 |" not in report.split("| round | test accuracy (%) |")[1]


def test_workers_with_a_flower_runtime_is_a_config_error():
    from fedprior.errors import ConfigError

    name, config = load_config("fedavg-cnn", ["run.workers=2", "run.runtime='flower-sim'"])
    with pytest.raises(ConfigError, match="run.workers: worker processes serve run.runtime = 'local' only"):
        build_experiment(name, config)


def test_a_worker_killed_between_updates_is_replaced_with_a_warning_and_the_numbers_of_one_process():
    """Probe 4 note 131: the replacement was silent."""
    algo = suicidal_algorithm(-1, 0, os.getpid())
    pools: list[WorkerClients] = []

    def aggregate(state, replies, info):  # after round 1's updates, in this process: kill a worker that idles now
        if info.round == 1:
            pools[0].workers[0].process.kill()
            pools[0].workers[0].process.join()
        return algo.aggregate(state, replies, info)

    killing = algo.with_(aggregate=aggregate)
    loop = RoundLoop(seed=3, rounds=2, fraction=0.5, threads=ONE_THREAD, vectorize=False)
    alone = simulate(algo, lambda c: DATA[c], 6, TEST, loop)
    with WorkerClients(killing, lambda c: DATA[c], 6, workers=2) as pool:
        pools.append(pool)
        with pytest.warns(RuntimeWarning, match=r"^worker process \d+ died \(killed by signal 9\) between updates; a new worker takes its place"):
            pooled = run_rounds(killing, pool, TEST, loop)
    assert_same_run(alone, pooled)
