"""FedBM: LKCC's equations (2, 4, 5) and CGDE's losses (6-8) on hand-made tensors; the algorithm's generator life cycle.

Algorithm-level tests replace the language model with fixed random concept embeddings
(``fake_concepts``) so they run in a fraction of a second; the registry-wide test in
test_experiments.py runs FedBM through the real MiniLM.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms import fedbm as fedbm_module
from fedprior.algorithms.base import ClientInfo, RoundInfo, Runtime, Task
from fedprior.algorithms.fedbm import ADAM, GENERATOR, TRAINED, fedbm
from fedprior.algorithms.pieces.cgde import (
    BatchNormStatistics,
    GeneratorTraining,
    concept_conditions,
    diversity_loss,
    train_generator,
)
from fedprior.algorithms.pieces.lkcc import FixedClassifier, build_classifier, concept_covariances, concept_distributions, lkcc_logits, lkcc_loss
from fedprior.data.augment import seeded
from fedprior.data.augment.crop_flip import crop_flip
from fedprior.encoders.prompts import FORMS, prompt_templates, take_fraction
from fedprior.models.convnet import ConvNet
from fedprior.models.generator import ConditionalGenerator, upsampling_plan
from fedprior.models.projected import ProjectedNet
from fedprior.runtime.checkpoint import load_checkpoint
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.toy_data import toy_images

# ----------------------------------------------------------------------------- LKCC (Eq. 2, 4, 5)


def test_eq2_mean_and_unbiased_diagonal_variance_of_normalized_embeddings():
    e = torch.tensor([[[3.0, 0.0], [0.0, 1.0], [0.6, 0.8]]])  # the first is normalized to (1, 0)
    mean, var = concept_distributions(e)
    assert torch.allclose(mean, torch.tensor([[1.6 / 3, 0.6]]), atol=1e-6)
    assert torch.allclose(var, torch.tensor([[0.50667 / 2, 0.56 / 2]]), atol=1e-5)
    cov = concept_covariances(e)[0]
    assert torch.allclose(cov.diagonal(), var[0], atol=1e-6)
    assert cov[0, 1] == pytest.approx(((0.4667 * -0.6) + (-0.5333 * 0.4) + (0.0667 * 0.2)) / 2, abs=1e-3)
    with pytest.raises(Exception, match="at least 2 prompts"):
        concept_distributions(e[:, :1])


def test_eq5_logits_and_eq4_loss_on_a_hand_computed_case():
    h = torch.tensor([[0.6, 0.8]])
    mean = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    var = torch.tensor([[0.1, 0.2], [0.3, 0.0]])
    # F(h, k) = tau h.mu_k + tau^2/2 h^2.Sigma_k with tau = 2
    f = lkcc_logits(h, mean, var, 2.0)
    assert torch.allclose(f, torch.tensor([[1.2 + 2 * (0.036 + 0.128), 1.6 + 2 * 0.108]]), atol=1e-6)
    # Eq. 5 is F / tau: h.mu + tau/2 h^2.Sigma
    assert torch.allclose(f / 2, torch.tensor([[0.764, 0.908]]), atol=1e-6)
    expected = math.log(1 + math.exp(1.816 - 1.528)) + 2 * 0.164  # CE + tau^2/2 h^2.Sigma_y, y = 0
    assert lkcc_loss(h, torch.tensor([0]), mean, var, 2.0).item() == pytest.approx(expected, abs=1e-5)


def test_fixed_classifier_gets_no_gradient_and_is_not_in_the_state():
    embeddings = torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(0))
    net = ProjectedNet(ConvNet(1, 3, width=4, depth=2), 8, build_classifier("lkcc", embeddings, 5.0))
    assert list(net.head.parameters()) == [] and not any(k.startswith("head.") for k in net.state_dict())
    before = net.head.weight.clone(), net.head.var.clone()
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        net.head.loss(net.embed(torch.randn(6, 1, 8, 8)), torch.tensor([0, 1, 2, 0, 1, 2])).backward()
        opt.step()
    assert net.projection.weight.grad is not None and net.head.weight.grad is None
    assert torch.equal(net.head.weight, before[0]) and torch.equal(net.head.var, before[1])
    # every client rebuilds the same classifier from the same embeddings
    again = build_classifier("lkcc", embeddings, 5.0)
    assert torch.equal(again.weight, net.head.weight) and torch.equal(again.var, net.head.var)
    assert torch.allclose(net.embed(torch.randn(2, 1, 8, 8)).norm(dim=1), torch.ones(2), atol=1e-5)


def test_table_viii_classifiers():
    embeddings = torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(1))
    h = F.normalize(torch.randn(5, 8), dim=1)
    mean, _ = concept_distributions(embeddings)
    averaged = build_classifier("mean-embedding", embeddings, 3.0)
    assert torch.allclose(averaged(h), 3.0 * h @ mean.T)
    random = build_classifier("random", embeddings, 3.0, seed=7)
    assert torch.allclose(random.weight.norm(dim=1), torch.ones(3)) and not torch.allclose(random.weight, mean)
    assert torch.equal(random.weight, build_classifier("random", embeddings, 3.0, seed=7).weight)
    with pytest.raises(Exception, match="accepted"):
        FixedClassifier("nope", mean, mean, 1.0)


def test_prompt_sets_cover_every_form_first_and_fractions_keep_at_least_two():
    templates = prompt_templates("fashion")
    assert len(templates) == len(FORMS) * 4 and len(set(templates)) == len(templates)
    first = templates[: len(FORMS)]
    assert [t.split("{}")[0][:6] for t in first] != [first[0].split("{}")[0][:6]] * len(FORMS)
    assert "a product photo of {}." in templates and all(t.count("{}") == 1 for t in templates)
    assert len(take_fraction(templates, 0.25)) == math.ceil(0.25 * len(templates))
    assert len(take_fraction(templates, 0.01)) == 2
    with pytest.raises(Exception, match="unknown prompt set"):
        prompt_templates("nope")


# ----------------------------------------------------------------------------- CGDE (Eq. 6-9)


def test_eq7_diversity_on_a_hand_made_case():
    z = torch.tensor([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]])
    x = torch.tensor([[0.0, 0.0], [2.0, 2.0], [9.0, 9.0]])
    y = torch.tensor([0, 0, 1])  # only the class-0 pair counts: |dz| = 2, |dG| = 4
    assert diversity_loss(z, x, y, num_classes=2).item() == pytest.approx(0.5 * 1 / (2 + 1e-5), rel=1e-6)
    y3 = torch.tensor([0, 0, 0])  # three pairs: ratios 2, 9/5... |dG|/|dz| = 4/2, 18/10, 14/8
    expected = sum(1 / (r + 1e-5) for r in (2.0, 1.8, 1.75)) / 3 / 2
    assert diversity_loss(z, x, y3, num_classes=2).item() == pytest.approx(expected, rel=1e-6)


def per_class_diversity(z: torch.Tensor, images: torch.Tensor, y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Eq. 7 as it was computed before issue 19 (the reference): a loop over the classes, pdist on each class's rows."""
    z, images = z.flatten(1), images.flatten(1)
    total = z.new_zeros(())
    for k in range(num_classes):
        members = y == k
        if int(members.sum()) > 1:
            ratio = F.pdist(images[members], p=1) / F.pdist(z[members], p=1)
            total = total + (1.0 / (ratio + 1e-5)).mean()
    return total / num_classes


