"""run.concurrent_clients (issue 19 item 5): a round's client updates run k at once in threads (CUDA streams on a GPU),
with the numbers of one at a time, bit for bit.

No GPU here: on the CPU the lanes are threads without streams, which is what these tests check (order, errors, modes,
equality of whole runs, the per-lane resident models on the pretend device, the config's errors). Whether the streams
make a GPU round faster is measured by ``benchmarks/paper_scale.py --concurrent K`` on a GPU.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.lanes import current_lane
from fedprior.errors import ConfigError
from fedprior.experiments.build import build_experiment
from fedprior.experiments.client_side import build_algorithm
from fedprior.experiments.config import load_config, validate_config
from fedprior.experiments.resume_check import changes_that_matter
from fedprior.models import build_model
from fedprior.runtime.concurrent import Lanes
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from fedprior.runtime.threads import ThreadPolicy, available_cores
from tests.support.algorithm_setups import MORE_PRESETS, SETUPS, SMALL
from tests.support.toy_data import toy_images

ONE_THREAD = ThreadPolicy(train=1, evaluate=1, encode=1)


# -- the lanes ------------------------------------------------------------------------------------


def test_lanes_run_k_jobs_at_once_and_return_the_results_in_order():
    together = threading.Barrier(3, timeout=300)  # passes only if three jobs are running at the same time
    seen: list[tuple[int, str]] = []

    def job(i: int):
        def run():
            if i < 3:
                together.wait()
            seen.append((current_lane(), threading.current_thread().name))
            return i * i

        return run

    assert Lanes(3).run([job(i) for i in range(7)]) == [i * i for i in range(7)]
    assert {lane for lane, _ in seen} == {1, 2, 3} and threading.main_thread().name not in {name for _, name in seen}
    assert current_lane() == 0
    assert Lanes(1).run([lambda: (current_lane(), threading.current_thread().name)]) == [(0, threading.current_thread().name)]  # k = 1: here


def test_the_first_failing_job_raises_after_the_other_lanes_finish_theirs():
    finished = []

    def job(i: int):
        def run():
            if i in (1, 2):
                raise ValueError(f"client {i}")
            finished.append(i)
            return i

        return run

    with pytest.raises(ValueError, match="client 1"):
        Lanes(2).run([job(i) for i in range(6)])
    assert len(finished) < 5  # no lane took a new job after the failure (a lane that held one finished it)


class CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.lanes: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.lanes.add(current_lane())
        return func(*args, **(kwargs or {}))


def test_a_lane_runs_with_the_callers_grad_mode_and_dispatch_modes():
    """A mode around a round (a FLOP counter, the pretend device) sees the lanes' work as it sees the caller's."""
    both = threading.Barrier(2, timeout=300)  # each lane takes one job: the first two meet here

    def job():
        both.wait()
        return (torch.ones(2) * 2, torch.is_grad_enabled())[1]

    with CountOps() as counted, torch.no_grad():
        grads = Lanes(2).run([job, job])
    assert counted.lanes == {1, 2} and grads == [False] * 2
    assert Lanes(2).run([torch.is_grad_enabled, torch.is_grad_enabled]) == [True, True]


def test_a_lane_runs_with_the_callers_torch_threads_for_openmp_too():
    """OpenMP's team size is per thread and a new thread gets its default (every core); oneDNN's convolutions and MKL's
    products read it, so a lane sets it to the caller's torch thread count."""
    try:
        openmp = ctypes.CDLL("libgomp.so.1")  # torch's OpenMP on Linux (already loaded: the same library)
    except OSError:
        pytest.skip("torch here does not use GNU OpenMP")
    if available_cores() < 2 or os.environ.get("OMP_NUM_THREADS") == "1":
        pytest.skip("OpenMP's default team is one thread here: the lanes' could not differ")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert Lanes(2).run([openmp.omp_get_max_threads, openmp.omp_get_max_threads]) == [1, 1]
    finally:
        torch.set_num_threads(before)


def test_concurrent_clients_below_1_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        Lanes(0)


