"""The in-process runtime: sampling, determinism, per-client state, vectorized path, checkpoints, resume."""

from dataclasses import replace

import pytest
import torch

from fedprior.algorithms.base import Algorithm, Broadcast, Reply, RoundInfo, Runtime, Stage, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.scaffold import scaffold
from fedprior.runtime.checkpoint import load_checkpoint
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.sampling import clients_per_round, sample_clients
from fedprior.runtime.simulation import simulate
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=6)
DATA = [toy_images(24, seed=c) for c in range(6)]
TEST = toy_images(60, seed=99)


def strip(history, timing=("seconds",)):
    """A run's history without its timing fields, which differ between two runs of the same numbers."""
    return [{k: v for k, v in r.items() if k not in timing} for r in history]


def run(algo, **kw):
    loop = RoundLoop(
        seed=kw.pop("seed", 3), rounds=kw.pop("rounds", 4), fraction=0.5, vectorize=kw.pop("vectorize", True), checkpoint_every=kw.pop("checkpoint_every", 1)
    )
    return simulate(algo, lambda c: DATA[c], 6, TEST, loop, **kw)


def test_sampling_is_seeded_sorted_and_sized():
    picks = [sample_clients(5, "federated", r, 100, 0.1) for r in range(1, 6)]
    assert all(len(p) == 10 and p == sorted(set(p)) and all(0 <= c < 100 for c in p) for p in picks)
    assert picks == [sample_clients(5, "federated", r, 100, 0.1) for r in range(1, 6)]
    assert len({tuple(p) for p in picks}) == 5
    assert sample_clients(6, "federated", 1, 100, 0.1) != picks[0]
    assert clients_per_round(7, 0.01) == 1 and clients_per_round(7, 1.0) == 7


def test_same_seed_same_numbers_and_different_seed_differs():
    algo = fedavg(TASK, Runtime(1, 8), model="cnn", lr=0.1)
    a, b, c = run(algo), run(algo), run(algo, seed=4)
    assert strip(a.progress.history) == strip(b.progress.history)
    assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert strip(a.progress.history) != strip(c.progress.history)
    assert len(a.progress.history) == 4 and all(len(r["clients"]) == 3 for r in a.progress.history)


def test_per_client_state_persists_between_rounds():
    algo = scaffold(TASK, Runtime(1, 8), model="cnn", lr=0.05)
    result = run(algo, rounds=3)
    sampled = {c for r in result.progress.history for c in r["clients"]}
    assert set(result.client_states) == sampled
    assert all(any(v.abs().sum() > 0 for v in s.values()) for s in result.client_states.values())


def counting_algorithm(calls: list) -> Algorithm:
    """A toy algorithm whose clients add their own random number to a counter; it can run many clients at once."""

    def client_update(message, state, data, info):
        noise = torch.rand(1, generator=info.generator())
        seen = state.get("seen", torch.zeros(1)) + 1
        return Reply({"v": message.arrays["v"] + noise}, num_examples=int(data["x"].shape[0])), {"seen": seen}

    def client_update_many(message, states, datas, infos):
        calls.append(len(infos))
        return [client_update(message, s, d, i) for s, d, i in zip(states, datas, infos, strict=True)]

    return Algorithm(
        name="toy",
        inputs=("x",),
        init=lambda info: {"v": torch.zeros(1)},
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=client_update,
        aggregate=lambda state, replies, info: {"v": torch.stack([r.arrays["v"] for r in replies]).mean(0)},
        evaluate=lambda state, data: {"accuracy": float(state["v"])},
        client_update_many=client_update_many,
        stages=(Stage("one"), Stage("two", rounds=2, fraction=1.0, evaluate=False)),
    )


