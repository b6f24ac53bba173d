"""Issue 19 item 2: no host sync inside a training loop, counted on the pretend accelerator (tests/support/pretend_device.py).

A host sync is what makes a GPU's host wait for the device: a scalar read (``.item()``,
``float()``, ``bool()``), ``nonzero`` and what calls it (boolean-mask indexing), a copy back
to the host, a blocking copy to the device (a parameter drawn on the CPU). A client update
may sync a fixed number of times (receiving the model and the data, finding the confident
images once, reading its metrics once, sending its reply); that number must not grow with
the local epochs or steps.
"""

from __future__ import annotations

import collections

import pytest
import torch

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.registry import algorithm_spec
from fedprior.data.augment import seed_from
from fedprior.data.augment.fixmatch import FixMatchAugment
from tests.support.pretend_device import DEVICE, OnDevice, PretendDevice

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4, pixel_mean=(0.5,), pixel_std=(0.25,))
INFO = RoundInfo(seed=0, stage="federated", round=1)
SMALL = {"model": "convnet", "width": 4}


def client_data(labeled: int = 12, unlabeled: int = 40) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (labeled + unlabeled,), generator=g)
    x = 0.3 * torch.randn(labeled + unlabeled, 1, 8, 8, generator=g)
    for k in range(3):
        x[y == k, :, 2 * k : 2 * k + 2, :] += 1.5
    return {"x_labeled": x[:labeled], "y_labeled": y[:labeled], "x_unlabeled": x[labeled:], "y_unlabeled": y[labeled:]}


def update_syncs(name: str, epochs: int, **values) -> tuple[list[str], dict[str, float]]:
    """The host syncs of one client update of ``name`` with ``epochs`` local epochs on the pretend device, and its metrics."""
    algorithm = algorithm_spec(name).build(TASK, {**SMALL, **values}, Runtime(epochs, 8, device=DEVICE))
    server = algorithm.init(INFO)
    message = algorithm.broadcast(server, INFO)
    with PretendDevice() as record:
        reply, _ = algorithm.client_update(message, {}, client_data(), INFO.for_client(1))
    return record.syncs, reply.metrics