# -- whole runs: the numbers of one at a time -----------------------------------------------------


def strip(history):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in history]


def assert_same_run(a, b) -> None:
    assert strip(a.progress.history) == strip(b.progress.history)
    assert a.state.keys() == b.state.keys() and all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert a.client_states.keys() == b.client_states.keys()
    for c, state in a.client_states.items():
        assert state.keys() == b.client_states[c].keys() and all(torch.equal(v, b.client_states[c][k]) for k, v in state.items())


def lanes_used(algorithm):
    """``algorithm`` whose client updates note the lane they ran in (still thread-safe: a set add)."""
    lanes: set[int] = set()

    def client_update(message, state, data, info):
        lanes.add(current_lane())
        return algorithm.client_update(message, state, data, info)

    return algorithm.with_(client_update=client_update), lanes


CASES = {
    "fedavg-cnn": ("fedavg-cnn", ["data.dataset=digits"]),
    "fedbm-fedavg": ("fedbm-fedavg", MORE_PRESETS["fedbm-fedavg"]),  # a FedBM-table baseline (validation split, momentum, lr decay)
    "moon": SETUPS["moon"],
    **{name: SETUPS[name] for name in ("scaffold", "fedbm", "fednh")},  # control variates; CGDE's synthetic batches; prototypes
    **{name: SETUPS[name] for name in ("feddb", "fixmatch", "fedrgd")},
    "feddb-momentum": ("feddb", [*SETUPS["feddb"][1], "algorithm.keep_optimizer_state=true"]),  # client states on both sides
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_three_concurrent_clients_give_the_history_server_and_client_states_of_one_at_a_time(one_torch_thread, case):
    preset, overrides = CASES[case]
    name, config = load_config(preset, [*overrides, "federation.num_clients=8", "federation.fraction=0.5", "federation.local_epochs=1"])
    experiment = build_experiment(name, config)
    assert experiment.algorithm.thread_safe_updates

    def run(k: int):
        algorithm, lanes = lanes_used(experiment.algorithm)
        loop = RoundLoop(seed=5, rounds=2, fraction=0.5, threads=ONE_THREAD, concurrent_clients=k)
        return simulate(algorithm, experiment.client_data, experiment.task.num_clients, experiment.test, loop), lanes

    (alone, lanes_alone), (together, lanes_together) = run(1), run(3)
    assert lanes_alone == {0} and 0 not in lanes_together and len(lanes_together) >= 2  # (a lane that starts late may find no client left)
    assert_same_run(alone, together)


TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=6)
DATA = [toy_images(24, seed=c) for c in range(6)]
TEST = toy_images(60, seed=99)


def toy_setup():
    """The algorithm and client data of the toy runs below, built in a spawned worker (picklable: a module-level function)."""
    return fedavg(TASK, Runtime(1, 8), lr=0.1), DATA.__getitem__


def run_toy(**kw):
    algorithm, client_data = toy_setup()
    loop = RoundLoop(seed=3, rounds=2, fraction=1.0, threads=ONE_THREAD, **kw)
    return simulate(algorithm, client_data, 6, TEST, loop, worker_setup=toy_setup)


@pytest.mark.slow
def test_worker_processes_train_their_groups_concurrently_with_the_same_numbers():
    """Workers that run client updates in threads are spawned: forked ones crashed now and then (the stress test below)."""
    assert_same_run(run_toy(), run_toy(workers=2, concurrent_clients=2))
    toy = fedavg(TASK, Runtime(1, 8), lr=0.1)
    for method, refusal in ((None, "started by 'spawn' .* need a picklable setup"), ("fork", "started by fork: threads .* start them by 'spawn'")):
        loop = RoundLoop(seed=3, rounds=1, fraction=1.0, threads=ONE_THREAD, workers=2, concurrent_clients=2, start_method=method)
        with pytest.raises(ValueError, match=refusal):
            simulate(toy, lambda c: DATA[c], 6, TEST, loop)


