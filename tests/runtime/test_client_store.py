"""Issue 53 item 2: the clients' persistent states in one store, in memory below a size and on disk beyond it
(``runtime/client_store.py``): the same numbers wherever they are held, a round reads only its sampled clients'
states, checkpoints name the stored files instead of copying them, and a resume from such a checkpoint ends as an
uninterrupted run."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

import fedprior.runtime.client_store as client_store
from fedprior.algorithms.base import Runtime
from fedprior.algorithms.scaffold import scaffold
from fedprior.runtime.checkpoint import CheckpointError, Progress, RunState, blobs_path, load_checkpoint, save_checkpoint
from fedprior.runtime.client_store import ClientStates
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.runtime.test_simulation import DATA, TASK, TEST, Interrupt, counting_algorithm, strip

ON_DISK = 0
"""``client_state_memory`` that puts every state on disk from the start."""


def run(algo, memory: int | None = None, **kw):
    loop = RoundLoop(seed=3, rounds=kw.pop("rounds", 4), fraction=0.5, checkpoint_every=kw.pop("checkpoint_every", 1))
    if memory is not None:
        loop = RoundLoop(**{**loop.__dict__, "client_state_memory": memory})
    return simulate(algo, lambda c: DATA[c], 6, TEST, loop, **kw)


def same_states(a, b) -> bool:
    return list(a) == list(b) and all(a[c].keys() == b[c].keys() and all(torch.equal(a[c][k], b[c][k]) for k in a[c]) for c in a)


def test_states_stay_in_memory_below_the_size_and_all_go_to_disk_beyond_it():
    store = ClientStates(memory_bytes=100)
    first = {"c": torch.arange(10, dtype=torch.float32)}  # 40 bytes
    store[3] = first
    assert store.memory == {3: first} and store.references() == {}
    store[5] = {"c": torch.ones(20)}  # 120 bytes in all: beyond 100
    assert store.memory == {} and sorted(store.references()) == [3, 5] and store.on_disk
    store[7] = {"c": torch.zeros(2)}  # from now on on disk, however small
    assert sorted(store.references()) == [3, 5, 7] and list(store) == [3, 5, 7] and len(store) == 3
    assert torch.equal(store[3]["c"], first["c"]) and store.get(4) is None and 4 not in store
    replaced = store.references()[5]
    store[5] = {"c": torch.full((20,), 2.0)}
    assert not (store.folder / f"{replaced}.safetensors").exists(), "a replaced state's file is deleted where no checkpoint names it"
    assert len(list(store.folder.glob("*.safetensors"))) == 3


def test_scaffold_with_its_control_variates_on_disk_gives_the_numbers_of_memory(tmp_path):
    algo = scaffold(TASK, Runtime(1, 8), model="cnn", lr=0.05)
    in_memory = run(algo, rounds=3, checkpoint_path=tmp_path / "memory.safetensors")
    on_disk = run(algo, ON_DISK, rounds=3, checkpoint_path=tmp_path / "disk.safetensors")
    assert strip(on_disk.progress.history) == strip(in_memory.progress.history)
    assert all(torch.equal(on_disk.state[k], in_memory.state[k]) for k in in_memory.state)
    assert same_states(on_disk.client_states, in_memory.client_states)
    assert isinstance(on_disk.client_states, ClientStates) and on_disk.client_states.memory == {}
    files = {p.stem for p in blobs_path(tmp_path / "disk.safetensors").glob("*.safetensors")}
    assert set(on_disk.client_states.references().values()) <= files  # the states are the checkpoint's parts
    with safe_open(str(tmp_path / "disk.safetensors"), framework="pt") as handle:
        assert not [k for k in handle.keys() if k.startswith("client/")], "the checkpoint file copies no client state"


def test_a_round_reads_the_states_of_its_sampled_clients_only(monkeypatch):
    read: list[int] = []
    get = ClientStates.__getitem__

    def counted(self, client_id):
        state = get(self, client_id)  # KeyError: the client has no state (yet)
        read.append(client_id)
        return state

    monkeypatch.setattr(ClientStates, "__getitem__", counted)
    algo = counting_algorithm([])
    result = run(algo, ON_DISK, rounds=3)
    history = result.progress.history
    seen: set[int] = set()
    expected = []
    for record in history:  # a sampled client whose state exists is read once, in the round it trains
        expected += [c for c in record["clients"] if c in seen]
        seen |= set(record["clients"])
    assert read == expected


@pytest.mark.parametrize("checkpoint_every", [1, 3])
@pytest.mark.parametrize("stop_after", [1, 3, 5])
def test_a_resume_from_a_store_on_disk_equals_an_uninterrupted_run(tmp_path, stop_after, checkpoint_every):
    algo = counting_algorithm([])
    full = run(algo)

    def interrupt(record):
        if record.get("step") == stop_after:
            raise Interrupt

    path = tmp_path / "cut.safetensors"
    with pytest.raises(Interrupt):
        run(algo, ON_DISK, checkpoint_path=path, on_round=interrupt, checkpoint_every=checkpoint_every)
    loaded = load_checkpoint(path)
    assert len(loaded.progress.history) == stop_after
    assert isinstance(loaded.clients, ClientStates) and loaded.clients.references() and not loaded.clients.memory
    resumed = run(algo, ON_DISK, checkpoint_path=path, start=loaded, checkpoint_every=checkpoint_every)
    assert strip(resumed.progress.history) == strip(full.progress.history)
    assert torch.equal(resumed.state["v"], full.state["v"])
    assert same_states(resumed.client_states, full.client_states)
    assert list(tmp_path.glob("**/*.tmp")) == []


def test_a_resume_may_move_the_states_back_to_memory(tmp_path):
    algo = counting_algorithm([])
    full = run(algo)
    path = tmp_path / "cut.safetensors"

    def interrupt(record):
        if record.get("step") == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        run(algo, ON_DISK, checkpoint_path=path, on_round=interrupt)
    resumed = run(algo, checkpoint_path=path, start=load_checkpoint(path))  # the default size: new states in memory
    assert strip(resumed.progress.history) == strip(full.progress.history)
    assert same_states(resumed.client_states, full.client_states)


def test_a_checkpoint_names_the_stored_files_and_writes_none_of_them(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    store = ClientStates(blobs_path(path), memory_bytes=ON_DISK)
    for c in range(5):
        store[c] = {"c": torch.full((1000,), float(c))}
    stored_bytes = sum(p.stat().st_size for p in blobs_path(path).glob("*.safetensors"))
    written = save_checkpoint(path, RunState({"w": torch.ones(3)}, store.snapshot(), Progress(round=1)))
    assert written == path.stat().st_size and written < stored_bytes  # the checkpoint file alone: no state copied
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    assert json.loads(metadata["blobs"]) == {f"client/{c}/": d for c, d in store.references().items()}
    loaded = load_checkpoint(path).clients
    assert same_states(loaded, store)


def test_a_damaged_or_missing_stored_state_is_refused(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    store = ClientStates(blobs_path(path), memory_bytes=ON_DISK)
    store[1] = {"c": torch.arange(1000, dtype=torch.float32)}
    store[2] = {"c": torch.ones(4)}
    save_checkpoint(path, RunState({"w": torch.ones(3)}, store.snapshot(), Progress(round=1)))
    one = blobs_path(path) / f"{store.references()[1]}.safetensors"
    data = bytearray(one.read_bytes())
    data[-8] ^= 0xFF
    one.write_bytes(bytes(data))
    loaded = load_checkpoint(path).clients
    assert torch.equal(loaded[2]["c"], torch.ones(4))
    with pytest.raises(CheckpointError, match="client 1's state .* is damaged"):
        loaded[1]
    (blobs_path(path) / f"{store.references()[2]}.safetensors").unlink()
    with pytest.raises(CheckpointError, match="is incomplete: its part 'client/2/'"):
        load_checkpoint(path)


def test_the_default_size_keeps_states_in_memory():
    assert client_store.DEFAULT_MEMORY_MB * 2**20 == RoundLoop(seed=0, rounds=1, fraction=1.0).client_state_memory
    result = run(counting_algorithm([]))
    assert result.client_states.references() == {} and result.client_states.memory


@pytest.mark.slow
def test_worker_processes_with_the_states_on_disk_give_the_numbers_of_one_process_in_memory():
    algo = counting_algorithm([])
    plain = simulate(algo, lambda c: DATA[c], 6, TEST, RoundLoop(seed=3, rounds=4, fraction=0.5))
    loop = RoundLoop(seed=3, rounds=4, fraction=0.5, workers=2, start_method="fork", client_state_memory=ON_DISK)
    workers = simulate(algo, lambda c: DATA[c], 6, TEST, loop)
    assert strip(workers.progress.history) == strip(plain.progress.history) and torch.equal(workers.state["v"], plain.state["v"])
    assert workers.client_states.references() and same_states(workers.client_states, plain.client_states)