@pytest.mark.parametrize(
    "labels",
    [[0, 1, 2, 0, 1, 2, 0, 1, 2, 0], [3, 3, 3, 3, 3, 3, 3, 3, 3, 3], [0, 0, 1, 2, 2, 2, 2, 2, 2, 2], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]],
    ids=["even", "one-class", "a-singleton-and-absent-classes", "no-pairs"],
)
def test_eq7_diversity_with_cdist_and_a_class_mask_is_the_per_class_loop(labels):
    """The whole-batch form (cdist over all pairs, a same-class mask) gives the per-class loop's value (float
    rounding apart: the sums run in another order) and finite gradients, also with identical conditions."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(10, 4, generator=g).requires_grad_(True)
    images = torch.rand(10, 1, 3, 3, generator=g).requires_grad_(True)
    y = torch.tensor(labels)
    loss = diversity_loss(z, images, y, num_classes=10)
    reference = per_class_diversity(z, images, y, num_classes=10)
    assert float(loss.detach()) == pytest.approx(float(reference.detach()), rel=1e-6, abs=1e-12)
    if labels == list(range(10)):
        assert float(loss.detach()) == 0.0  # no class has two samples: nothing counts
    loss.backward()
    assert z.grad is not None and images.grad is not None and bool(torch.isfinite(z.grad).all() and torch.isfinite(images.grad).all())
    twin = torch.cat([z.detach()[:1], z.detach()[:1]]).requires_grad_(True)  # two equal conditions of different classes: off the mask
    diversity_loss(twin, images.detach()[:2], torch.tensor([0, 1]), 2).backward()
    assert twin.grad is not None and bool(torch.isfinite(twin.grad).all())


def test_eq9_conditions_of_a_batch_are_one_product_equal_to_the_per_class_ones():
    """mu_y + L_y eps for a whole batch by one batched product and a gather: the per-class products' values for full,
    diagonal and noise conditions (to float32 rounding: whether a batched product and per-class products agree to the
    bit depends on the CPU's matmul kernels; they did on an AVX512 machine of 2026-11 and do not on another)."""
    g = torch.Generator().manual_seed(1)
    mean, factor = torch.randn(4, 5, generator=g), torch.randn(4, 5, 5, generator=g)
    conditions = concept_conditions(mean, factor @ factor.transpose(1, 2) / 5)
    y = torch.tensor([3, 2, 2, 0, 3, 3, 1, 0, 2])
    eps = torch.randn(9, 5, generator=g)
    expected = mean[y].clone()
    for k in torch.unique(y).tolist():
        expected[y == k] += eps[y == k] @ conditions.scale[k].T
    torch.testing.assert_close(conditions.from_noise(y, eps), expected, rtol=0, atol=1e-6)
    assert torch.equal(conditions.sample(y, torch.Generator().manual_seed(7)), conditions.from_noise(y, conditions.noise(9, torch.Generator().manual_seed(7))))
    diagonal = concept_conditions(mean, torch.rand(4, 5, generator=g))
    assert torch.equal(diagonal.from_noise(y, eps), mean[y] + diagonal.scale[y] * eps)


def test_eq8_batchnorm_statistics_on_a_hand_made_case():
    bn = nn.BatchNorm2d(2)
    bn.running_mean.copy_(torch.tensor([0.0, 1.0]))
    bn.running_var.copy_(torch.tensor([1.0, 1.0]))
    model = nn.Sequential(bn).eval()
    x = torch.zeros(2, 2, 1, 2)
    x[:, 0] = 2.0  # channel 0: mean 2, variance 0
    x[0, 1] = torch.tensor([0.0, 2.0])
    x[1, 1] = torch.tensor([0.0, 2.0])  # channel 1: mean 1, biased variance 1
    stats = BatchNormStatistics(model)
    with stats.recording():
        model(x)
    assert stats.loss().item() == pytest.approx(2.0 + 1.0)  # ||(0,1)-(2,1)|| + ||(1,1)-(0,1)||
    model(x)
    assert len(stats.terms) == 1  # hooks are removed after recording


def test_eq9_concept_conditions_follow_the_class_gaussians():
    mean = torch.tensor([[1.0, -1.0], [0.0, 3.0]])
    cov = torch.tensor([[[0.5, 0.2], [0.2, 0.3]], [[0.1, 0.0], [0.0, 0.1]]])
    conditions = concept_conditions(mean, cov)
    y = torch.zeros(40_000, dtype=torch.long)
    z = conditions.sample(y, torch.Generator().manual_seed(0))
    assert torch.allclose(z.mean(0), mean[0], atol=0.02)
    assert torch.allclose(torch.cov(z.T), cov[0] + 1e-4 * torch.eye(2), atol=0.02)
    noise = concept_conditions(mean, cov, kind="noise")
    sample = noise.sample(torch.tensor([1, 0]), torch.Generator().manual_seed(0))
    assert noise.dim == 4 and torch.equal(sample[:, 2:], torch.tensor([[0.0, 1.0], [1.0, 0.0]]))


@pytest.mark.parametrize("side", [8, 28, 32, 128])
def test_generator_sizes_its_upsampling_to_the_image(side):
    doublings, start = upsampling_plan(side)
    assert start * 2**doublings == side and start <= 8
    g = ConditionalGenerator(6, 3, side, width=4)
    out = g(torch.randn(2, 6))
    assert out.shape == (2, 3, side, side) and 0 <= out.min() and out.max() <= 1
    assert upsampling_plan(128) == (4, 8)  # the authors' 8 -> 128 in four doublings


def test_crop_flip_is_reproducible_under_a_seed():
    x = torch.rand(4, 1, 8, 8)
    with seeded(3):
        a = crop_flip(x)
    with seeded(3):
        b = crop_flip(x)
    assert torch.equal(a, b) and a.shape == x.shape


def test_eq6_training_lowers_the_frozen_models_loss_on_generated_images():
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Flatten(), nn.Linear(16, 2))
    for p in teacher.parameters():
        nn.init.normal_(p)
    conditions = concept_conditions(torch.eye(2, 3), torch.full((2, 3), 0.01))
    generator = ConditionalGenerator(3, 1, 4, width=4)
    ce = lambda model, x, y: F.cross_entropy(model(x), y)  # noqa: E731
    settings = GeneratorTraining(steps=40, batch_size=16, lr=0.01, lambda_div=0.0, lambda_dis=0.0, augment=False)
    adam = torch.optim.Adam(generator.parameters(), lr=settings.lr, betas=settings.betas)
    measure = GeneratorTraining(1, 16, 0.0, augment=False, lambda_div=0, lambda_dis=0)  # one step at lr 0: the loss only

    def semantic_loss() -> float:
        frozen = torch.optim.Adam(generator.parameters(), lr=0.0)
        return train_generator(generator, teacher, ce, conditions, 2, measure, lambda x: x, torch.Generator().manual_seed(1), frozen)["generator_sem"]

    first = semantic_loss()
    train_generator(generator, teacher, ce, conditions, 2, settings, lambda x: x, torch.Generator().manual_seed(2), adam)
    after = semantic_loss()
    assert after < 0.5 * first
    assert all(not p.requires_grad for p in teacher.parameters())


