"""Issue 19 item 1: data and state resident on the run's device, counted on the pretend accelerator (tests/support/pretend_device.py).

The training and test sets go to the device once per run, each client's data is gathered there by its
indices (cached on the device), the test set is not uploaded per evaluation, and the copies between host
and device per round are a constant of the round (the model in and out of each client update, the
shuffled order of each epoch, the evaluation's metrics), not a function of the data's size.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedprior.algorithms.pieces.linear_eval import linear_evaluation
from fedprior.data.standardize import PixelStandardizer
from fedprior.experiments.build import build_experiment
from fedprior.experiments.client_side import build_algorithm
from fedprior.experiments.config import load_config
from fedprior.experiments.resident import as_pixels, pixel_table, standardized
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.algorithm_setups import SETUPS, SMALL
from tests.support.pretend_device import DEVICE, OnDevice, PretendDevice, where


class CopyLog(TorchDispatchMode):
    """The shapes of the tensors copied host -> device and device -> host (inside PretendDevice)."""

    def __init__(self) -> None:
        super().__init__()
        self.up: list[tuple[int, ...]] = []
        self.down: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name == "aten::_to_copy" and kwargs.get("device") is not None:
            source, target = where(args[0]), "device" if torch.device(kwargs["device"]) == DEVICE else "cpu"
            self.log(source, target, args[0])
        elif name == "aten::copy_":
            self.log(where(args[1]), where(args[0]), args[1])
        return func(*args, **kwargs)

    def log(self, source: str, target: str, tensor: torch.Tensor) -> None:
        if (source, target) == ("cpu", "device"):
            self.up.append(tuple(tensor.shape))
        elif (source, target) == ("device", "cpu"):
            self.down.append(tuple(tensor.shape))


def run(name: str, rounds: int, extra: tuple[str, ...] = ()) -> tuple[CopyLog, list[str], tuple[int, ...], dict]:
    """``rounds`` rounds of ``name`` (2 of 8 clients a round, unless ``extra`` overrides say otherwise) on the pretend device with the
    run's resident inputs: the copies, the syncs, the input shape and the final server state."""
    preset, overrides = SETUPS[name]
    config_name, config = load_config(preset, [*overrides, *SMALL, "federation.local_epochs=1", *extra])
    experiment = build_experiment(config_name, config)
    with PretendDevice() as record:
        algorithm = build_algorithm(experiment.config, experiment.task, DEVICE)
        client_data, test = experiment.resident_inputs(DEVICE)
        assert all(isinstance(v, OnDevice) for v in (*client_data.train.values(), *test.values()))
        with CopyLog() as copies:
            result = simulate(
                algorithm, client_data, experiment.task.num_clients, test, RoundLoop(seed=0, rounds=rounds, fraction=experiment.config.federation.fraction)
            )
    return copies, record.syncs, experiment.task.input_shape, result.state


@pytest.mark.parametrize("name", ["fedavg", "feddb"])
def test_images_cross_to_the_device_once_per_run_and_copies_per_round_are_a_constant(one_torch_thread, name):
    two, syncs_two, shape, _ = run(name, 2)
    four, syncs_four, _, _ = run(name, 4)
    images = lambda shapes: [s for s in shapes if s[1:] == shape]  # noqa: E731
    # the training and test images, uploaded before the first round (resident_inputs ran outside the log): never again
    assert images(two.up) == images(four.up) == [], images(four.up)
    assert images(two.down) == images(four.down) == []
    # whatever else crosses (the model in and out of each update, an epoch's order, metrics) is the same each round
    per_round_up, per_round_down = (len(four.up) - len(two.up)) / 2, (len(four.down) - len(two.down)) / 2
    assert len(two.up) - 2 * per_round_up == len(four.up) - 4 * per_round_up
    assert len(two.down) - 2 * per_round_down == len(four.down) - 4 * per_round_down
    assert (len(syncs_four) - len(syncs_two)) % 2 == 0


EVERY_CLIENT = ("federation.fraction=1.0",)
"""All 8 clients in every round: the client states that end on the host are the same after 2 rounds as after 4."""

PER_ROUND = {
    **{name: (8, 3) for name in ("fedavg", "scaffold", "moon", "feddyn", "fedrod", "fednh", "fedetf")},
    "fedrep": (16, 24),
    "fedproto": (8, 24),
    "fedbm": (26, 3),
}
"""Copies (up, down) per round of 8 clients, measured (before the body_training algorithms and SCAFFOLD kept their models and
state on the device: scaffold 272 / 259, feddyn 980 / 251, fedbm 676 / 284, fedproto 608 / 536; before MOON received its previous
model into a resident one: moon 72 / 67; before FedBM drew its clients' synthetic batches ahead of their steps: fedbm 82 / 3, and
348 / 3 with kornia's crop and flip). Up: each update's epoch orders (drawn on the client's CPU stream, all epochs in one copy;
FedREP has two phases); FedBM adds, per client update, its synthetic batches' labels and noise (one copy each for all the
steps), and its generator training's (2). Down: the evaluation's logits and labels (FedREP and FedProto evaluate each of the
round's 8 personal models)."""