@pytest.mark.stress
@pytest.mark.timeout(7200)  # spawned workers: 3 to 9 s a run on a busy 2-core machine (150 runs took 23 min)
def test_worker_stress_concurrent_clients_in_worker_processes_never_lose_a_worker(one_torch_thread):
    """workers = 2 with concurrent_clients = 2, repeated (``FEDPRIOR_STRESS_REPS``, 300 by default) after this process compiled
    and trained models as tests/experiments/test_client_side_compile.py does: forked workers then segfaulted in a client thread in 7 of 300 runs (their
    clients failed, the numbers differed); no worker may die, and every run gives the numbers of one process."""
    compiled = fedavg(TASK, Runtime(1, 8, compile=True), lr=0.1, model="convnet")
    for k in (1, 3):
        simulate(compiled, DATA.__getitem__, 6, TEST, RoundLoop(seed=3, rounds=2, fraction=0.5, threads=ONE_THREAD, concurrent_clients=k))
    cnn = build_model("cnn", TASK)
    cnn.compile()
    torch.nn.functional.cross_entropy(cnn(DATA[0]["x"][:8]), DATA[0]["y"][:8]).backward()
    plain = run_toy()
    reps = int(os.environ.get("FEDPRIOR_STRESS_REPS", "300"))
    for rep in range(1, reps + 1):
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message=".*a new worker redoes", category=RuntimeWarning)  # a worker died
                assert_same_run(plain, run_toy(workers=2, concurrent_clients=2))
        except (AssertionError, RuntimeWarning) as error:
            raise AssertionError(f"run {rep} of {reps}: {error}") from None
        if rep % 50 == 0:
            print(f"{rep} of {reps} runs gave the numbers of one process", flush=True)  # seen with pytest -s


def test_on_the_pretend_device_each_lane_keeps_its_own_resident_model_with_the_numbers_of_one(one_torch_thread, monkeypatch):
    """On an accelerator ``GlobalModel.receive`` keeps one model per slot: concurrent updates each get their lane's."""
    from fedprior.algorithms.engines.supervised import GlobalModel
    from tests.support.pretend_device import DEVICE, OnDevice, PretendDevice

    preset, overrides = SETUPS["feddb"]
    name, config = load_config(preset, [*overrides, *SMALL, "federation.fraction=0.5", "federation.local_epochs=1"])
    experiment = build_experiment(name, config)
    kept: list[dict] = []
    receive = GlobalModel.receive
    monkeypatch.setattr(GlobalModel, "receive", lambda self, arrays, slot="local": kept.append(self.resident) or receive(self, arrays, slot))

    def run(k: int):
        with PretendDevice():
            algorithm = build_algorithm(experiment.config, experiment.task, DEVICE)
            client_data, test = experiment.resident_inputs(DEVICE)
            result = simulate(algorithm, client_data, experiment.task.num_clients, test, RoundLoop(seed=0, rounds=2, fraction=0.5, concurrent_clients=k))
        return result, sorted(kept[-1])

    (alone, slots_alone), (together, slots_together) = run(1), run(3)
    assert slots_alone == ["evaluate", "local"] and slots_together[0] == "evaluate"
    assert 2 <= len(slots_together[1:]) and set(slots_together[1:]) <= {"local@1", "local@2", "local@3"}  # one model per lane, none shared
    unwrap = lambda state: {k: v.elem if isinstance(v, OnDevice) else v for k, v in state.items()}  # noqa: E731
    assert strip(alone.progress.history) == strip(together.progress.history)
    a, b = unwrap(alone.state), unwrap(together.state)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# -- which algorithms may, and the config ---------------------------------------------------------

THREAD_SAFE = {
    "fedavg",
    "fedavgm",
    "fedadagrad",
    "fedadam",
    "fedyogi",
    "fedbuff",
    "fedasync",
    "fedbn",  # FedAvg's local training; its BN layers are client state, not shared between lanes
    "fedprox",
    "moon",
    "central",
    "feddb",
    "fixmatch",
    "fedavg-labeled",
    "fedrgd",
    "scaffold",
    "fedbm",
    "feddyn",
    "fedrep",
    "fedrod",
    "fednh",
    "fedetf",
}
"""central: FedAvg on one client. FedProto builds a client's first model under a reseeded global generator (GlobalModel.init)."""