def test_vectorized_path_is_used_and_equal_and_stages_run_in_order():
    calls = []
    vec = run(counting_algorithm(calls), vectorize=True)
    assert calls == [3, 3, 3, 3, 6, 6]  # four rounds at fraction 0.5, then stage two with everyone
    seq = run(counting_algorithm(calls), vectorize=False)
    assert len(calls) == 6
    assert torch.equal(vec.state["v"], seq.state["v"])
    assert [(r["stage"], r["round"]) for r in vec.progress.history] == [("one", i) for i in range(1, 5)] + [("two", 1), ("two", 2)]
    assert "accuracy" not in vec.progress.history[-1]  # stage two is not evaluated
    assert int(vec.client_states[0]["seen"]) >= 2


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("checkpoint_every", [1, 3])
@pytest.mark.parametrize("stop_after", [1, 3, 5])
def test_resume_after_interruption_equals_uninterrupted(tmp_path, stop_after, checkpoint_every):
    """With run.checkpoint_every = 3 a stop at step 1 or 5 finds its round unwritten: the loop writes it as it stops."""
    algo = counting_algorithm([])
    full = run(algo, checkpoint_path=tmp_path / "full.safetensors")

    def interrupt(record):
        if record.get("step") == stop_after:
            raise Interrupt

    path = tmp_path / "cut.safetensors"
    with pytest.raises(Interrupt):
        run(algo, checkpoint_path=path, on_round=interrupt, checkpoint_every=checkpoint_every)
    assert len(load_checkpoint(path).progress.history) == stop_after
    resumed = run(algo, checkpoint_path=path, start=load_checkpoint(path), checkpoint_every=checkpoint_every)
    assert strip(resumed.progress.history) == strip(full.progress.history)
    assert torch.equal(resumed.state["v"], full.state["v"])
    assert resumed.client_states.keys() == full.client_states.keys()
    assert all(torch.equal(resumed.client_states[c]["seen"], full.client_states[c]["seen"]) for c in full.client_states)
    assert list(tmp_path.glob("*.tmp")) == []


def written_rounds(monkeypatch) -> list[int]:
    """The steps (rounds over all stages) whose checkpoint the loop writes, recorded as it writes them."""
    import fedprior.runtime.simulation as simulation

    steps, write = [], simulation.save_checkpoint

    def counted(path, run_state):
        steps.append(len(run_state.progress.history))
        write(path, run_state)

    monkeypatch.setattr(simulation, "save_checkpoint", counted)
    return steps


def test_checkpoint_every_3_over_4_rounds_writes_rounds_3_and_4_and_a_resume_from_3_ends_the_same(tmp_path, monkeypatch):
    algo = replace(counting_algorithm([]), stages=(Stage("one"),))
    full = run(algo)
    steps = written_rounds(monkeypatch)
    path = tmp_path / "c.safetensors"
    every3 = run(algo, checkpoint_path=path, checkpoint_every=3)
    assert steps == [3, 4]  # not round 0, 1 or 2; the last round always
    assert torch.equal(every3.state["v"], full.state["v"])
    every1 = run(algo, checkpoint_path=tmp_path / "each.safetensors")
    assert steps == [3, 4, 0, 1, 2, 3, 4] and torch.equal(every1.state["v"], full.state["v"])

    kept = tmp_path / "at3.safetensors"  # the checkpoint as round 3 wrote it (round 4 then replaces it)
    run(algo, checkpoint_path=path, checkpoint_every=3, on_round=lambda r: r.get("step") == 3 and kept.write_bytes(path.read_bytes()))
    at_3 = load_checkpoint(kept)
    assert at_3.progress.round == 3
    resumed = run(algo, checkpoint_path=kept, start=at_3, checkpoint_every=3)
    assert strip(resumed.progress.history) == strip(full.progress.history)
    assert torch.equal(resumed.state["v"], full.state["v"])
    assert all(torch.equal(resumed.client_states[c]["seen"], full.client_states[c]["seen"]) for c in full.client_states)


def test_checkpoint_round_trip(tmp_path):
    algo = scaffold(TASK, Runtime(1, 8), model="cnn", lr=0.05)
    result = run(algo, rounds=2, checkpoint_path=tmp_path / "c.safetensors")
    loaded = load_checkpoint(tmp_path / "c.safetensors")
    assert all(torch.equal(loaded.server[k], result.state[k]) for k in result.state)
    assert loaded.clients.keys() == result.client_states.keys()
    assert loaded.progress.round == 2 and len(loaded.progress.history) == 2
    assert loaded.progress.initial == result.progress.initial