# ----------------------------------------------------------------------------- the algorithm


@pytest.fixture
def fake_concepts(monkeypatch):
    """Fixed (K, M, D) concept embeddings instead of the language model (fast, offline)."""

    def embeddings(class_names, text_model, prompt_set, fraction=1.0):
        return torch.randn(len(class_names), 6, 12, generator=torch.Generator().manual_seed(len(class_names)))

    monkeypatch.setattr(fedbm_module, "concept_embeddings", embeddings)


TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
RUNTIME = Runtime(1, 8)
SMALL = dict(generator_every=2, generator_steps=2, generator_batch=6, generator_width=4, synthetic_batch=4)


def run(algorithm, rounds=3, **kw):
    data = [toy_images(16, c) for c in range(4)]
    return simulate(algorithm, lambda c: data[c], 4, toy_images(30, 9), RoundLoop(seed=0, rounds=rounds, fraction=0.5), **kw)


def test_generator_is_sent_only_once_trained_and_clients_then_add_its_images(fake_concepts):
    algorithm = fedbm(TASK, RUNTIME, **SMALL)
    result = run(algorithm, rounds=3)
    history = result.progress.history
    assert history[0]["download_bytes"] == history[1]["download_bytes"] < history[2]["download_bytes"]  # trained after round 2
    state = algorithm.init(RoundInfo(0, "federated", 0))
    assert not any(k.startswith(GENERATOR) for k in algorithm.broadcast(state, RoundInfo(0, "federated", 1)).arrays)
    message = algorithm.broadcast(result.state, RoundInfo(0, "federated", 3))
    assert any(k.startswith(GENERATOR) for k in message.arrays) and int(result.state[TRAINED]) == 1
    reply, _ = algorithm.client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 3, client_id=0))
    assert not any(k.startswith((GENERATOR, "model.head")) for k in reply.arrays)  # the classifier and generator never go up
    # with synthetic images, a client's step sees 8 real + 4 generated examples: the loss differs from the real-only one
    plain, _ = fedbm(TASK, RUNTIME, **{**SMALL, "synthetic_batch": 0}).client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 3, client_id=0))
    assert not torch.equal(plain.arrays["model.projection.weight"], reply.arrays["model.projection.weight"])


