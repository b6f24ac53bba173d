"""Issue 19 item 4: checkpoints rewrite only what changed (content-addressed parts beside the checkpoint), stay atomic,
checked and exact on resume; MFCL's representations are written once."""

from __future__ import annotations

import pytest
import torch

import fedprior.atomic as atomic
import fedprior.runtime.checkpoint as checkpoint
from fedprior.runtime.checkpoint import CheckpointError, Progress, RunState, blobs_path, load_checkpoint, save_checkpoint
from tests.support.cli import error_line, invoke
from tests.support.run_folders import copy, history

BIG = 1 << 18
"""Floats in a 'large' tensor of these tests (1 MiB: at the default BLOB_BYTES)."""


@pytest.fixture
def written(monkeypatch):
    """The bytes each file write of the checkpoint code hands to the disk, as a list appended per write."""
    sizes: list[int] = []
    write = atomic.write_bytes

    def counting(path, data, durable=False, clean=True):
        sizes.append(len(data))
        return write(path, data, durable, clean)

    monkeypatch.setattr(atomic, "write_bytes", counting)
    return sizes


def state(seed: int, rows: int = BIG) -> torch.Tensor:
    return torch.randn(rows, generator=torch.Generator().manual_seed(seed))


def exact(loaded: RunState, server: dict, clients: dict) -> bool:
    return (
        loaded.server.keys() == server.keys()
        and all(torch.equal(loaded.server[k], server[k]) for k in server)
        and loaded.clients.keys() == clients.keys()
        and all(loaded.clients[c].keys() == clients[c].keys() and all(torch.equal(loaded.clients[c][k], clients[c][k]) for k in clients[c]) for c in clients)
    )


def test_bytes_written_per_round_drop_for_unchanged_tensors_and_the_state_reloads_exactly(tmp_path, written):
    """A large server tensor unchanged between rounds (MFCL's representations) is written once; of 10 clients only the
    one trained in the round is rewritten; the checkpoint file keeps the small tensors and the parts' hashes."""
    path = tmp_path / "checkpoint.safetensors"
    representations = state(0, 4 * BIG)  # 4 MiB
    clients = {c: {"opt.momentum": state(10 + c), "seen": torch.tensor([c])} for c in range(10)}
    per_round = []
    for round_ in range(1, 5):
        server = {"reps.view1": representations, "model.w": state(100 + round_, 1000)}  # the model changes every round
        clients = {**clients, round_: {"opt.momentum": state(1000 + round_), "seen": torch.tensor([round_])}}  # one client trained
        written.clear()
        returned = save_checkpoint(path, RunState(server, dict(clients), Progress(round=round_)))
        per_round.append(sum(written))
        assert returned == per_round[-1]
        assert exact(load_checkpoint(path), server, clients)
    everything = 4 * 4 * BIG + 10 * 4 * BIG
    assert per_round[0] > everything  # the first checkpoint writes it all
    assert all(4 * BIG < n < 2 * 4 * BIG for n in per_round[1:]), per_round  # then: one client's part and the small rest
    parts = sorted(p.stem for p in blobs_path(path).glob("*.safetensors"))
    assert len(parts) == 1 + 10 + 1  # the representations, the 10 clients' current parts, the one the previous checkpoint holds
    assert len(path.read_bytes()) < 4 * BIG  # the checkpoint file itself: small tensors and names only


def test_a_tensor_changed_in_place_is_rewritten(tmp_path, written):
    path = tmp_path / "c.safetensors"
    big = state(0)
    save_checkpoint(path, RunState({"w": big}, {}, Progress()))
    written.clear()
    save_checkpoint(path, RunState({"w": big}, {}, Progress(round=1)))
    assert sum(written) < BIG  # the same tensor, untouched: not rewritten (not even hashed again)
    big.add_(1.0)  # modified in place: its version counter moves
    written.clear()
    save_checkpoint(path, RunState({"w": big}, {}, Progress(round=2)))
    assert sum(written) > 4 * BIG and torch.equal(load_checkpoint(path).server["w"], big)


def test_inference_mode_tensors_are_hashed_and_saved_too(tmp_path):
    with torch.inference_mode():
        made = state(5)
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, RunState({"w": made}, {}, Progress()))
    save_checkpoint(path, RunState({"w": made}, {}, Progress(round=1)))
    assert torch.equal(load_checkpoint(path).server["w"], made)


def test_a_damaged_or_missing_part_is_refused_and_the_previous_checkpoint_keeps_its_parts(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    first, second = state(1), state(2)
    save_checkpoint(path, RunState({"w": first}, {}, Progress(round=1)))
    save_checkpoint(path, RunState({"w": second}, {}, Progress(round=2)))
    save_checkpoint(path, RunState({"w": second}, {}, Progress(round=3)))  # the first part is named by neither: deleted
    parts = list(blobs_path(path).glob("*.safetensors"))
    assert len(parts) == 1 and torch.equal(load_checkpoint(checkpoint.previous_path(path)).server["w"], second)
    save_checkpoint(path, RunState({"w": first}, {}, Progress(round=4)))
    assert len(list(blobs_path(path).glob("*.safetensors"))) == 2  # the current one's and the previous one's
    assert torch.equal(load_checkpoint(checkpoint.previous_path(path)).server["w"], second)
    [part] = [p for p in blobs_path(path).glob("*.safetensors") if p not in parts]
    data = bytearray(part.read_bytes())
    data[-100] ^= 0xA5
    part.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"is damaged: its part 'server/w' .* does not match its hash"):
        load_checkpoint(path)
    part.unlink()
    with pytest.raises(CheckpointError, match=r"is incomplete: its part 'server/w' .* is missing"):
        load_checkpoint(path)
    assert torch.equal(load_checkpoint(checkpoint.previous_path(path)).server["w"], second)  # the previous one is intact