def test_a_client_without_data_is_skipped_recorded_and_not_aggregated():
    """A Dirichlet partition can leave a client empty: it is not trained, not averaged in, and says so."""
    empty = {"x": torch.zeros(0, 1, 8, 8), "y": torch.zeros(0, dtype=torch.long)}
    datas = [DATA[0], empty, DATA[2], empty, DATA[4], DATA[5]]
    algo = fedavg(TASK, Runtime(1, 8), model="cnn", lr=0.1)
    aggregated = []

    def spy(state, replies, info):
        aggregated.append([r.client_id for r in replies])
        return algo.aggregate(state, replies, info)

    result = simulate(algo.with_(aggregate=spy), lambda c: datas[c], 6, TEST, RoundLoop(seed=3, rounds=3, fraction=1.0))
    assert aggregated == [[0, 2, 4, 5]] * 3
    assert all(r["empty_clients"] == [1, 3] and r["failed_clients"] == [] for r in result.progress.history)
    only_empty = simulate(algo, lambda c: empty, 2, TEST, RoundLoop(seed=3, rounds=2, fraction=1.0))
    assert all(r["aggregated"] is False for r in only_empty.progress.history)
    initial = algo.init(RoundInfo(seed=3, stage="federated", round=0))
    assert all(torch.equal(only_empty.state[k], initial[k]) for k in initial)


class UnreachableRounds:
    """An in-process pool whose clients cannot be reached on the first ``attempts`` tries of the given steps."""

    def __init__(self, algorithm, steps, attempts=1, states=None):
        from fedprior.runtime.clients import InProcessClients

        self.inner = InProcessClients(algorithm, lambda c: DATA[c], 6, states)
        self.num_clients, self.steps, self.attempts, self.tries = 6, set(steps), attempts, {}

    def prepare(self):
        pass

    def states(self):
        return self.inner.states()

    def update(self, message, info, step, clients, vectorize):
        self.tries[step] = self.tries.get(step, 0) + 1
        if step in self.steps and self.tries[step] <= self.attempts:
            return [], {c: "node unavailable" for c in clients}
        return self.inner.update(message, info, step, clients, vectorize)


def loop(pool, algo, **kw):
    from fedprior.runtime.simulation import run_rounds

    waits = {k: kw.pop(k) for k in ("wait_for_clients", "retry_every") if k in kw}
    return run_rounds(algo, pool, TEST, RoundLoop(seed=3, rounds=4, fraction=0.5, **waits), **kw)


def test_a_round_no_client_could_be_reached_for_is_not_counted_and_stops_the_run_resumably(tmp_path):
    from fedprior.runtime.simulation import RoundNotTrained

    algo = counting_algorithm([])
    full = loop(UnreachableRounds(algo, steps=()), algo)
    seen, path = [], tmp_path / "c.safetensors"
    with pytest.raises(RoundNotTrained, match="round 3: none of the 3 sampled clients could be reached"):
        loop(UnreachableRounds(algo, steps={3}), algo, checkpoint_path=path, on_round=seen.append)
    assert seen[-1]["round"] == 3 and seen[-1]["trained"] is False and seen[-1]["failures"]
    saved = load_checkpoint(path)
    assert saved.progress.round == 2 and len(saved.progress.history) == 2  # round 3 not checkpointed as trained
    resumed = loop(UnreachableRounds(algo, steps=(), states=saved.clients), algo, checkpoint_path=path, start=saved)
    assert strip(resumed.progress.history) == strip(full.progress.history)
    assert torch.equal(resumed.state["v"], full.state["v"])


def test_wait_for_clients_retries_the_round_until_they_answer_then_gives_up():
    from fedprior.runtime.simulation import RoundNotTrained

    algo = counting_algorithm([])
    full = loop(UnreachableRounds(algo, steps=()), algo)
    waited = loop(UnreachableRounds(algo, steps={2}, attempts=2), algo, wait_for_clients=120.0, retry_every=0.01)  # ends at the 3rd attempt
    assert waited.progress.history[1]["attempts"] == 3 and "attempts" not in waited.progress.history[0]
    assert strip(waited.progress.history, ("seconds", "attempts")) == strip(full.progress.history, ("seconds", "attempts"))
    assert torch.equal(waited.state["v"], full.state["v"])
    pool = UnreachableRounds(algo, steps={2}, attempts=10**6)
    with pytest.raises(RoundNotTrained, match="round 2"):
        loop(pool, algo, wait_for_clients=2.0, retry_every=0.01)  # ~200 tries; more than 2 however loaded the machine
    assert pool.tries[2] > 2