def test_generator_and_adam_state_resume_exactly(fake_concepts, tmp_path):
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "generator_every": 1, "adam_state": "kept"})
    full = run(algorithm, rounds=3, checkpoint_path=tmp_path / "full.safetensors")
    steps = [v.item() for k, v in full.state.items() if k.startswith(ADAM) and k.endswith(":step")]
    assert steps and set(steps) == {3 * SMALL["generator_steps"]}  # never re-initialized: Adam's steps add up

    class Stop(Exception):
        pass

    def stop(record):
        if record.get("step") == 2:
            raise Stop

    with pytest.raises(Stop):
        run(algorithm, rounds=3, checkpoint_path=tmp_path / "cut.safetensors", on_round=stop)
    resumed = run(algorithm, rounds=3, checkpoint_path=tmp_path / "cut.safetensors", start=load_checkpoint(tmp_path / "cut.safetensors"))
    assert full.state.keys() == resumed.state.keys()
    assert all(torch.equal(full.state[k], resumed.state[k]) for k in full.state)
    assert full.progress.history[-1]["accuracy"] == resumed.progress.history[-1]["accuracy"]


def test_without_lkcc_the_head_is_trained_and_sent(fake_concepts):
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "classifier": "linear", "cgde": False})
    state = algorithm.init(RoundInfo(0, "federated", 0))
    assert "model.head.weight" in state and not any(k.startswith(GENERATOR) for k in state)
    result = run(algorithm, rounds=1)
    assert not torch.equal(result.state["model.head.weight"], state["model.head.weight"])


def test_fedbm_needs_images_and_batchnorm_for_eq8(fake_concepts):
    with pytest.raises(Exception, match="square images"):
        fedbm(Task(3, (16,), ("a", "b", "c"), 4), RUNTIME, **SMALL)


def test_generated_images_are_standardized_with_the_tasks_channel_statistics():
    """The generator draws [0, 1] images; they reach the model standardized as the real inputs are."""
    task = Task(num_classes=2, input_shape=(2, 4, 4), class_names=("a", "b"), num_clients=1, pixel_mean=(0.5, 0.2), pixel_std=(0.25, 0.1))
    images = torch.rand(3, 2, 4, 4)
    expected = (images - torch.tensor([0.5, 0.2]).view(1, 2, 1, 1)) / torch.tensor([0.25, 0.1]).view(1, 2, 1, 1)
    assert torch.equal(fedbm_module.input_standardizer(task).apply(images), expected)
    plain = fedbm_module.input_standardizer(Task(num_classes=2, input_shape=(2, 4, 4), class_names=("a", "b"), num_clients=1))
    assert torch.equal(plain.apply(images), images)