def test_the_algorithms_that_declare_thread_safe_updates_never_use_the_global_generator(one_torch_thread, monkeypatch):
    """What ``Algorithm.thread_safe_updates`` promises, checked for every shipped algorithm that makes it: a client update
    whose global generator starts from two different states gives the same reply, and never reseeds the global generator
    (``data.augment.seeded`` and kornia's views do, which threads would race on)."""
    declared = set()
    for name, (preset, overrides) in sorted(SETUPS.items()):
        config_name, config = load_config(preset, [*overrides, *SMALL, "federation.local_epochs=1"])
        experiment = build_experiment(config_name, config)
        algorithm = experiment.algorithm
        if not algorithm.thread_safe_updates:
            continue
        declared.add(name)
        info = RoundInfo(seed=0, stage=algorithm.stages[0].name, round=1)
        state = algorithm.init(info)
        message = algorithm.broadcast(state, info)
        client = next(c for c in range(experiment.task.num_clients) if experiment.partition.holdings(c).size)
        replies = []
        with monkeypatch.context() as patch:
            patch.setattr(torch, "manual_seed", lambda seed, name=name: pytest.fail(f"{name}: a thread-safe update reseeded torch's global generator"))
            for start in (1, 2):
                with torch.random.fork_rng(devices=[]):
                    torch.random.default_generator.manual_seed(start)
                    reply, _ = algorithm.client_update(message, {}, experiment.client_data(client), info.for_client(client))
                replies.append(reply)
        a, b = replies
        assert a.metrics == b.metrics and a.arrays.keys() == b.arrays.keys(), name
        assert all(torch.equal(a.arrays[k], b.arrays[k]) for k in a.arrays), name
    assert declared == THREAD_SAFE  # a change here is a decision: update docs/runtime.md's list too


def test_concurrent_clients_config_errors_and_the_cpu_note():
    with pytest.raises(ConfigError, match="run.concurrent_clients"):
        validate_config({"run": {"concurrent_clients": 0}})
    name, config = load_config(*SETUPS["fedsimclr"][:1], [*SETUPS["fedsimclr"][1], *SMALL, "run.concurrent_clients=2"])
    with pytest.raises(ConfigError, match="run.concurrent_clients: algorithm 'fedsimclr' trains its clients one at a time.*accepted for it: 1"):
        build_experiment(name, config)
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", "run.runtime='flower-sim'", "run.concurrent_clients=2"])
    with pytest.raises(ConfigError, match="run.concurrent_clients: .*runtime = 'local' only.*accepted with runtime 'flower-sim': 1"):
        build_experiment(name, config)
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", *SMALL, "run.concurrent_clients=2"])
    with pytest.warns(UserWarning, match="run.concurrent_clients = 2 on cpu: the client updates run in threads without CUDA streams"):
        experiment = build_experiment(name, config)
    assert experiment.round_loop().concurrent_clients == 2
    assert experiment.round_loop().start_method == "spawn"  # its workers run client threads: never forked
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", *SMALL, "run.concurrent_clients=2", "run.start_method='fork'"])
    with pytest.raises(
        ConfigError, match="run.start_method: 'fork' cannot be used with run.concurrent_clients = 2 .*accepted with run.concurrent_clients > 1: auto, spawn"
    ):
        build_experiment(name, config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        name, config = load_config("fedavg-cnn", ["data.dataset=digits", *SMALL])
        assert build_experiment(name, config).round_loop().concurrent_clients == 1


def test_a_resume_may_change_concurrent_clients_and_compile():
    now = validate_config({}).to_dict()
    assert changes_that_matter(now, validate_config({"run": {"concurrent_clients": 4, "compile": True}}).to_dict()) == {}
    older = {**now, "run": {k: v for k, v in now["run"].items() if k not in ("concurrent_clients", "compile")}}  # a checkpoint before them
    assert changes_that_matter(older, now) == {}
