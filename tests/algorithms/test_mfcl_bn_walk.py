"""MFCL's BatchNorm path walked against the MFCL paper (docs/mfcl.md, "The BN path, walked"), on hand-made cases.

- phase 1: a BN sensor's running statistics travel with its weights and the server averages them by Eq. 1;
- the upload: ``encode_bn = "batch"`` normalizes a client's representations by that client's own statistics, which
  for a one-class client (Sc1) removes what tells its class from another's; ``"running"`` keeps it;
- the linear evaluation: ``linear_train = "pool"`` never reads the uploaded representations, ``"uploads"`` trains the
  dense layer on them (the server's B^s, Sec. 3's first alternative), with the labels the clients send for it.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedprior.algorithms.base import Algorithm, Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.mfcl import encoding_mode, mfcl
from fedprior.algorithms.pieces.tensors import weighted_mean

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=2)
SMALL = dict(sensor_width=4, norm_group_channels=2, disc_width=4, projection_dim=8, server_batch_size=16, server_epochs=1)


def build(**changes) -> Algorithm:
    return mfcl(TASK, Runtime(1, 4), **{**SMALL, **changes})


def one_class_client(label: int, n: int, seed: int) -> dict[str, torch.Tensor]:
    """``n`` images of class ``label``: a bright band at rows 2*label .. 2*label + 2 over noise (Sc1: one class a client)."""
    x = torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed)) * 0.3
    x[:, :, 2 * label : 2 * label + 3, :] += 0.7
    return {"x": x, "y": torch.full((n,), label)}


CLIENTS = [one_class_client(0, 12, 1), one_class_client(2, 20, 2)]
TEST = {
    "x": torch.cat([one_class_client(k, 10, 10 + k)["x"] for k in (0, 2)]),
    "y": torch.tensor([0] * 10 + [2] * 10),
    "x_train": torch.cat([c["x"] for c in CLIENTS]),
    "y_train": torch.cat([c["y"] for c in CLIENTS]),
}


def test_a_bn_sensor_sends_its_running_statistics_and_the_server_averages_them_by_eq1():
    algorithm = build(norm="bn")
    state = algorithm.init(RoundInfo(0, "sensor", 0))
    info = RoundInfo(0, "sensor", 1)
    message = algorithm.broadcast(state, info)
    replies = []
    for c, data in enumerate(CLIENTS):
        reply, _ = algorithm.client_update(message, {}, {"x": data["x"]}, info.for_client(c))
        replies.append(Reply(reply.arrays, reply.num_examples, client_id=c))
    stats = [k for k in state if k.startswith("sensor.") and k.endswith(("running_mean", "running_var"))]
    assert len(stats) == 2 * 4  # layers 2, 4, 6 and 8 of Table 5
    for k in stats:  # each client's local statistics moved away from the broadcast's, and differently
        assert not torch.allclose(replies[0].arrays[k], state[k]) and not torch.allclose(replies[0].arrays[k], replies[1].arrays[k])
    new = algorithm.aggregate(state, replies, info)
    for k in stats:  # Eq. 1: |D^m|-weighted, 12 and 20 images
        assert torch.allclose(new[k], (12 * replies[0].arrays[k] + 20 * replies[1].arrays[k]) / 32, atol=1e-6)


def test_per_client_batch_statistics_erase_a_one_class_clients_mean_and_running_ones_keep_it():
    """Sc1's mechanism on one BN layer: client A's channel is centred at 0, client B's at 5 (their classes)."""
    a = torch.randn(64, 1, 2, 2, generator=torch.Generator().manual_seed(0))
    b = torch.randn(64, 1, 2, 2, generator=torch.Generator().manual_seed(1)) + 5.0
    replies = []
    for x in (a, b):  # phase 1 on each client: its running statistics become its own (momentum None: a cumulative mean)
        bn = nn.BatchNorm2d(1, momentum=None, affine=False).train()
        bn(x)
        replies.append(dict(bn.state_dict()))
    bn = nn.BatchNorm2d(1, affine=False)
    bn.load_state_dict(weighted_mean(replies, [64, 64]))  # Eq. 1's mean of the two clients' statistics
    with torch.no_grad():
        running = [encoding_mode(bn, "running")(x).mean().item() for x in (a, b)]
        batch = [encoding_mode(bn, "batch")(x).mean().item() for x in (a, b)]
    assert running[1] - running[0] > 1.5  # the averaged statistics keep B about 5 / std above A
    assert abs(batch[0]) < 1e-5 and abs(batch[1]) < 1e-5  # each client's own statistics: both centred at 0, the gap gone


def uploaded_state(**changes) -> tuple[Algorithm, dict[str, torch.Tensor]]:
    """The state after the upload round of ``build(norm='bn', **changes)`` with the two one-class clients."""
    algorithm = build(norm="bn", **changes)
    state = algorithm.init(RoundInfo(3, "sensor", 0))
    info = RoundInfo(3, "upload", 1)
    message = algorithm.broadcast(state, info)
    fields = ("x", *algorithm.diagnostics)
    replies = []
    for c, data in enumerate(CLIENTS):
        reply, _ = algorithm.client_update(message, {}, {k: data[k] for k in fields}, info.for_client(c))
        replies.append(Reply(reply.arrays, reply.num_examples, client_id=c))
    return algorithm, algorithm.aggregate(state, replies, info)


def test_the_default_evaluation_never_reads_the_uploads():
    algorithm, state = uploaded_state()
    assert algorithm.diagnostics == () and "reps.label" not in state  # no label leaves a client
    noise = {k: torch.randn_like(state[k]) for k in ("reps.view1", "reps.view2")}
    assert algorithm.evaluate(state, TEST) == algorithm.evaluate({**state, **noise}, TEST)


def test_linear_train_uploads_trains_the_dense_layer_on_the_received_pairs_and_their_labels():
    algorithm, state = uploaded_state(linear_train="uploads")
    assert algorithm.diagnostics == ("y",)
    assert state["reps.label"].tolist() == [0] * 12 + [2] * 20  # in the order of the received rows
    scores = algorithm.evaluate(state, TEST)
    swapped = algorithm.evaluate({**state, "reps.label": 2 - state["reps.label"]}, TEST)  # class 0 <-> 2
    assert scores["class_accuracy"] != swapped["class_accuracy"]
    noise = {k: torch.randn_like(state[k]) for k in ("reps.view1", "reps.view2")}
    assert scores["class_accuracy"] != algorithm.evaluate({**state, **noise}, TEST)["class_accuracy"]  # the pairs themselves
    before_upload = algorithm.init(RoundInfo(3, "sensor", 0))  # nothing received yet: the training pool
    assert build(norm="bn").evaluate(before_upload, TEST) == algorithm.evaluate(before_upload, TEST)
