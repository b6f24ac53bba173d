"""Issue 16's FedBM switches: FedBM with FedETF's balanced softmax, FedETF with plain cross-entropy, the generated
images' augmentation per batch (the authors' code) or per image, and the F / tau logits the code evaluates on."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fedprior.algorithms import fedbm as fedbm_module
from fedprior.algorithms import fedetf as fedetf_module
from fedprior.algorithms.base import ClientInfo, RoundInfo, Runtime, Task
from fedprior.algorithms.fedbm import classifier_loss, evaluated, fedbm
from fedprior.algorithms.fedetf import etf_loss, fedetf
from fedprior.algorithms.pieces import class_balance
from fedprior.algorithms.pieces.lkcc import build_classifier, concept_distributions, lkcc_logits
from fedprior.data.augment import seeded
from fedprior.data.augment.crop_flip import crop_flip
from fedprior.models.convnet import ConvNet
from fedprior.models.projected import ProjectedNet
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
INFO = ClientInfo(0, "federated", 1, client_id=1)
TAU = 5.0


def embeddings() -> torch.Tensor:
    return torch.randn(3, 6, 12, generator=torch.Generator().manual_seed(3))


@pytest.fixture
def fake_concepts(monkeypatch):
    monkeypatch.setattr(fedbm_module, "concept_embeddings", lambda names, *a, **k: embeddings())


def lkcc_net() -> ProjectedNet:
    torch.manual_seed(0)
    return ProjectedNet(ConvNet(1, 3, width=4, depth=2), 12, build_classifier("lkcc", embeddings(), TAU))


def spy(monkeypatch, module, name: str) -> list:
    """Record the arguments of every call of ``module.name`` (still computing the real thing)."""
    calls: list = []
    real = getattr(module, name)

    def recorded(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(module, name, recorded)
    return calls


def test_fedbm_balanced_softmax_is_fedetfs_function_on_the_lkcc_logits():
    assert fedbm_module.balanced_softmax_loss is class_balance.balanced_softmax_loss is fedetf_module.balanced_softmax_loss  # one implementation
    net, data = lkcc_net(), toy_images(12, 1)
    counts = torch.tensor([40.0, 3.0, 1.0])
    mean, var = concept_distributions(embeddings())
    f = lkcc_logits(net.embed(data["x"]), mean, var, TAU)  # Eq. 4's F, by hand
    balanced = classifier_loss(net, data["x"], data["y"], "balanced-softmax", counts)
    assert torch.allclose(balanced, F.cross_entropy(f + counts.log(), data["y"]), atol=1e-5)
    assert torch.allclose(balanced, class_balance.balanced_softmax_loss(net(data["x"]), data["y"], counts), atol=1e-6)
    assert not torch.allclose(balanced, classifier_loss(net, data["x"], data["y"], "eq4"), atol=1e-3)
    # at the server (no client counts) it is cross-entropy on F
    assert torch.allclose(classifier_loss(net, data["x"], data["y"], "balanced-softmax"), F.cross_entropy(f, data["y"]), atol=1e-5)


def test_fedbm_clients_train_with_their_own_class_counts_under_balanced_softmax(fake_concepts, monkeypatch):
    calls = spy(monkeypatch, fedbm_module, "balanced_softmax_loss")
    data = toy_images(16, 0)
    kw = dict(cgde=False)
    default = fedbm(TASK, Runtime(1, 8), **kw)
    message = default.broadcast(default.init(RoundInfo(0, "federated", 0)), RoundInfo(0, "federated", 1))
    default.client_update(message, {}, data, INFO)
    assert calls == []  # Eq. 4 by default
    fedbm(TASK, Runtime(1, 8), **kw, loss="balanced-softmax").client_update(message, {}, data, INFO)
    assert len(calls) == 2  # two batches of 8
    assert all(torch.equal(c[2], class_balance.class_counts(data["y"], 3)) for c in calls)


def test_fedetf_plain_cross_entropy_is_f_cross_entropy(monkeypatch):
    logits, y = torch.randn(6, 3, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 0, 0, 1, 2, 0])
    counts = torch.tensor([30.0, 2.0, 1.0])
    assert torch.equal(etf_loss(logits, y, counts, "cross-entropy"), F.cross_entropy(logits, y))
    assert torch.equal(etf_loss(logits, y, counts), class_balance.balanced_softmax_loss(logits, y, counts))
    assert not torch.allclose(etf_loss(logits, y, counts, "cross-entropy"), etf_loss(logits, y, counts), atol=1e-3)
    # the algorithm: the balanced softmax by default, never under loss='cross-entropy'
    calls = spy(monkeypatch, fedetf_module, "balanced_softmax_loss")
    data = toy_images(16, 0)
    for loss, expected in (("cross-entropy", 0), ("balanced-softmax", 2)):
        algorithm = fedetf(TASK, Runtime(1, 8), loss=loss)
        message = algorithm.broadcast(algorithm.init(RoundInfo(0, "federated", 0)), RoundInfo(0, "federated", 1))
        algorithm.client_update(message, {}, data, INFO)
        assert len(calls) == expected
        calls.clear()


def scaled_copies(n: int = 12) -> torch.Tensor:
    """n copies of one random 8x8 image, the i-th multiplied by i + 1 (crops and flips commute with the scaling)."""
    base = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(0)) + 0.1
    return base * torch.arange(1, n + 1, dtype=torch.float32).view(-1, 1, 1, 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_batch_augmentation_gives_every_image_the_same_crop_and_flip(seed):
    x = scaled_copies()
    with seeded(seed):
        out = crop_flip(x, same_on_batch=True) / torch.arange(1, 13, dtype=torch.float32).view(-1, 1, 1, 1)
    assert torch.allclose(out, out[:1].expand_as(out), atol=1e-5)
    assert not torch.allclose(out[0], x[0], atol=1e-5)  # it did crop or flip
    with seeded(seed):
        apart = crop_flip(x, same_on_batch=False) / torch.arange(1, 13, dtype=torch.float32).view(-1, 1, 1, 1)
    assert not torch.allclose(apart, apart[:1].expand_as(apart), atol=1e-5)  # per image: twelve draws that differ


def test_fedbm_passes_its_augmentation_mode_to_both_generator_trainings(fake_concepts, monkeypatch):
    calls = spy(monkeypatch, fedbm_module, "GeneratorTraining")
    fedbm(TASK, Runtime(1, 8))
    fedbm(TASK, Runtime(1, 8), synthetic_augment="per-image")
    assert [c[-1] for c in calls] == [True, False]


def test_evaluation_uses_f_over_tau_logits_as_the_code(fake_concepts):
    net, x = lkcc_net(), toy_images(5, 2)["x"]
    assert torch.allclose(evaluated(net, TAU)(x), net(x) / TAU)
    assert evaluated(net, TAU, "f") is net
    linear = ConvNet(1, 3, width=4, depth=2)
    assert evaluated(linear, TAU) is linear  # a trained head has no tau
    algorithm = fedbm(TASK, Runtime(1, 8), cgde=False)
    state, data = algorithm.init(RoundInfo(0, "federated", 0)), toy_images(30, 3)
    scaled, plain = algorithm.evaluate(state, data), fedbm(TASK, Runtime(1, 8), cgde=False, evaluation_logits="f").evaluate(state, data)
    assert scaled["accuracy"] == plain["accuracy"] and scaled["loss"] != pytest.approx(plain["loss"])
