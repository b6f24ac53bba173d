"""MFCL's baselines: FedSimCLR (BN/GN/PN), FedSwAV, Orchestra, MOON; their equations on small hand-made tensors."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.base import Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.fedsimclr import fedsimclr
from fedprior.algorithms.moon import model_contrastive_loss, moon
from fedprior.algorithms.orchestra import OrchestraNet, global_clustering, local_clustering, orchestra, rotate
from fedprior.algorithms.pieces.contrastive import sinkhorn, swapped_prediction
from fedprior.errors import ConfigError
from fedprior.models.contrastive_net import ContrastiveNet
from fedprior.models.peer_norm import PeerNorm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=2)


def test_pn_replaces_the_norm_after_the_first_two_convolutions():
    net = ContrastiveNet(1, width=4, projection_dim=8, stem_norm="pn", group_channels=2)
    peers = [name for name, m in net.named_modules() if isinstance(m, PeerNorm)]
    assert peers == ["backbone.stem.1", "backbone.blocks.0.bn1"]  # Table 7: "after the first two Conv2D layers"
    assert isinstance(net.backbone.blocks[0].bn2, nn.BatchNorm2d)
    gn = ContrastiveNet(1, width=4, projection_dim=8, stem_norm="gn")
    assert isinstance(gn.backbone.stem[1], nn.GroupNorm) and isinstance(gn.backbone.blocks[0].bn1, nn.GroupNorm)
    assert net(torch.rand(6, 1, 8, 8)).shape == (6, 8) and net.embed(torch.rand(6, 1, 8, 8)).shape == (6, 32)


def test_fedsimclr_client_trains_and_the_server_averages_by_size():
    algorithm = fedsimclr(TASK, Runtime(1, 4), width=4, projection_dim=8, norm="pn", norm_group_channels=2)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    info = RoundInfo(0, "federated", 1)
    message = algorithm.broadcast(state, info)
    x = torch.rand(10, 1, 8, 8)
    reply, _ = algorithm.client_update(message, {}, {"x": x}, info.for_client(0))
    again, _ = algorithm.client_update(message, {}, {"x": x}, info.for_client(0))
    assert algorithm.inputs == ("x",) and reply.num_examples == 10 and reply.metrics["steps"] == 3
    assert all(torch.equal(reply.arrays[k], again.arrays[k]) for k in reply.arrays)  # seeded views and order
    changed = [k for k in reply.arrays if reply.arrays[k].is_floating_point() and not torch.equal(reply.arrays[k], state[k])]
    assert changed
    zero = {k: torch.zeros_like(v) if v.is_floating_point() else v for k, v in reply.arrays.items()}
    mean = algorithm.aggregate(state, [Reply(reply.arrays, 10, client_id=0), Reply(zero, 30, client_id=1)], info)
    k = changed[0]
    assert torch.allclose(mean[k], reply.arrays[k] * 10 / 40, atol=1e-6)
    data = {"x": torch.rand(40, 1, 8, 8), "y": torch.arange(40) % 3, "x_train": torch.rand(30, 1, 8, 8), "y_train": torch.arange(30) % 3}
    assert algorithm.evaluation_inputs == ("x_train", "y_train")  # the paper's linear evaluation trains on the training pool
    metrics = algorithm.evaluate(state, data)
    assert 0 <= metrics["accuracy"] <= 1 and len(metrics["class_accuracy"]) == 3


def test_swapped_prediction_by_hand():
    s1, s2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    q1, q2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.25, 0.75]])
    tau = 0.5
    log_p1, log_p2 = F.log_softmax(s1 / tau, 1), F.log_softmax(s2 / tau, 1)
    expected = -0.5 * ((0.25 * log_p1[0, 0] + 0.75 * log_p1[0, 1]) + (1.0 * log_p2[0, 0]))
    assert swapped_prediction(s1, s2, q1, q2, tau).item() == pytest.approx(expected.item())


def test_moon_contrastive_loss_by_hand():
    z = torch.tensor([[1.0, 0.0]])
    z_global, z_previous = torch.tensor([[1.0, 1.0]]), torch.tensor([[0.0, 1.0]])
    tau = 0.5
    positive, negative = (1 / math.sqrt(2)) / tau, 0.0 / tau
    expected = -math.log(math.exp(positive) / (math.exp(positive) + math.exp(negative)))  # MOON Eq. 2
    assert model_contrastive_loss(z, z_global, z_previous, tau).item() == pytest.approx(expected, rel=1e-6)


def test_moon_keeps_the_last_local_model_as_client_state():
    algorithm = moon(TASK, Runtime(1, 4), model="cnn", lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    data = {"x": torch.rand(8, 1, 8, 8), "y": torch.arange(8) % 3}
    info = RoundInfo(0, "federated", 1).for_client(0)
    reply, client = algorithm.client_update(algorithm.broadcast(state, info), {}, data, info)
    assert set(client) == set(reply.arrays) and all(torch.equal(client[k], reply.arrays[k]) for k in client)
    # mu = 0 is FedAvg: the same local model whatever the previous one was.
    plain = moon(TASK, Runtime(1, 4), model="cnn", lr=0.1, mu=0.0)
    first, _ = plain.client_update(plain.broadcast(state, info), {}, data, info)
    second, _ = plain.client_update(plain.broadcast(state, info), client, data, info)
    assert all(torch.equal(first.arrays[k], second.arrays[k]) for k in first.arrays)
    third, _ = algorithm.client_update(algorithm.broadcast(state, info), client, data, info)
    assert any(not torch.equal(reply.arrays[k], third.arrays[k]) for k in reply.arrays)
    with pytest.raises(ConfigError, match="algorithm.model: moon contrasts"):
        moon(Task(3, (16,), ("a", "b", "c"), 2), Runtime(1, 4), model="linear")


def test_orchestra_rotation_and_target_ema():
    images = torch.arange(2 * 9, dtype=torch.float32).view(2, 1, 3, 3)
    turned = rotate(images, torch.tensor([0, 1]))
    assert torch.equal(turned[0], images[0]) and torch.equal(turned[1], torch.rot90(images[1], 1, dims=(1, 2)))
    net = OrchestraNet(ContrastiveNet(1, 4, 8), ContrastiveNet(1, 4, 8), 5)
    assert all(torch.equal(a, b) for a, b in zip(net.online.parameters(), net.target.parameters(), strict=True))
    assert torch.allclose(net.centroids.weight.norm(dim=1), torch.ones(5))
    with torch.no_grad():
        for p in net.online.parameters():
            p.add_(1.0)
    before = [p.clone() for p in net.target.parameters()]
    net.update_target(0.9)
    assert all(torch.allclose(t, b + 0.1) for t, b in zip(net.target.parameters(), before, strict=True))


def test_orchestra_clusterings():
    g = torch.Generator().manual_seed(0)
    # Two tight groups of unit vectors: equal-size local clustering finds them.
    memory = F.normalize(
        torch.cat([torch.tensor([[1.0, 0.0]]) + 0.05 * torch.randn(6, 2, generator=g), torch.tensor([[0.0, 1.0]]) + 0.05 * torch.randn(6, 2, generator=g)]),
        dim=1,
    )
    centroids = local_clustering(memory, 2, torch.Generator().manual_seed(1))
    assert torch.allclose(centroids.norm(dim=1), torch.ones(2))
    assert sorted(centroids.argmax(1).tolist()) == [0, 1]
    # Global clustering lowers its objective, -cos(Sinkhorn codes, softmax(Z C^T / T)), and keeps the centroids unit-norm.
    local = F.normalize(torch.randn(12, 3, generator=g), dim=1)
    start = F.normalize(torch.randn(4, 3, generator=g), dim=1)

    def objective(c):
        return -F.cosine_similarity(sinkhorn(local @ c.T, 1 / 25, 100), F.softmax(local @ c.T / 0.1, dim=1), dim=-1).mean()

    fitted = global_clustering(start, local, temperature=0.1, iterations=100)
    assert torch.allclose(fitted.norm(dim=1), torch.ones(4), atol=1e-5)
    assert objective(fitted) < objective(start) - 0.05
    assert torch.equal(fitted, global_clustering(start, local, temperature=0.1, iterations=100))


def test_orchestra_setup_round_sends_only_local_centroids():
    algorithm = orchestra(TASK, Runtime(1, 4), width=4, projection_dim=8, global_clusters=4, local_clusters=2, memory=8, global_iterations=5)
    assert [(s.name, s.rounds) for s in algorithm.stages] == [("setup", 1), ("federated", None)]
    state = algorithm.init(RoundInfo(0, "setup", 0))
    info = RoundInfo(0, "setup", 1)
    reply, _ = algorithm.client_update(algorithm.broadcast(state, info), {}, {"x": torch.rand(10, 1, 8, 8)}, info.for_client(0))
    assert set(reply.arrays) == {"local_centroids"} and reply.arrays["local_centroids"].shape == (2, 8)
    new = algorithm.aggregate(state, [Reply(reply.arrays, 10, client_id=0)], info)
    changed = {k for k in state if not torch.equal(state[k], new[k])}
    assert changed == {"model.centroids.weight"}
    info = RoundInfo(0, "federated", 1)
    trained, _ = algorithm.client_update(algorithm.broadcast(new, info), {}, {"x": torch.rand(10, 1, 8, 8)}, info.for_client(0))
    assert "local_centroids" in trained.arrays and set(state) < set(trained.arrays)
    assert trained.metrics["steps"] == 3