CASES = {
    "feddb": ("feddb", {"threshold": 0.34}),
    "feddb-confident": ("feddb", {"threshold": 0.34, "unlabeled_mean": "confident", "appu_subset": "confident"}),
    "feddb-feddb-code": ("feddb", {"threshold": 0.34, "strong_augment": "feddb-code"}),
    "feddb-kornia-fixed": ("feddb", {"threshold": 0.34, "strong_augment": "kornia-fixed"}),
    "feddb-fallback": ("feddb", {"threshold": 1.0, "fallback_batch_size": 4}),
    "fixmatch": ("fixmatch", {"threshold": 0.34}),
    "semifl": ("semifl", {"threshold": 0.34}),
    "fedrgd": ("fedrgd", {"threshold": 0.34}),
    "fedavg-labeled": ("fedavg-labeled", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_client_update_syncs_the_same_number_of_times_with_1_and_3_local_epochs(case):
    """Augmentation drawn on the device, the confident rows found once, the masked loss, metrics read once: the count
    is a constant of the update (FedDB's loop: 1 and 3 full-batch epochs; the fallback: 3 and 9 mini-batch steps)."""
    name, values = CASES[case]
    one, metrics = update_syncs(name, 1, **values)
    three, _ = update_syncs(name, 3, **values)
    if "threshold" in values:
        assert (metrics["pl_confident"] > 0) == (values["threshold"] < 1), "the case trains the unlabeled loss as intended"
    assert len(three) == len(one), "syncs that come with the local epochs:\n" + "\n".join(
        f"{n} x {s}" for s, n in (collections.Counter(three) - collections.Counter(one)).items()
    )
    kinds = collections.Counter(s.split(" <- ")[0] for s in one)
    assert kinds["aten::nonzero"] <= 1 and kinds["tolist"] == 1 and kinds["aten::_local_scalar_dense"] == 0, kinds
    assert not any("augment" in s for s in one), "augmentation never syncs"


@pytest.mark.parametrize("name", ["fixmatch", "fedavg-labeled"])
def test_fixmatchs_own_minibatches_sync_the_same_number_of_times_with_1_and_3_steps(name):
    """Issue 44's mini-batch recipe (``labeled_batch_size`` > 0): the batches drawn on the device, each batch's pseudo-labels
    masked, the losses summed there; the count is a constant of the update whatever ``local_steps``."""
    values = {"labeled_batch_size": 4, "local_steps": 1, **({"unlabeled_ratio": 2, "threshold": 0.34} if name == "fixmatch" else {})}
    one, metrics = update_syncs(name, 1, **values)
    three, _ = update_syncs(name, 1, **{**values, "local_steps": 3})
    assert len(three) == len(one), "syncs that come with the steps:\n" + "\n".join(
        f"{n} x {s}" for s, n in (collections.Counter(three) - collections.Counter(one)).items()
    )
    kinds = collections.Counter(s.split(" <- ")[0] for s in one)
    assert kinds["tolist"] == 1 and kinds["aten::_local_scalar_dense"] == 0, kinds
    assert not any("augment" in s for s in one), "augmentation never syncs"


def fedmatch_update_syncs(epochs: int, **values) -> tuple[list[str], dict[str, float]]:
    """The host syncs of client 1's second FedMatch update on the pretend device: after a first round of clients 1 and 2
    (so that it holds an embedding and receives one helper, the other client's psi) and with its model slot built."""
    algorithm = algorithm_spec("fedmatch").build(
        TASK, {**SMALL, "threshold": 0.34, "helpers": 1, "helper_interval": 1, **values}, Runtime(epochs, 8, device=DEVICE)
    )
    second = RoundInfo(seed=0, stage="federated", round=2)
    with PretendDevice() as record:
        server = algorithm.init(INFO)
        message = algorithm.broadcast(server, INFO)
        first = [algorithm.client_update(message, {}, client_data(), INFO.for_client(k)) for k in (1, 2)]
        server = algorithm.aggregate(server, [reply for reply, _ in first], INFO)
        message = algorithm.broadcast(server, second)
        assert any(k.startswith("helpers.") for k in message.arrays), "the update receives helpers"
        before = len(record.syncs)
        reply, _ = algorithm.client_update(message, first[0][1], client_data(), second.for_client(1))
    return record.syncs[before:], reply.metrics


@pytest.mark.parametrize("batch_size", [4, 0])
def test_a_fedmatch_update_syncs_the_same_number_of_times_with_1_and_3_local_epochs(batch_size):
    """FedMatch's mini-batch loop (3 steps an epoch with batches of 4 labeled images; 0: FedDB's full-batch loop) with
    helpers: the confident images of each batch masked, metrics summed on the device, the upload cut on the device. What
    remains is fixed per update: receiving the model and the data, the helpers' choice, the one nonzero of the labels
    fixed per round, the embedding and the lr decay's loss read, the metrics."""
    one, metrics = fedmatch_update_syncs(1, labeled_batch_size=batch_size)
    three, _ = fedmatch_update_syncs(3, labeled_batch_size=batch_size)
    assert metrics["pl_confident"] > 0
    assert len(three) == len(one), "syncs that come with the local epochs:\n" + "\n".join(
        f"{n} x {s}" for s, n in (collections.Counter(three) - collections.Counter(one)).items()
    )
    assert not any("fedmatch_local" in s or "augment" in s for s in one), one
    assert not any(s.startswith("copy device -> host") and "fedmatch.py" in s and "embedding" not in s for s in one), one


def test_the_views_draw_every_parameter_on_the_device_without_a_sync():
    """Weak and strong views (every recipe) of device images from the client's CPU stream: no sync; the parameters come
    from a generator on the device seeded from the stream (on the pretend device a CPU one, so the numbers can be checked)."""
    x = torch.randn(12, 3, 8, 8, generator=torch.Generator().manual_seed(0))

    def derived() -> torch.Generator:  # what device_generator makes on a device from the stream seeded with 1
        return torch.Generator().manual_seed(seed_from(torch.Generator().manual_seed(1)))

    for recipe in ("fixmatch", "feddb-code", "kornia-fixed"):
        augment = FixMatchAugment((0.5, 0.4, 0.3), (0.2, 0.2, 0.2), strong_augment=recipe)
        expected = [augment.weak(x, derived()), augment.strong(x, derived())]
        with PretendDevice() as record:
            on_device = [augment.weak(x.to(DEVICE), torch.Generator().manual_seed(1)), augment.strong(x.to(DEVICE), torch.Generator().manual_seed(1))]
        assert all(isinstance(v, OnDevice) for v in on_device)
        assert [s for s in record.syncs if "augment" in s] == [], record.syncs
        assert all(torch.equal(v.elem, e) for v, e in zip(on_device, expected, strict=True))


def cgde_cycle_syncs(steps: int, augment: bool) -> list[str]:
    """The host syncs of one CGDE cycle (FedBM's server-side generator training, Eq. 10) of ``steps`` steps on the pretend device."""
    from torch import nn

    from fedprior.algorithms.pieces.cgde import GeneratorTraining, concept_conditions, train_generator
    from fedprior.models.generator import ConditionalGenerator

    torch.manual_seed(0)
    factor = torch.randn(3, 5, 5)
    conditions = concept_conditions(torch.randn(3, 5), factor @ factor.transpose(1, 2) / 5)
    teacher = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
    generator = ConditionalGenerator(5, 1, 4, width=4)
    with PretendDevice() as record:
        teacher, generator, on_device = teacher.to(DEVICE), generator.to(DEVICE), conditions.to(DEVICE)
        adam = torch.optim.Adam(generator.parameters(), lr=1e-3)
        before = len(record.syncs)
        train_generator(
            generator,
            teacher,
            lambda model, x, y: torch.nn.functional.cross_entropy(model(x), y),
            on_device,
            3,
            GeneratorTraining(steps=steps, batch_size=12, augment=augment),
            lambda x: x,
            torch.Generator().manual_seed(1),
            adam,
        )
    return record.syncs[before:]


@pytest.mark.parametrize("augment", [False, True])
def test_a_cgde_cycle_syncs_the_same_number_of_times_whatever_its_steps(augment):
    """Conditions in one product, L_div by cdist and a class mask, labels and noise drawn per cycle, losses read once,
    G's images cropped and flipped with parameters drawn on the device: a cycle's syncs do not grow with its steps
    (3: two uploads of the draws, one read), with or without the crop and flip."""
    one, three = cgde_cycle_syncs(1, augment=augment), cgde_cycle_syncs(3, augment=augment)
    assert len(one) == len(three) == 3, three
    kinds = collections.Counter(s.split(" <- ")[0] for s in three)
    assert kinds == {"blocking copy host -> device": 2, "tolist": 1}, kinds
    assert not any("augment" in s for s in three), three


def labeled_data() -> dict[str, torch.Tensor]:
    """The toy client's 52 images, all labelled (7 mini-batches of 8 an epoch)."""
    data = client_data()
    return {"x": torch.cat([data["x_labeled"], data["x_unlabeled"]]), "y": torch.cat([data["y_labeled"], data["y_unlabeled"]])}


def trained_generator(state: dict) -> dict:
    """FedBM's server state as after a CGDE cycle: the generator is broadcast, so the clients add its images to their batches."""
    return {**state, "cgde.trained": torch.tensor(1)}


def two_prototypes(state: dict) -> dict:
    """FedProto's server state with global prototypes for classes 0 and 2, none for class 1: batches mix rows with and without one."""
    prototypes = torch.randn(3, state["prototypes"].shape[1], generator=torch.Generator().manual_seed(0))
    return {**state, "prototypes": prototypes, "prototype_present": torch.tensor([True, False, True])}


FEDBM_TOY = {"model": "convnet-small", "generator_width": 4, "synthetic_batch": 4}
UPDATES = {
    "fedbm": ("fedbm", FEDBM_TOY, trained_generator),  # G's images cropped and flipped, one draw per batch (the code)
    "fedbm-per-image": ("fedbm", {**FEDBM_TOY, "synthetic_augment": "per-image"}, trained_generator),
    "fedbm-no-augment": ("fedbm", {**FEDBM_TOY, "augment_synthetic": False}, trained_generator),
    "fedproto": ("fedproto", {"model": "convnet-small"}, two_prototypes),
    "moon": ("moon", {"model": "cnn"}, lambda state: state),
}
"""Supervised client updates with something of their own in each step: FedBM's synthetic batch (its labels, conditions and
crop-and-flip seeds drawn from the client's CPU stream), FedProto's distance to the prototypes of the rows that have one, MOON's
previous model."""


def second_update_syncs(name: str, epochs: int, values: dict, server) -> tuple[list[str], dict[str, float]]:
    """The host syncs of a client's second update (its state from the first: MOON's previous model, FedProto's own model;
    the resident models filled) with ``epochs`` local epochs of 7 mini-batches on the pretend device, and its metrics."""
    algorithm = algorithm_spec(name).build(TASK, values, Runtime(epochs, 8, device=DEVICE))
    message = algorithm.broadcast(server(algorithm.init(INFO)), INFO)
    with PretendDevice() as record:
        _, state = algorithm.client_update(message, {}, labeled_data(), INFO.for_client(1))
        first = len(record.syncs)
        reply, _ = algorithm.client_update(message, state, labeled_data(), INFO.for_client(1))
    return record.syncs[first:], reply.metrics


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_a_supervised_update_syncs_the_same_number_of_times_with_1_and_3_local_epochs(case):
    """FedBM draws every step's synthetic labels, noise and crop-and-flip seeds before the first step and uploads them once
    (the crop and flip then draw on the device); FedProto's prototype distance is a masked mean (no ``any()`` read, no
    selection); every epoch's batch order goes to the device in one copy; the loss is read once: the count is a constant of
    the update (7 and 21 local steps). Before issue 19 item 2 reached them (this toy, 1 / 3 epochs): FedBM 48 / 78, FedProto
    37 / 95, MOON 36 / 38; now 36, 9 and 36 (most of FedBM's and MOON's are the host-made broadcast copied in)."""
    name, values, server = UPDATES[case]
    one, metrics = second_update_syncs(name, 1, values, server)
    three, _ = second_update_syncs(name, 3, values, server)
    assert metrics["steps"] == 7
    assert len(three) == len(one), "syncs that come with the local epochs:\n" + "\n".join(
        f"{n} x {s}" for s, n in (collections.Counter(three) - collections.Counter(one)).items()
    )
    kinds = collections.Counter(s.split(" <- ")[0] for s in one)
    assert kinds["aten::_local_scalar_dense"] == 1 and kinds["aten::nonzero"] == 0 and kinds["aten::index with a boolean mask"] == 0, kinds
    if name == "fedbm":  # the synthetic batches' labels and noise: one upload each for the whole update
        assert sum("draw_batches" in s for s in one) == 2 and not any("with_synthetic" in s or "synthesize" in s for s in one), one


def test_the_synthetic_batches_drawn_before_the_steps_are_those_drawn_at_each_step():
    """FedBM's client draws (draw_batches): per step labels, noise and a crop-and-flip seed from the client's stream, in the
    order a step-by-step loop draws them, so the CPU numbers are those of drawing at each step."""
    from fedprior.algorithms.pieces.cgde import concept_conditions, draw_batches

    factor = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(2))
    conditions = concept_conditions(torch.randn(3, 5, generator=torch.Generator().manual_seed(3)), factor @ factor.transpose(1, 2) / 5)
    draws = draw_batches(conditions, 3, 4, 5, torch.Generator().manual_seed(1), torch.device("cpu"))
    step_by_step = torch.Generator().manual_seed(1)
    for step in range(5):
        labels = torch.randint(0, 3, (4,), generator=step_by_step)
        assert torch.equal(draws.labels[step], labels)
        assert torch.equal(conditions.from_noise(labels, draws.noise[step]), conditions.sample(labels, step_by_step))
        assert draws.seeds[step] == seed_from(step_by_step)
    assert draw_batches(conditions, 3, 4, 0, step_by_step, torch.device("cpu")).noise.shape == (0, 4, 5)


def test_the_counter_sees_each_kind_of_host_sync():
    with PretendDevice() as record:
        x = torch.arange(6.0).to(DEVICE)  # a blocking copy to the device
        mask = x > 2
        float(x.sum())  # a scalar read
        x[mask]  # boolean-mask indexing
        mask.nonzero()
        x.cpu()  # a copy back
        x.tolist()
        torch.where(mask, x, torch.zeros_like(x)).sum()  # none of these
        torch.rand(3, device=DEVICE, generator=torch.Generator(device=DEVICE))
    kinds = [s.split(" <- ")[0] for s in record.syncs]
    assert kinds == [
        "blocking copy host -> device",
        "aten::_local_scalar_dense",
        "aten::index with a boolean mask",
        "aten::nonzero",
        "copy device -> host",
        "tolist",
    ]


SELF_SUPERVISED = {
    "mfcl": ("mfcl", "sensor", {"sensor_width": 4}),
    "fedsimclr": ("fedsimclr", "federated", {"width": 4, "projection_dim": 8}),
    "fedswav": ("fedswav", "federated", {"width": 4, "projection_dim": 8, "prototypes": 6}),
    "orchestra": ("orchestra", "federated", {"width": 4, "projection_dim": 8, "global_clusters": 8, "local_clusters": 4, "memory": 16}),
}


def two_view_update_syncs(case: str, epochs: int, batch_size: int) -> tuple[list[str], dict[str, torch.Tensor]]:
    """The host syncs of a client update of a self-supervised algorithm on 24 images, with the broadcast on the device and
    the resident model built (as in any round after the first: the update before it is not counted), and its reply."""
    name, stage, values = SELF_SUPERVISED[case]
    algorithm = algorithm_spec(name).build(TASK, values, Runtime(epochs, batch_size, device=DEVICE))
    info = RoundInfo(seed=0, stage=stage, round=1)
    message = algorithm.broadcast(algorithm.init(info), info)
    images = torch.rand(24, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with PretendDevice() as record:
        data = {"x": images.to(DEVICE)}
        reply, _ = algorithm.client_update(message, {}, data, info.for_client(0))
        on_device = type(message)({k: v.to(DEVICE) for k, v in reply.arrays.items() if k in message.arrays})  # the next round's broadcast
        assert on_device.arrays.keys() == message.arrays.keys()
        before = len(record.syncs)
        reply, _ = algorithm.client_update(on_device, {}, data, info.for_client(1))
    return record.syncs[before:], reply.arrays


@pytest.mark.parametrize("case", sorted(SELF_SUPERVISED))
def test_a_self_supervised_client_update_syncs_the_same_number_of_times_whatever_its_steps(case):
    """The two-view epochs (MFCL's sensor, FedSimCLR, FedSwAV, Orchestra): the model received in place, the batch orders
    (and Orchestra's rotations) drawn before the first step and copied at once, the losses read once: 1 and 3 steps sync
    alike. Each further epoch adds only its SimCLR views' copies (kornia draws their parameters on the host)."""
    (one, reply), (three, _) = two_view_update_syncs(case, 1, 24), two_view_update_syncs(case, 1, 8)
    assert all(isinstance(v, OnDevice) for v in reply.values()), "the reply stays on the device (the server averages it there)"
    assert len(one) == len(three), "syncs that come with the steps:\n" + "\n".join(
        f"{n} x {s}" for s, n in (collections.Counter(three) - collections.Counter(one)).items()
    )
    kinds = collections.Counter(s.split(" <- ")[0] for s in one)
    assert kinds["tolist"] == 1 and kinds["aten::_local_scalar_dense"] == 0 and kinds["copy device -> host"] == 0, kinds
    grown = collections.Counter(two_view_update_syncs(case, 3, 8)[0]) - collections.Counter(three)
    assert grown and all("simclr_views" in s for s in grown), grown


def server_epoch_syncs(steps: int) -> tuple[list[str], dict[str, torch.Tensor]]:
    """The host syncs of MFCL's second server epoch over 48 representation pairs in ``steps`` batches (the first epoch
    receives the State onto the device and is not counted), and the State after it."""
    values = {"sensor_width": 4, "disc_width": 4, "projection_dim": 8, "server_batch_size": 48 // steps}
    algorithm = algorithm_spec("mfcl").build(TASK, values, Runtime(1, 8, device=DEVICE))
    state = algorithm.init(INFO)
    g = torch.Generator().manual_seed(0)
    reps = {f"reps.view{j}": torch.randn(48, 4, 4, 4, generator=g) for j in (1, 2)}
    with PretendDevice() as record:
        state = {**state, **{k: v.to(DEVICE) for k, v in reps.items()}, "reps.client": torch.zeros(48, dtype=torch.int64)}
        state = algorithm.aggregate(state, [], RoundInfo(seed=0, stage="server", round=1))
        before = len(record.syncs)
        state = algorithm.aggregate(state, [], RoundInfo(seed=0, stage="server", round=2))
    return record.syncs[before:], state


def test_an_mfcl_server_epoch_syncs_once_whatever_its_steps():
    """MFCL's phase 2 on the device: the discriminator received in place, its Adam moments and the representations kept
    there, each batch gathered there, the loss summed there: one sync per epoch (the epoch's order, drawn on the host from
    its stream and copied once), with 1 step as with 3 (before issue 19: 357 and 363, a gather, a copy and a read per step)."""
    one, _ = server_epoch_syncs(1)
    three, state = server_epoch_syncs(3)
    assert len(one) == len(three) == 1 and one[0].startswith("blocking copy host -> device") and "train_discriminator" in one[0], three
    kept = [k for k in state if k.startswith(("reps.view", "disc.", "proj.", "opt.", "server.")) and not k.endswith(":step")]
    assert kept and all(isinstance(state[k], OnDevice) for k in kept), [k for k in kept if not isinstance(state[k], OnDevice)]