def test_a_checkpoint_of_format_v2_still_loads(tmp_path):
    """Everything in one file, the format before parts existed."""
    from fedprior.atomic import save_tensors

    path = tmp_path / "v2.safetensors"
    tensors = {"server/w": state(3, 10), "client/4/seen": torch.tensor([2])}
    metadata = {"format": "fedprior-checkpoint-v2", "progress": '{"stage_index": 0, "round": 7, "history": [], "initial": {}}'}
    metadata["checksum"] = checkpoint._checksum(tensors, metadata)
    save_tensors(tensors, path, metadata=metadata)
    loaded = load_checkpoint(path)
    assert loaded.progress.round == 7 and torch.equal(loaded.server["w"], tensors["server/w"]) and loaded.clients[4]["seen"].tolist() == [2]


@pytest.fixture
def every_part_apart(monkeypatch):
    """Every client state and server tensor kept in its own part, whatever its size (the tests' states are small)."""
    monkeypatch.setattr(checkpoint, "BLOB_BYTES", 0)


@pytest.mark.parametrize("checkpoint_every", [1, 3])
@pytest.mark.parametrize("stop_after", [1, 3, 5])
def test_resume_with_every_part_apart_equals_uninterrupted(tmp_path, every_part_apart, stop_after, checkpoint_every):
    from tests.runtime.test_simulation import test_resume_after_interruption_equals_uninterrupted

    test_resume_after_interruption_equals_uninterrupted(tmp_path, stop_after, checkpoint_every)
    assert list(blobs_path(tmp_path / "cut.safetensors").glob("*.safetensors")), "the parts were used"


def test_mfcl_killed_in_phase_2_resumes_exactly_with_its_representations_written_once(tmp_path, every_part_apart, written, monkeypatch):
    from fedprior.algorithms.mfcl import REPS
    from tests.algorithms.test_mfcl import test_run_killed_in_phase_2_resumes_with_the_same_numbers

    names: list[str] = []
    save = atomic.save_tensors

    def recording(tensors, path, metadata=None, durable=False):
        names.extend(k for k in tensors if REPS in k)
        return save(tensors, path, metadata, durable)

    monkeypatch.setattr(checkpoint, "save_tensors", recording)
    test_run_killed_in_phase_2_resumes_with_the_same_numbers(tmp_path)
    # each representation tensor is written when it arrives, and never again through the server epochs (nor on resume)
    assert sorted(names) == sorted({*names}) and {n.split("/")[-1] for n in names} == {REPS + "view1", REPS + "view2", REPS + "client"}


@pytest.mark.parametrize("rows", [10, BIG])
def test_states_that_share_memory_are_saved_and_reload_exactly(tmp_path, rows):
    """A server tensor that is a client's tensor (FedRep's evaluation heads), a view into another, and a transposed
    (non-contiguous) tensor are saved, inline or apart, and reload equal (safetensors refuses shared memory as such)."""
    path = tmp_path / "checkpoint.safetensors"
    head, body = state(1, rows), state(2, 2 * rows)
    server = {"eval.head": head, "half": body[:rows], "t": state(3, 64).reshape(8, 8).t()}
    clients = {0: {"head": head, "body": body}}
    save_checkpoint(path, RunState(server, clients, Progress(round=1)))
    assert exact(load_checkpoint(path), server, clients)


def test_flipped_checkpoint_bytes_are_detected_and_the_previous_checkpoint_resumes(finished_runs, tmp_path):
    run = copy(finished_runs, tmp_path, "three")
    assert (run / "checkpoint.previous.safetensors").is_file()  # the last two checkpoints are kept
    data = bytearray((run / "checkpoint.safetensors").read_bytes())
    for i in range(len(data) - 2000, len(data), 997):  # tensor data, not the header
        data[i] ^= 0xA5
    (run / "checkpoint.safetensors").write_bytes(bytes(data))
    line = error_line(invoke("resume", run))
    assert "checksum mismatch" in line
    assert f"the previous checkpoint (after 2 rounds) is intact: `fedprior resume {run} --previous`" in line
    resumed = invoke("resume", run, "--previous", "--json")
    assert history(resumed) == finished_runs["three"]  # round 3 trained again from round 2's state: the same numbers
    assert invoke("resume", run, "--json").exit_code == 0  # the damaged file was replaced


def test_no_intact_checkpoint_says_how_to_start_again(finished_runs, tmp_path):
    run = copy(finished_runs, tmp_path)
    for name in ("checkpoint.safetensors", "checkpoint.previous.safetensors"):
        (run / name).write_bytes(b"garbage")
    line = error_line(invoke("resume", run))
    assert f"no intact earlier checkpoint: start again with `fedprior run {run / 'config.toml'} --run-dir NEW_FOLDER`" in line


def test_a_checkpoint_of_the_previous_format_still_resumes_with_a_warning(finished_runs, tmp_path):
    """Checkpoints written before checksums existed (progress metadata only) load, with a warning; tensors alone do not."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from fedprior.runtime.checkpoint import CheckpointError, load_checkpoint

    path = copy(finished_runs, tmp_path) / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as handle:
        metadata, tensors = handle.metadata(), {k: handle.get_tensor(k) for k in handle.keys()}
    save_file(tensors, str(path), metadata={"progress": metadata["progress"]})
    with pytest.warns(UserWarning, match="older fedprior without a checksum"):
        assert load_checkpoint(path).progress.round == 2
    save_file(tensors, str(path))
    with pytest.raises(CheckpointError, match="lacks its metadata"):
        load_checkpoint(path)