@pytest.mark.parametrize("name", sorted(PER_ROUND))
def test_after_the_first_round_no_weight_or_state_crosses_between_host_and_device(one_torch_thread, name):
    """Issue 19 item 1: the broadcast is copied into resident models, the replies and the client and server states (SCAFFOLD's
    control variates, FedDyn's gradients and h, FedREP's and FedROD's heads, FedProto's models and prototypes, FedBM's generator)
    stay on the device: rounds 3 and 4 copy no tensor of a weight's shape either way, and at most the measured count of others."""
    (two, _, _, _), (four, _, _, state) = run(name, 2, EVERY_CLIENT), run(name, 4, EVERY_CLIENT)
    up, down = collections.Counter(four.up) - collections.Counter(two.up), collections.Counter(four.down) - collections.Counter(two.down)
    weights = {tuple(v.shape) for v in state.values() if v.ndim >= 2}
    assert not weights & (up.keys() | down.keys()), (weights & up.keys(), weights & down.keys())
    assert sum(up.values()) <= 2 * PER_ROUND[name][0] and sum(down.values()) <= 2 * PER_ROUND[name][1], (sum(up.values()), sum(down.values()))


def test_a_client_is_gathered_on_the_device_from_cached_indices_with_the_cpu_numbers():
    preset, overrides = SETUPS["feddb"]
    config_name, config = load_config(preset, [*overrides, *SMALL])
    experiment = build_experiment(config_name, config)
    on_cpu, _ = experiment.resident_inputs()
    with PretendDevice():
        resident, _ = experiment.resident_inputs(DEVICE)
        with CopyLog() as copies:
            first = resident(3)
            again = resident(3)
    assert copies.up == [(len(experiment.partition.client(3)[role]),) for role in experiment.partition.client(3)]  # the row indices, once
    for data in (first, again):
        assert data.keys() == experiment.client_data(3).keys()
        for key, value in data.items():
            assert isinstance(value, OnDevice) and torch.equal(value.elem, experiment.client_data(3)[key]) and torch.equal(on_cpu(3)[key], value.elem)


def test_images_are_kept_on_the_device_as_uint8_pixels_and_standardized_when_gathered_to_the_cpu_numbers():
    preset, overrides = SETUPS["feddb"]
    config_name, config = load_config(preset, [*overrides, *SMALL])
    experiment = build_experiment(config_name, config)
    with PretendDevice():
        resident, _ = experiment.resident_inputs(DEVICE)
        data = resident(2)
    assert resident.train["x"].dtype == torch.uint8 and resident.train["x"].shape == experiment.train["x"].shape  # a quarter of float32's bytes
    assert {"x_labeled", "x_unlabeled"} <= data.keys()
    for key, value in experiment.client_data(2).items():
        assert data[key].dtype == value.dtype and torch.equal(data[key].elem, value), key  # float32 images, the same to the bit


