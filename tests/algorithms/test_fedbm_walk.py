"""FedBM's Algorithm 1 walked line by line (docs/fedbm.md): the options that give the paper's order of operations where the
authors' code (the default) does otherwise, each on a hand-made case.

- line 14: ``aggregation='uniform'``, the plain mean of the client models;
- line 19: ``synthetic_data='per-round'``, one epoch's generated images made before the epochs and reused in each;
- Eq. 6: ``semantic_loss='cross-entropy'``, the generator's L_sem as the paper's CE on the frozen model's logits;
- Sec. IV-A2: ``lr_decay_every='epoch'``, the learning rate decayed once per local epoch;
- LKCC (Sec. III-B, Eq. 1-5): the prompts of OCT-C8 and Kvasir-v2 are the code's sentences, and the distributions, the
  loss and the evaluation logits are the code's formulas.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms import fedbm as fedbm_module
from fedprior.algorithms.base import ClientInfo, Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.engines.body_training import LocalOptimizer, train_on_device
from fedprior.algorithms.fedbm import classifier_loss, fedbm
from fedprior.algorithms.pieces.lkcc import build_classifier, concept_distributions, lkcc_loss
from fedprior.algorithms.pieces.tensors import MODEL
from fedprior.encoders.prompts import concept_sentences, prompt_templates
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
RUNTIME = Runtime(2, 8)
SMALL = dict(generator_every=1, generator_steps=1, generator_batch=6, generator_width=4, synthetic_batch=4)


@pytest.fixture
def fake_concepts(monkeypatch):
    """Fixed (K, M, D) concept embeddings instead of the language model (fast, offline)."""
    monkeypatch.setattr(fedbm_module, "concept_embeddings", lambda names, *a, **k: torch.randn(3, 6, 12, generator=torch.Generator().manual_seed(3)))


def spy(monkeypatch, name: str) -> list:
    """Record the arguments of every call of ``fedbm_module.name`` (still computing the real thing)."""
    calls: list = []
    real = getattr(fedbm_module, name)

    def recorded(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(fedbm_module, name, recorded)
    return calls


def trained_state(algorithm) -> dict[str, torch.Tensor]:
    """The state after one aggregation at round 1 (generator_every = 1: the generator is trained, so it is broadcast)."""
    state = algorithm.init(RoundInfo(0, "federated", 0))
    message = algorithm.broadcast(state, RoundInfo(0, "federated", 1))
    reply, _ = algorithm.client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 1, client_id=0))
    return algorithm.aggregate(state, [reply], RoundInfo(0, "federated", 1))


# ----------------------------------------------------------------------------- line 14: the server's mean


@pytest.mark.parametrize(("aggregation", "share"), [("examples", 0.25), ("uniform", 0.5)])
def test_line_14_aggregation_is_example_weighted_or_the_plain_mean(fake_concepts, aggregation, share):
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "cgde": False, "aggregation": aggregation})
    state = algorithm.init(RoundInfo(0, "federated", 0))
    model = {k: v for k, v in state.items() if k.startswith(MODEL) and v.is_floating_point()}
    replies = [Reply(model, num_examples=30), Reply({k: v + 1.0 for k, v in model.items()}, num_examples=10)]
    new = algorithm.aggregate(state, replies, RoundInfo(0, "federated", 1))
    for key, value in model.items():  # client 2 is client 1 + 1: the mean moves by client 2's share (10/40, or 1/2)
        torch.testing.assert_close(new[key], value + share, rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------- line 19: the synthesized dataset


@pytest.mark.parametrize(("mode", "expected"), [("per-step", [0, 1, 2, 3]), ("per-round", [0, 1, 0, 1])])
def test_line_19_a_client_draws_fresh_images_per_step_or_reuses_one_epochs_worth(fake_concepts, monkeypatch, mode, expected):
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "synthetic_data": mode})
    message = algorithm.broadcast(trained_state(algorithm), RoundInfo(0, "federated", 2))
    draws, used = spy(monkeypatch, "draw_batches"), spy(monkeypatch, "synthesize")
    algorithm.client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 2, client_id=0))  # 2 epochs of 2 steps
    assert [call[3] for call in used] == expected  # the step index of the draws each local step takes its images from
    assert [call[3] for call in draws] == [4 if mode == "per-step" else 2]  # how many batches were drawn, before the first step


def test_line_19_per_round_images_are_the_same_in_every_epoch(fake_concepts, monkeypatch):
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "synthetic_data": "per-round"})
    message = algorithm.broadcast(trained_state(algorithm), RoundInfo(0, "federated", 2))
    images: list[torch.Tensor] = []
    real = fedbm_module.synthesize
    monkeypatch.setattr(fedbm_module, "synthesize", lambda *a: images.append(real(*a)) or images[-1])
    algorithm.client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 2, client_id=0))
    assert torch.equal(images[0], images[2]) and torch.equal(images[1], images[3]) and not torch.equal(images[0], images[1])


# ----------------------------------------------------------------------------- Eq. 6: L_sem


@pytest.mark.parametrize("semantic", ["model-loss", "cross-entropy"])
def test_eq6_semantic_loss_is_the_clients_loss_or_the_papers_cross_entropy(fake_concepts, monkeypatch, semantic):
    calls = spy(monkeypatch, "train_generator")
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "semantic_loss": semantic})
    trained_state(algorithm)
    (generator, teacher, loss_fn, *_rest) = calls[0]
    data = toy_images(10, 4)
    eq4 = classifier_loss(teacher, data["x"], data["y"])  # Eq. 4: CE on F plus (tau^2 / 2) h^2 . Sigma_y
    ce = F.cross_entropy(teacher(data["x"]), data["y"])
    assert not torch.allclose(eq4, ce)  # the variance term is not zero: the two choices differ here
    torch.testing.assert_close(loss_fn(teacher, data["x"], data["y"]), eq4 if semantic == "model-loss" else ce)


# ----------------------------------------------------------------------------- Sec. IV-A2: the learning-rate decay


@pytest.mark.parametrize(("every", "rates"), [("round", [0.5, 0.5]), ("epoch", [0.25, 0.125])])
def test_learning_rate_decays_per_round_or_per_local_epoch(every, rates):
    """Round 2, two local epochs of one full-batch step each, lr 1, decay 0.5, plain SGD on a loss whose gradient is x's
    column sums: each epoch moves the weights by -lr_e * g, lr_e = 0.5^(2 - 1) per round, 0.5^((2 - 1) * 2 + e) per epoch."""
    model = nn.Linear(2, 1, bias=False)
    nn.init.zeros_(model.weight)
    data = {"x": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "y": torch.zeros(2, dtype=torch.long)}
    optimizer = LocalOptimizer("sgd", lr=1.0, momentum=0.0, weight_decay=0.0, lr_decay=0.5, decay_every=every)
    train_on_device(model, data, ClientInfo(0, "federated", 2, client_id=0), epochs=2, batch_size=2, optimizer=optimizer, loss_fn=lambda m, x, y: m(x).sum())
    gradient = data["x"].sum(0)
    torch.testing.assert_close(model.weight.detach(), -sum(rates) * gradient.view(1, 2))


def test_per_epoch_decay_reaches_the_factory_and_an_unknown_schedule_is_refused(fake_concepts):
    assert LocalOptimizer(lr=1.0, lr_decay=0.5, decay_every="epoch").epoch_lr(3, 2, 1) == 0.5**5  # (3 - 1) * 2 + 1 epochs before
    algorithm = fedbm(TASK, RUNTIME, **{**SMALL, "cgde": False, "lr_decay_every": "epoch"})
    state = algorithm.init(RoundInfo(0, "federated", 0))
    message = algorithm.broadcast(state, RoundInfo(0, "federated", 1))
    reply, _ = algorithm.client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 1, client_id=0))
    per_round, _ = fedbm(TASK, RUNTIME, **{**SMALL, "cgde": False}).client_update(message, {}, toy_images(16, 0), ClientInfo(0, "federated", 1, client_id=0))
    assert not torch.equal(reply.arrays["model.projection.weight"], per_round.arrays["model.projection.weight"])  # epoch 2 at lr * 0.99
    with pytest.raises(Exception, match="lr_decay_every"):
        LocalOptimizer(decay_every="batch").schedule(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0), 1, 1)


# ----------------------------------------------------------------------------- LKCC (Sec. III-B, Eq. 1-5) against the code

# The authors' code's prompt_templates.py (github.com/CUHK-AIM-Group/FedBM), copied verbatim: OCT_TEMPLATES, Kvasir_TEMPLATES.
CODE_OCT = [
    "an image of {}.", "a photo of {}.", "an OCT scan of {}.",
    "this is a photo of {}.", "this is an image of {}.", "this is an OCT scan of {}.", "this is an OCT photo of {}.", "this is an OCT image of {}.",
    "{} presented in photo.", "{} presented in image.", "{} presented in OCT scan.", "{} presented in OCT image.", "{} presented in OCT photo.",
    "the image shows {}.", "the photo shows {}.", "the OCT scan shows {}.", "the OCT image shows {}.", "the OCT photo shows {}.",
    "the image shows the presence of {}.", "the photo shows the presence of {}.", "the OCT scan shows the presence of {}.",
    "the OCT image shows the presence of {}.", "the OCT photo shows the presence of {}.",
    "the presence of {} in image.", "the presence of {} in photo.", "the presence of {} in OCT image.", "the presence of {} in OCT photo.",
    "the presence of {} in OCT scan.",
]  # fmt: skip
CODE_KVASIR = [
    "an image of {}.", "a photo of {}.", "a endoscopic image of {}.", "a endoscopic photo of {}.",
    "this is a photo of {}.", "this is an image of {}.", "this is a endoscopic photo of {}.", "this is a endoscopic image of {}.",
    "{} presented in photo.", "{} presented in image.", "{} presented in endoscopic photo.", "{} presented in endoscopic image.",
    "the image shows {}.", "the photo shows {}.", "the endoscopic image shows {}.", "the endoscopic photo shows {}.",
    "the image shows the presence of {}.", "the photo shows the presence of {}.", "the endoscopic image shows the presence of {}.",
    "the endoscopic photo shows the presence of {}.",
    "the presence of {} in image.", "the presence of {} in photo.", "the presence of {} in endoscopic image.", "the presence of {} in endoscopic photo.",
]  # fmt: skip


@pytest.mark.parametrize(("prompt_set", "code", "form_starts"), [("oct", CODE_OCT, (0, 3, 8, 13, 18, 23)), ("endoscopy", CODE_KVASIR, (0, 4, 8, 12, 16, 20))])
def test_lkcc_prompts_of_the_papers_datasets_are_the_codes_sentences(prompt_set, code, form_starts):
    templates = prompt_templates(prompt_set)
    assert sorted(templates) == sorted(code)  # M = 28 for OCT-C8, 24 for Kvasir-v2, the code's wording ("a endoscopic")
    assert templates[:6] == [code[i] for i in form_starts]  # Table VII's first prompts: the first sentence of each form
    sentences = concept_sentences(("dyed_lifted polyp",), templates)[0]  # the code: c.replace("_", " ") in each template
    assert sentences[0] == "an image of dyed lifted polyp."


def test_lkcc_classifier_loss_and_evaluation_are_the_codes_formulas():
    """nodes.py (distributions), client_funct.client_fedbm (loss) and utils.validate (evaluation), line for line."""
    g = torch.Generator().manual_seed(5)
    embeddings = torch.randn(4, 7, 6, generator=g) * 3  # K = 4 classes, M = 7 prompts, D = 6
    T, h = 12.5, F.normalize(torch.randn(10, 6, generator=g), dim=1)
    y = torch.randint(0, 4, (10,), generator=g)
    e = embeddings / embeddings.norm(dim=-1, keepdim=True)  # nodes.py: every embedding normalized; mean and cov diag
    means = torch.stack([e[c].mean(0) for c in range(4)])
    covs = torch.stack([torch.cov(e[c].T).diag() for c in range(4)])
    mean, var = concept_distributions(embeddings)
    assert torch.allclose(mean, means, atol=1e-6) and torch.allclose(var, covs, atol=1e-6)  # the mean is not renormalized
    scaled = covs * T  # client_fedbm
    logits = (h.mm(means.T) + 0.5 * h.pow(2).mm(scaled.T)) * T
    code_loss = (F.cross_entropy(logits, y, reduction="none") + 0.5 * torch.sum(h.pow(2).mul(scaled[y]), dim=1) * T).mean()
    assert lkcc_loss(h, y, mean, var, T).item() == pytest.approx(code_loss.item(), rel=1e-5)
    code_eval = h.mm(means.T) + 0.5 * h.pow(2).mm(scaled.T)  # validate: F / T, the distribution's mean (never a sample)
    classifier = build_classifier("lkcc", embeddings, T)
    assert torch.allclose(classifier(h) / T, code_eval, atol=1e-5)
    assert torch.equal(classifier(h), build_classifier("lkcc", embeddings, T)(h))  # nothing drawn
