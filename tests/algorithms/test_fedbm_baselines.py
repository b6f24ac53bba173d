"""FedBM's baselines: each one's distinctive step on a hand-made case.

FedNH's prototype update, FedETF's simplex classifier, FedROD's two heads, FedREP's
body/head split, FedDyn's correction term, FedProto's prototype aggregation and
nearest-prototype inference; Central Learning is a centralized spec.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.base import ClientInfo, RoundInfo, Runtime, Task
from fedprior.algorithms.feddyn import dynamic_loss, server_update
from fedprior.algorithms.fedetf import simplex_etf
from fedprior.algorithms.fednh import fednh, update_prototypes
from fedprior.algorithms.fedproto import aggregate_prototypes, fedproto, nearest_prototype_logits, prototype_loss
from fedprior.algorithms.fedrep import fedrep, set_trainable
from fedprior.algorithms.fedrod import TwoHeads, fedrod
from fedprior.algorithms.pieces.class_balance import balanced_softmax_loss
from fedprior.algorithms.pieces.personal import mean_metrics
from fedprior.algorithms.registry import ALGORITHMS
from fedprior.errors import ConfigError
from fedprior.models.convnet import ConvNet
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
RUNTIME = Runtime(1, 8)
INFO = ClientInfo(0, "federated", 1, client_id=2)


def test_fednh_infuses_class_means_into_the_prototypes():
    prototypes = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    means = [torch.tensor([[0.0, 2.0], [0.0, 0.0], [0.0, -3.0]]), torch.tensor([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]])]
    counts = [torch.tensor([2.0, 0.0, 1.0]), torch.tensor([1.0, 0.0, 0.0])]
    new = update_prototypes(prototypes, means, counts, rho=0.5)
    # class 0: normalize(0.5 (1,0) + 0.5 normalize((0,2)+(2,0))/2); class 1: nobody holds it; class 2: normalize(0.5(-1,0) + 0.5(0,-1))
    assert torch.allclose(new[0], torch.tensor([0.92388, 0.38268]), atol=1e-5)
    assert torch.equal(new[1], prototypes[1])
    assert torch.allclose(new[2], torch.tensor([-1.0, -1.0]) / math.sqrt(2), atol=1e-6)


def test_fednh_clients_keep_the_prototypes_fixed_and_report_class_means():
    algorithm = fednh(TASK, RUNTIME, lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    prototypes = state["model.head.prototypes"]
    assert torch.allclose(prototypes @ prototypes.T, torch.eye(3), atol=1e-5)  # uniform (orthogonal) at the start
    reply, _ = algorithm.client_update(algorithm.broadcast(state, INFO), {}, toy_images(16), INFO)
    assert torch.equal(reply.arrays["model.head.prototypes"], prototypes)
    assert reply.arrays["model.head.scale"] != state["model.head.scale"]  # s is learned
    assert reply.arrays["class_means"].shape == (3, 128) and reply.arrays["class_counts"].sum() == 16
    after = algorithm.aggregate(state, [reply], RoundInfo(0, "federated", 1))
    assert not torch.equal(after["model.head.prototypes"], prototypes)


@pytest.mark.parametrize("dim", [4, 6])
def test_fedetf_classifier_is_a_simplex_equiangular_tight_frame(dim):
    w = simplex_etf(4, dim)
    assert w.shape == (dim, 4)
    gram = w.T @ w
    assert torch.allclose(gram.diagonal(), torch.ones(4), atol=1e-5)  # unit-norm class vectors
    off = gram[~torch.eye(4, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1 / 3), atol=1e-5)  # pairwise cosine -1/(K-1)
    assert torch.allclose(w.sum(1), torch.zeros(dim), atol=1e-5)
    with pytest.raises(ConfigError, match="etf_dim"):
        simplex_etf(4, 3)


def test_fedrod_balanced_softmax_and_two_heads_with_separate_gradients():
    logits = torch.zeros(1, 2)
    assert balanced_softmax_loss(logits, torch.tensor([1]), torch.tensor([3.0, 1.0])).item() == pytest.approx(math.log(4))
    both = TwoHeads(ConvNet(1, 3, width=4, depth=2), nn.Linear(8, 3))
    x, y = toy_images(6)["x"], toy_images(6)["y"]
    generic, personal = both.losses(x, y, torch.ones(3), 1.0)
    personal.backward(retain_graph=True)
    assert all(p.grad is None for p in both.shared.parameters())  # the P-head's loss never reaches body or G-head
    assert all(p.grad is not None for p in both.personal.parameters())
    both.zero_grad(set_to_none=True)
    generic.backward()
    assert all(p.grad is None for p in both.personal.parameters())


def test_fedrod_keeps_the_personal_head_and_sends_the_generic_model():
    algorithm = fedrod(TASK, RUNTIME, lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    reply, client_state = algorithm.client_update(algorithm.broadcast(state, INFO), {}, toy_images(16), INFO)
    assert set(client_state) == {"personal.weight", "personal.bias"}
    assert not any(k.startswith("personal") for k in reply.arrays)
    assert not torch.equal(client_state["personal.weight"], state["model.head.weight"])  # started from the G-head, then trained


def test_fedrep_trains_head_then_body_and_sends_the_body():
    net = ConvNet(1, 3, width=4, depth=2)
    set_trainable(net, head=True)
    assert {n for n, p in net.named_parameters() if p.requires_grad} == {"head.weight", "head.bias"}
    set_trainable(net, head=False)
    assert not any(p.requires_grad for p in net.head.parameters()) and all(p.requires_grad for p in net.body.parameters())

    algorithm = fedrep(TASK, RUNTIME, lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    message = algorithm.broadcast(state, INFO)
    reply, head = algorithm.client_update(message, {}, toy_images(16), INFO)
    assert set(head) == {"head.weight", "head.bias"}
    assert not any(k.startswith("model.head") for k in reply.arrays)
    assert torch.equal(reply.arrays["eval.2.weight"], head["head.weight"])
    # a client starts from its own head, not the server's: with lr 0 it comes back unchanged
    frozen = fedrep(TASK, RUNTIME, lr=1e-12)
    _, kept = frozen.client_update(message, head, toy_images(16), INFO)
    assert torch.allclose(kept["head.weight"], head["head.weight"])
    after = algorithm.aggregate(state, [reply], RoundInfo(0, "federated", 1))
    assert torch.equal(after["model.head.weight"], state["model.head.weight"])  # the server never averages heads
    assert algorithm.evaluate(after, toy_images(30, 5))["accuracy"] >= 0


def test_personalized_metrics_are_averaged_over_clients():
    a = {"accuracy": 0.5, "macro_f1": 0.2, "class_accuracy": [1.0, 0.0]}
    b = {"accuracy": 1.0, "macro_f1": 0.4, "class_accuracy": [0.5, 0.5]}
    assert mean_metrics([a, b]) == {"accuracy": 0.75, "macro_f1": pytest.approx(0.3), "class_accuracy": [0.75, 0.25]}


def test_feddyn_correction_term_and_server_state():
    model = nn.Linear(2, 2, bias=False)
    theta_global = {"weight": torch.tensor([[0.5, -0.5], [1.0, 0.0]])}
    grad = {"weight": torch.tensor([[0.1, 0.2], [0.3, 0.4]])}
    x, y = torch.tensor([[1.0, 2.0]]), torch.tensor([1])
    dynamic_loss(theta_global, grad, alpha=0.5)(model, x, y).backward()
    dyn = model.weight.grad.clone()
    model.weight.grad = None
    F.cross_entropy(model(x), y).backward()
    expected = model.weight.grad - grad["weight"] + 0.5 * (model.weight.detach() - theta_global["weight"])
    assert torch.allclose(dyn, expected, atol=1e-6)  # dL_k - g_k + alpha (theta - theta_global)

    state = {"model.w": torch.tensor([1.0]), "h.w": torch.tensor([0.0])}
    new = server_update(state, [{"w": torch.tensor([2.0])}, {"w": torch.tensor([4.0])}], ["w"], alpha=0.5, num_clients=4, weights=[1, 1])
    assert new["h.w"].item() == pytest.approx(-0.5)  # h - alpha/m sum (theta_k - theta) = -0.5/4 (1 + 3)
    assert new["model.w"].item() == pytest.approx(4.0)  # mean(2, 4) - h / alpha = 3 + 1


def test_feddyn_client_keeps_its_gradient_state():
    algorithm = ALGORITHMS["feddyn"].build(TASK, {"lr": 0.1}, RUNTIME)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    message = algorithm.broadcast(state, INFO)
    reply, grad = algorithm.client_update(message, {}, toy_images(16), INFO)
    name = next(k[len("grad.") :] for k in grad)
    drift = reply.arrays["model." + name] - message.arrays["model." + name]
    assert torch.allclose(grad["grad." + name], -0.01 * drift, atol=1e-7)  # g_k = 0 - alpha (theta_k - theta)


def test_fedproto_prototypes_are_count_weighted_and_classify_by_distance():
    old, present = torch.zeros(2, 2), torch.tensor([False, False])
    means = [torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[0.0, 1.0], [0.0, 0.0]])]
    counts = [torch.tensor([1.0, 0.0]), torch.tensor([3.0, 0.0])]
    protos, held = aggregate_prototypes(old, present, means, counts)
    assert torch.allclose(protos[0], torch.tensor([0.25, 0.75])) and held.tolist() == [True, False]
    logits = nearest_prototype_logits(torch.tensor([[0.25, 0.7]]), protos, held)
    assert logits[0, 0].item() == pytest.approx(-0.0025) and logits[0, 1] < -1e5
    z, y = torch.tensor([[1.0, 1.0], [5.0, 5.0]]), torch.tensor([0, 1])
    assert prototype_loss(z, y, protos, held).item() == pytest.approx(((0.75**2) + (0.25**2)) / 2)  # class 1 has no prototype


def selected_rows_mse(z: torch.Tensor, y: torch.Tensor, prototypes: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """FedProto's prototype distance as it was: the MSE over the rows selected by a boolean mask (a host sync on a GPU)."""
    keep = present[y]
    return F.mse_loss(z[keep], prototypes[y[keep]]) if bool(keep.any()) else z.new_zeros(())