def test_inputs_not_made_from_uint8_pixels_stay_float32_on_the_device():
    standardizer = PixelStandardizer((0.5,), (0.25,))
    pixels = torch.randint(0, 256, (5, 1, 3, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    images = standardizer.pixels(pixels.numpy())
    assert torch.equal(standardized(pixels, pixel_table(standardizer)), images)
    assert torch.equal(as_pixels(images, standardizer), pixels)
    assert as_pixels(images + 1e-3, standardizer) is None  # not on the uint8 grid
    assert as_pixels(images, PixelStandardizer()) is None and as_pixels(images.flatten(1), standardizer) is None  # no statistics; features


def test_the_2_fold_linear_evaluation_fits_on_the_device_with_the_cpu_numbers():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(60) % 4
    x = torch.randn(60, 6, generator=g) + torch.nn.functional.one_hot(y, 6).float() * 2
    on_cpu = linear_evaluation(x, y, 4)
    with PretendDevice() as record:
        on_device = linear_evaluation(x.to(DEVICE), y, 4, device=DEVICE)
    assert record.ran_on_the_cpu() == [] and any(where == "device" for _, where in record.compute)
    assert on_device == on_cpu
    kinds = collections.Counter(s.split(" <- ")[0] for s in record.syncs)
    assert kinds["aten::nonzero"] == 0 and kinds["aten::index with a boolean mask"] == 0, kinds


def two_rounds(name: str, rebuild: bool, monkeypatch, extra: tuple[str, ...] = ()) -> tuple[list, dict, dict, int]:
    """Two rounds of ``name`` on the pretend device (states, history, the number of models built), rebuilding the model
    in every client update and evaluation (``rebuild``) or receiving the broadcast into the resident one."""
    from fedprior.algorithms.engines.supervised import GlobalModel

    preset, overrides = SETUPS[name]
    config_name, config = load_config(preset, [*overrides, *SMALL, "federation.local_epochs=1", *extra])
    experiment = build_experiment(config_name, config)
    built = []
    load = GlobalModel.load
    monkeypatch.setattr(GlobalModel, "load", lambda self, arrays: built.append(1) or load(self, arrays))
    if rebuild:
        monkeypatch.setattr(GlobalModel, "receive", lambda self, arrays, slot="local": self.load(arrays))
    with PretendDevice():
        algorithm = build_algorithm(experiment.config, experiment.task, DEVICE)
        client_data, test = experiment.resident_inputs(DEVICE)
        result = simulate(
            algorithm, client_data, experiment.task.num_clients, test, RoundLoop(seed=0, rounds=2, fraction=experiment.config.federation.fraction)
        )
    monkeypatch.undo()
    history = [{k: v for k, v in r.items() if k != "seconds"} for r in result.progress.history]
    return history, result.state, result.client_states, len(built)


def unwrapped_state(state: dict) -> dict:
    return {k: v.elem if isinstance(v, OnDevice) else v for k, v in state.items()}


BODY_TRAINING = ("fedbm", "feddyn", "fedrep", "fedrod", "fednh", "fedproto", "fedetf")
"""FedBM and the baselines of its tables (engines/body_training.py): a ConvNet with BatchNorm."""

RESIDENT_CASES = {
    **{name: (name, ()) for name in ("fedavg", "fedprox", "moon", "central", "feddb", "fixmatch", "semifl", "fedrgd", "fedmatch", "fedavg-labeled")},
    "feddb-bn": ("feddb", ("algorithm.norm=bn",)),  # BatchNorm's running statistics and batch counter received too
    **{name: (name, ()) for name in ("scaffold", *BODY_TRAINING)},
    "fedbm-adam-kept": ("fedbm", ("algorithm.adam_state=kept",)),  # CGDE's Adam moments in the server state
    "moon-every-client": ("moon", ("federation.fraction=1.0",)),  # round 2: every client's previous model received as z_prev's
    **{name: (name, ()) for name in ("fedsimclr", "fedswav", "orchestra")},  # the self-supervised engine (Orchestra: its setup stage too)
    "mfcl": ("mfcl", ("algorithm.server_epochs=2",)),  # MFCL's three stages; the second server epoch receives its state and Adam's
    "mfcl-bn-batch": ("mfcl", ("algorithm.norm=bn", "algorithm.encode_bn=batch")),  # BN encoding with its batches' statistics
}
SLOTS = {"fedbm": 5, "fedbm-adam-kept": 5, "mfcl": 5, "mfcl-bn-batch": 5, "moon": 4, "moon-every-client": 4}
"""Resident models of a case beyond 3: FedBM's local model, teacher and evaluated model, and a client's and the server's G;
MFCL's sensor, its encoder for the upload and the evaluation, the discriminator for training and evaluation; MOON's local,
global, previous and evaluated model."""


@pytest.mark.parametrize("case", sorted(RESIDENT_CASES))
def test_the_resident_model_trains_as_a_rebuilt_one_bit_for_bit(one_torch_thread, monkeypatch, case):
    """Issue 19 item 1b: on the device one model per slot receives the broadcast by in-place copies (weights and BatchNorm
    buffers), with the gradients, requires_grad flags and modes of a fresh build; 2 rounds give the numbers, the server
    state and the client states (FedDB's momentum) of the rebuilding path, bit for bit. On the pretend device a draw "on
    the device" comes from the CPU generator that a rebuild's init draws from, so equality here also shows that nothing
    in these updates draws from an unseeded global generator after building the model."""
    name, extra = RESIDENT_CASES[case]
    rebuilt, resident = two_rounds(name, True, monkeypatch, extra), two_rounds(name, False, monkeypatch, extra)
    assert rebuilt[0] == resident[0]
    for a, b in ((rebuilt[1], resident[1]), *zip(rebuilt[2].values(), resident[2].values(), strict=True)):
        a, b = unwrapped_state(a), unwrapped_state(b)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert rebuilt[2].keys() == resident[2].keys()
    assert resident[3] < rebuilt[3] and resident[3] <= SLOTS.get(case, 3), (resident[3], rebuilt[3])  # one model per slot, not one per update


def on_the_host(algorithm):
    """``algorithm`` whose client updates hand back host tensors (the contract before issue 19 item 1c)."""
    from fedprior.algorithms.base import Reply
    from fedprior.algorithms.pieces.tensors import to_cpu

    def client_update(message, state, data, info):
        reply, new_state = algorithm.client_update(message, state, data, info)
        return Reply(to_cpu(reply.arrays), reply.num_examples, reply.metrics, reply.client_id), to_cpu(new_state)

    def client_update_many(message, states, datas, infos):
        out = algorithm.client_update_many(message, states, datas, infos)
        return [(Reply(to_cpu(r.arrays), r.num_examples, r.metrics, r.client_id), to_cpu(s)) for r, s in out]

    many = client_update_many if algorithm.client_update_many is not None else None
    return algorithm.with_(client_update=client_update, client_update_many=many)


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_two_rounds_with_states_on_the_device_checkpoint_and_resume_with_the_numbers_of_host_states(shared_cache, one_torch_thread, tmp_path, name):
    """Issue 19 item 1c: replies and client optimizer state stay where the update made them (the run's device); every
    algorithm's aggregation and next round take them there, the checkpoint copies them to the host, and a resume from the
    checkpoint before the last round ends as the run did. The numbers are those of the same run whose updates hand back
    host tensors, and the run's result is on the host."""
    from fedprior.runtime.checkpoint import load_checkpoint, previous_path

    preset, overrides = SETUPS[name]
    config_name, config = load_config(preset, [*overrides, *SMALL, "federation.local_epochs=1"])
    experiment = build_experiment(config_name, config)
    loop = RoundLoop(seed=0, rounds=2, fraction=experiment.config.federation.fraction)

    def run(path, start=None, host=False):
        algorithm = build_algorithm(experiment.config, experiment.task, DEVICE)
        client_data, test = experiment.resident_inputs(DEVICE)
        result = simulate(
            on_the_host(algorithm) if host else algorithm, client_data, experiment.task.num_clients, test, loop, checkpoint_path=path, start=start
        )
        return [{k: v for k, v in r.items() if k != "seconds"} for r in result.progress.history], result.state, result.client_states

    with PretendDevice():
        host = run(tmp_path / "host.safetensors", host=True)
        whole = run(tmp_path / "whole.safetensors")
        before_last = previous_path(tmp_path / "whole.safetensors")  # absent where the run has one round in all
        resumed = run(tmp_path / "resumed.safetensors", start=load_checkpoint(before_last if before_last.is_file() else tmp_path / "whole.safetensors"))
    assert whole[0] == host[0] == resumed[0]
    for run_ in (whole, resumed):
        for mine, theirs in [(run_[1], host[1]), *((run_[2][c], host[2][c]) for c in host[2])]:
            assert mine.keys() == theirs.keys()
            assert all(type(v) is torch.Tensor and v.device.type == "cpu" and torch.equal(v, theirs[k]) for k, v in mine.items())


def test_a_checkpoint_copies_each_changed_device_tensor_to_the_host_once(tmp_path, monkeypatch):
    """States on the device reach the checkpoint by one host copy per tensor not written before (hashed and written
    from that copy); a second save of unchanged tensors copies nothing; loading gives the values on the host."""
    from fedprior.runtime import checkpoint
    from fedprior.runtime.checkpoint import Progress, RunState, load_checkpoint, save_checkpoint

    # pretend-device tensors have no storage (every pointer reads 0), which _unshared would take for aliasing; these do not alias
    monkeypatch.setattr(checkpoint, "_unshared", lambda tensors: tensors)

    g = torch.Generator().manual_seed(0)
    server = {"model.w": torch.randn(64, 64, generator=g), "model.b": torch.randn(64, generator=g)}
    client = {"opt.w:momentum_buffer": torch.randn(64, 64, generator=g)}
    path = tmp_path / "run.safetensors"
    with PretendDevice():
        on_device = RunState({k: v.to(DEVICE) for k, v in server.items()}, {3: {k: v.to(DEVICE) for k, v in client.items()}}, Progress(), {})
        with CopyLog() as first:
            save_checkpoint(path, on_device, blob_bytes=0)
        with CopyLog() as second:
            save_checkpoint(path, on_device, blob_bytes=0)
    assert sorted(first.down) == sorted([(64,), (64, 64), (64, 64)]) and second.down == []
    loaded = load_checkpoint(path)
    assert all(torch.equal(loaded.server[k], v) for k, v in server.items()) and torch.equal(
        loaded.clients[3]["opt.w:momentum_buffer"], client["opt.w:momentum_buffer"]
    )