def proto_step(loss_fn, features, y, prototypes, present, head) -> tuple[torch.Tensor, torch.Tensor]:
    """The value of CE + 0.1 * ``loss_fn`` and its gradient on the features."""
    z = features.clone().requires_grad_(True)
    loss = F.cross_entropy(z @ head, y) + 0.1 * loss_fn(z, y, prototypes, present)
    loss.backward()
    assert z.grad is not None
    return loss.detach(), z.grad


@pytest.mark.parametrize("held", ["all", "none", "some"])
def test_fedproto_prototype_loss_is_the_selected_rows_mse_with_its_gradient_to_the_bit(held):
    """The masked prototype distance (no selection, no value read: no host sync on a GPU) against the selected rows' MSE:
    the gradient the local model receives is the same to the bit whichever rows have a prototype; so is the value when every
    row or none has one; when some have, the value may differ in the last bits (the sum runs over the whole batch)."""
    g = torch.Generator().manual_seed(0)
    present = torch.full((5,), held == "all") if held != "some" else torch.tensor([True, False, True, True, False])
    for trial in range(20):
        n, dim = 1 + trial * 3, 7 + trial * 11
        case = (torch.randn(n, dim, generator=g), torch.randint(0, 5, (n,), generator=g), torch.randn(5, dim, generator=g), present)
        head = torch.randn(dim, 5, generator=g)
        masked, expected = proto_step(prototype_loss, *case, head), proto_step(selected_rows_mse, *case, head)
        assert torch.equal(masked[1], expected[1])
        assert torch.equal(masked[0], expected[0]) if held != "some" else torch.allclose(masked[0], expected[0], rtol=1e-6, atol=0)


def test_fedproto_clients_keep_their_models_and_upload_prototypes():
    algorithm = fedproto(TASK, RUNTIME, lr=0.1)
    state = algorithm.init(RoundInfo(0, "federated", 0))
    message = algorithm.broadcast(state, INFO)
    assert set(message.arrays) == {"prototypes", "prototype_present"}
    reply, mine = algorithm.client_update(message, {}, toy_images(16), INFO)
    assert not any(k.startswith("model.") for k in reply.arrays) and any(k.startswith("eval.2.model.") for k in reply.arrays)
    assert all(k.startswith("model.") for k in mine)
    after = algorithm.aggregate(state, [reply], RoundInfo(0, "federated", 1))
    assert after["prototype_present"].sum() > 0
    again, _ = algorithm.client_update(algorithm.broadcast(after, INFO), mine, toy_images(16), INFO)
    assert not torch.equal(again.arrays["eval.2.model.head.weight"], mine["model.head.weight"])
    assert 0 <= algorithm.evaluate(after, toy_images(30, 5))["accuracy"] <= 1


def test_central_learning_is_centralized():
    assert ALGORITHMS["central"].centralized and ALGORITHMS["central"].build(TASK, {}, RUNTIME).name == "central"
