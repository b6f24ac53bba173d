"""The semi-supervised client and server of FedDB and its baselines: what they keep, send and never see."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from fedprior.algorithms.base import Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.registry import algorithm_spec

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4, pixel_mean=(0.5,), pixel_std=(0.25,))
INFO = RoundInfo(seed=0, stage="federated", round=1)
SMALL = {"model": "convnet", "width": 4}


def client_data(seed: int = 0, labeled: int = 12, unlabeled: int = 40) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (labeled + unlabeled,), generator=g)
    x = 0.3 * torch.randn(labeled + unlabeled, 1, 8, 8, generator=g)
    for k in range(3):
        x[y == k, :, 2 * k : 2 * k + 2, :] += 1.5
    return {"x_labeled": x[:labeled], "y_labeled": y[:labeled], "x_unlabeled": x[labeled:], "y_unlabeled": y[labeled:]}


def build(name: str, **values):
    return algorithm_spec(name).build(TASK, {**SMALL, **values}, Runtime(2, 8))


def one_update(algorithm, data, state=None, info=INFO):
    server = algorithm.init(info)
    return algorithm.client_update(algorithm.broadcast(server, info), state or {}, data, info.for_client(1))


@pytest.mark.parametrize("name", ["feddb", "semifl", "fedmatch"])
def test_hidden_labels_never_change_training(name):
    algorithm = build(name, threshold=0.34)  # low threshold: images are pseudo-labeled from round 1
    assert "y_unlabeled" not in algorithm.inputs and algorithm.diagnostics == ("y_unlabeled",)
    data = client_data()
    reply, state = one_update(algorithm, data)
    assert reply.metrics["pl_confident"] > 0, "the check needs pseudo-labeled images"
    shuffled = dict(data, y_unlabeled=data["y_unlabeled"][torch.randperm(40, generator=torch.Generator().manual_seed(1))])
    hidden_away = {k: v for k, v in data.items() if k != "y_unlabeled"}
    for other in (shuffled, hidden_away):
        reply2, state2 = one_update(algorithm, other)
        assert reply2.arrays.keys() == reply.arrays.keys()
        assert all(torch.equal(reply.arrays[k], reply2.arrays[k]) for k in reply.arrays)
        assert all(torch.equal(state[k], state2[k]) for k in state)
        if other is hidden_away:
            assert "pl_accuracy_plain" not in reply2.metrics and "pl_coverage" in reply2.metrics


def test_pseudo_label_diagnostics_read_the_hidden_labels():
    algorithm = build("fixmatch", threshold=0.34)
    data = client_data()
    replies = [one_update(algorithm, dict(data, y_unlabeled=(data["y_unlabeled"] + s) % 3))[0] for s in range(3)]
    # Each image's argmax matches exactly one of three shifted label sets.
    for key in ("pl_accuracy_all", "pl_accuracy_all_plain", "pl_accuracy_all_dpl"):
        assert sum(r.metrics[key] for r in replies) == pytest.approx(1.0)
    assert replies[0].metrics["pl_accuracy_all"] == replies[0].metrics["pl_accuracy_all_plain"]  # dpl off: the plain rule


def test_inputs_of_the_labeled_only_baseline_and_switching_diagnostics_off():
    assert build("fedavg-labeled").inputs == ("x_labeled", "y_labeled")
    assert build("fedavg-labeled").diagnostics == ()
    assert build("feddb", diagnostics=False).diagnostics == ()
    reply, _ = one_update(build("feddb", diagnostics=False), client_data())
    assert "diag.labeled" not in reply.arrays and not any(k.startswith("pl_accuracy") for k in reply.metrics)


def test_a_client_keeps_its_optimizer_state_between_rounds():
    algorithm = build("fixmatch")
    data = client_data()
    _, state = one_update(algorithm, data)
    assert state and all(k.startswith("opt.") and k.endswith(":momentum_buffer") for k in state)
    second = RoundInfo(seed=0, stage="federated", round=2)
    with_state, _ = one_update(algorithm, data, state, second)
    fresh, _ = one_update(algorithm, data, {}, second)
    assert any(not torch.equal(with_state.arrays[k], fresh.arrays[k]) for k in with_state.arrays if k.startswith("model."))
    off, none = one_update(build("fixmatch", keep_optimizer_state=False), data)
    assert none == {}


def test_server_momentum_applies_the_averaged_update_as_a_pseudo_gradient():
    algorithm = build("fixmatch", server_momentum=0.5)
    state = algorithm.init(INFO)
    name = next(k for k in state if k.startswith("model.") and state[k].is_floating_point())
    w = state[name]
    replies = [
        Reply({**{k: v.clone() for k, v in state.items() if k.startswith("model.")}, name: w + d, "appu": torch.full((3,), 1 / 3)}, 10, client_id=c)
        for c, d in enumerate((1.0, 3.0))
    ]
    first = algorithm.aggregate(state, replies, INFO)
    # velocity v = 0.5 * 0 + (w - mean) = -2; w' = w - v = w + 2 (plain averaging on the first step)
    assert torch.allclose(first[name], w + 2.0)
    replies2 = [Reply({**r.arrays, name: first[name] + d}, 10, client_id=r.client_id) for r, d in zip(replies, (1.0, 3.0), strict=True)]
    second = algorithm.aggregate(first, replies2, RoundInfo(0, "federated", 2))
    # v = 0.5 * (-2) + (-2) = -3; w'' = w' + 3
    assert torch.allclose(second[name], first[name] + 3.0)
    plain = build("fixmatch").aggregate(state, replies, INFO)
    assert torch.allclose(plain[name], w + 2.0) and not any(k.startswith("server.velocity.") for k in plain)


def old_server_momentum(state, mean, mu, velocity):
    """The semi-supervised server momentum as it was written before it became FedAvgM's step (engines/semi_supervised.py
    until issue 47): velocity = mu velocity + (w - mean), w = w - velocity, on every floating tensor of the model."""
    out = {}
    for key, value in mean.items():
        velocity[key] = mu * velocity.get(key, torch.zeros_like(value)) + (state[key] - value)
        out[key] = state[key] - velocity[key]
    return out


@pytest.mark.parametrize("norm", ["bn-batch", "bn"])
def test_server_momentum_is_fedavgm_and_steps_the_parameters_as_the_old_velocity_did_bit_for_bit(norm):
    """``server_momentum`` of the semi-supervised algorithms is ``with_server_optimizer``'s FedAvgM (server lr 1): three rounds
    of random client models give the parameters the old formula gives, to the bit; BatchNorm's running statistics
    (``norm = 'bn'``) take the plain average, as under every server optimizer (the old formula stepped them too)."""
    from fedprior.algorithms.pieces.tensors import weighted_mean

    algorithm = build("fixmatch", server_momentum=0.7, norm=norm)
    state = algorithm.init(INFO)
    floating = [k for k, v in state.items() if k.startswith("model.") and v.is_floating_point()]
    buffers = [k for k in floating if k.endswith(("running_mean", "running_var"))]
    old, velocity = {k: state[k] for k in floating}, {}
    g = torch.Generator().manual_seed(0)
    for round_ in (1, 2, 3):
        models = [{k: state[k] + torch.randn(state[k].shape, generator=g) for k in floating} for _ in range(3)]
        replies = [
            Reply({**{k: v for k, v in state.items() if k.startswith("model.")}, **m, "appu": torch.full((3,), 1 / 3)}, 10, client_id=c)
            for c, m in enumerate(models)
        ]
        mean = weighted_mean(models, [1.0, 1.0, 1.0])
        state = algorithm.aggregate(state, replies, RoundInfo(0, "federated", round_))
        old = {**old, **old_server_momentum(old, mean, 0.7, velocity)}
        assert all(torch.equal(state[k], old[k]) for k in floating if k not in buffers)
        assert all(torch.equal(state[k], mean[k]) for k in buffers)
        old.update({k: mean[k] for k in buffers})  # the new rule's buffers: the next round starts from them on both sides
    assert any(k.startswith("server_optimizer.v.model.") for k in state) and not any(k.startswith("server.velocity.") for k in state)
    assert (norm == "bn") == bool(buffers)


def test_feddb_aggregates_with_dma_weights_and_reports_them():
    algorithm = build("feddb", dma_solver="simplex")
    state = algorithm.init(INFO)
    models = {k: v for k, v in state.items() if k.startswith("model.")}
    name = next(k for k in models if models[k].is_floating_point())
    appus = [torch.tensor([0.9, 0.05, 0.05]), torch.tensor([0.05, 0.9, 0.05]), torch.tensor([0.05, 0.05, 0.9]), torch.tensor([0.45, 0.45, 0.1])]
    replies = [Reply({**models, name: models[name] + float(c), "appu": a}, 10, client_id=c) for c, a in enumerate(appus)]
    out = algorithm.aggregate(state, replies, INFO)
    beta = out["diag.weights"]
    assert float(out["diag.distance"]) < 1e-4 < float(out["diag.distance_uniform"])
    assert torch.allclose(out[name], models[name] + (beta * torch.arange(4.0)).sum(), atol=1e-5)
    metrics = algorithm.evaluate(out, {"x": torch.randn(6, 1, 8, 8), "y": torch.tensor([0, 1, 2, 0, 1, 2])})
    assert metrics["aggregation_weights"] == pytest.approx(beta.tolist(), abs=1e-6)
    assert metrics["appu_distance"] < metrics["appu_distance_uniform"]
    off = build("feddb", dma=False).aggregate(state, replies, INFO)
    assert torch.allclose(off["diag.weights"], torch.full((4,), 0.25))


def unlabeled_context(model, training, x: torch.Tensor, **fields):
    """A client's training context with ``x`` as its only (unlabeled) images, FixMatch views without flip, seed 0."""
    from fedprior.algorithms.engines.semi_supervised import Context
    from fedprior.data.augment.fixmatch import FixMatchAugment

    augment = FixMatchAugment((0.5,), (0.25,), flip=False)
    no_labels = torch.zeros(0, dtype=torch.long)
    return Context(model, None, {}, INFO.for_client(0), training, augment, torch.Generator().manual_seed(0), torch.device("cpu"), x[:0], no_labels, x, **fields)


def test_semifl_mixup_is_the_plain_loss_when_mixed_images_agree():
    from fedprior.algorithms.engines.semi_supervised import Training
    from fedprior.algorithms.semifl import mixup_loss

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3))
    x = torch.ones(5, 1, 8, 8)
    ctx = unlabeled_context(model, Training(epochs=1), x, labels=torch.full((5,), 2), mask=torch.tensor([True, True, False, False, False]))
    loss = mixup_loss(0.75, 1.0)(ctx, 0)
    expected = torch.nn.functional.cross_entropy(model(x[:1]), torch.tensor([2]))
    assert torch.allclose(loss, expected, atol=1e-5)  # identical images and labels: lambda drops out
    assert float(mixup_loss(0.75, 0.0)(ctx, 0)) == 0.0
    ctx.mask = torch.zeros(5, dtype=torch.bool)
    assert float(mixup_loss(0.75, 1.0)(ctx, 0)) == 0.0


# ---------------------------------------------------------------- the code's options: unlabeled mean, fallback


class ConstantLogits(torch.nn.Module):
    """A model whose logits ignore the image (so augmentations do not matter)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(x.shape[0], -1)


@pytest.mark.parametrize("mean, divisor", [("all", 5), ("confident", 2)])
def test_unlabeled_loss_sums_over_confident_images_and_divides_per_unlabeled_mean(mean, divisor):
    from fedprior.algorithms.engines.semi_supervised import SemiSupervised, Training
    from fedprior.algorithms.engines.supervised import GlobalModel

    # softmax(0, 0, ln 2) = (1/4, 1/4, 1/2): CE(label 2) = ln 2, CE(label 0) = ln 4; 2 of 5 images confident.
    model = ConstantLogits(torch.tensor([0.0, 0.0, math.log(2.0)]))
    training = Training(epochs=1, unlabeled_mean=mean)
    x = torch.zeros(5, 1, 8, 8)
    ctx = unlabeled_context(model, training, x, labels=torch.tensor([2, 1, 0, 1, 1]), mask=torch.tensor([True, False, True, False, False]))
    semi = SemiSupervised(TASK, GlobalModel(lambda: model), training)
    assert float(semi._unlabeled_loss(ctx).detach()) == pytest.approx(3 * math.log(2.0) / divisor, rel=1e-6)
    ctx.mask = torch.zeros(5, dtype=torch.bool)
    assert float(semi._unlabeled_loss(ctx)) == 0.0


@pytest.mark.parametrize(
    "threshold, fallback, steps, labeled_only",
    [
        (1.0, 5, 2 * 3, 1.0),  # nothing passes tau: E = 2 epochs of ceil(12 / 5) = 3 mini-batches
        (1.0, 0, 2, None),  # the paper's loop: E full-batch steps with L_u = 0
        (0.34, 5, 2, 0.0),  # images pass tau: the usual E full-batch steps
    ],
)
def test_labeled_only_fallback_when_nothing_passes_tau(threshold, fallback, steps, labeled_only):
    # Adam counts its steps; the client keeps that count in its State.
    algorithm = build("fixmatch", threshold=threshold, fallback_batch_size=fallback, optimizer="adam")
    reply, state = one_update(algorithm, client_data(labeled=12))
    assert (reply.metrics["pl_confident"] == 0) == (threshold == 1.0)
    counts = {int(v) for k, v in state.items() if k.endswith(":step")}
    assert counts == {steps}
    assert reply.metrics.get("labeled_only") == labeled_only
    if labeled_only == 1.0:
        assert reply.metrics["loss_unlabeled"] == 0.0 and reply.metrics["loss_labeled"] > 0


# ---------------------------------------------------------------- FedMatch


def test_decomposition_computes_the_same_and_learns_disjointly():
    from fedprior.algorithms.engines.semi_supervised import Context, Training
    from fedprior.algorithms.fedmatch import disjoint_backward
    from fedprior.models.convnet import ConvNet
    from fedprior.models.decomposed import decompose, sigma_psi_pairs

    torch.manual_seed(0)
    plain = ConvNet(1, 3, width=4, depth=2, norm="bn-batch")
    split = decompose(copy.deepcopy(plain))
    x, y = torch.randn(6, 1, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
    assert torch.allclose(plain(x), split(x))
    pairs = sigma_psi_pairs(split)
    assert len(pairs) == len(list(plain.parameters())) and all(float(p.detach().abs().sum()) == 0 for _, p in pairs)
    ctx = Context(split, None, {}, INFO.for_client(0), Training(epochs=1), None, None, torch.device("cpu"), x, y, x)
    loss_s = torch.nn.functional.cross_entropy(split(x), y)
    disjoint_backward(ctx, loss_s, torch.zeros(()))
    assert all(s.grad is not None and p.grad is None for s, p in pairs)
    for s, _ in pairs:
        s.grad = None
    loss_u = sum(p.pow(2).sum() - (s.detach() * p).sum() for s, p in pairs)
    disjoint_backward(ctx, torch.zeros(()), loss_u)
    assert all(s.grad is None and p.grad is not None for s, p in pairs)


def test_agreement_labels_follow_the_vote_of_own_and_helper_predictions():
    from fedprior.algorithms.engines.semi_supervised import Context, Training
    from fedprior.algorithms.fedmatch import agreement_labels

    class Fixed(torch.nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.logits = logits

        def forward(self, x):
            return self.logits

    own = torch.tensor([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.4, 0.3, 0.3]])
    helper_a = torch.tensor([[0.0, 5.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]])  # logits
    helper_b = torch.tensor([[0.0, 5.0, 0.0], [5.0, 0.0, 0.0], [0.0, 0.0, 5.0]])
    ctx = Context(
        None,
        None,
        {},
        INFO.for_client(0),
        Training(epochs=1, threshold=0.75),
        None,
        None,
        torch.device("cpu"),
        torch.zeros(0),
        torch.zeros(0),
        torch.zeros(3, 1, 8, 8),
        weak_unlabeled=torch.zeros(3, 1, 8, 8),
        probabilities=own,
        appu=own.mean(0),
    )
    labels, mask = agreement_labels(ctx)
    assert labels.tolist() == [0, 1, 0] and mask.tolist() == [True, True, False]  # no helpers: own argmax
    ctx.extra["helpers"] = [Fixed(helper_a), Fixed(helper_b)]
    labels, mask = agreement_labels(ctx)
    # votes: row 0 own 0, helpers 1, 1 -> 1; row 1 own 1, helpers 1, 0 -> 1; row 2 own 0, helpers 2, 2 -> 2
    assert labels.tolist() == [1, 1, 2] and mask.tolist() == [True, True, False]


def test_fedmatch_sends_helpers_every_interval_and_clients_pick_the_nearest():
    from fedprior.algorithms.fedmatch import EMBEDDING, HELPERS

    algorithm = build("fedmatch", helper_interval=2, helpers=1, threshold=0.34)
    state = algorithm.init(INFO)
    replies = []
    for c in range(3):
        reply, client_state = algorithm.client_update(algorithm.broadcast(state, INFO), {}, client_data(c), INFO.for_client(c))
        assert EMBEDDING in reply.arrays and torch.equal(client_state[EMBEDDING], reply.arrays[EMBEDDING])
        replies.append(Reply(reply.arrays, reply.num_examples, reply.metrics, c))
    state = algorithm.aggregate(state, replies, INFO)
    assert state[f"{HELPERS}ids"].tolist() == [0, 1, 2]
    assert not any(k.startswith(HELPERS) for k in algorithm.broadcast(state, RoundInfo(0, "federated", 3)).arrays)
    message = algorithm.broadcast(state, RoundInfo(0, "federated", 2))
    assert f"{HELPERS}embedding" in message.arrays and any(k.startswith(f"{HELPERS}2.model.") for k in message.arrays)
    # Client 0 whose last embedding equals client 2's picks client 2 as its helper (never itself).
    own = {EMBEDDING: state[f"{HELPERS}embedding"][2].clone()}
    from fedprior.algorithms.engines.semi_supervised import Context, Training
    from fedprior.algorithms.fedmatch import choose_helpers

    model = algorithm_spec("fedmatch")  # noqa: F841 (the registry entry exists)
    net_state = {k[len("model.") :]: v for k, v in message.arrays.items() if k.startswith("model.")}
    from fedprior.models import build_model
    from fedprior.models.decomposed import decompose

    local = decompose(build_model("convnet", TASK, norm="bn-batch", width=4))
    local.load_state_dict(net_state)
    ctx = Context(
        local,
        message,
        own,
        RoundInfo(0, "federated", 2).for_client(0),
        Training(epochs=1),
        None,
        None,
        torch.device("cpu"),
        torch.zeros(0),
        torch.zeros(0),
        torch.zeros(0),
    )
    choose_helpers(1)(ctx)
    helper = ctx.extra["helpers"][0]
    psi = {k: v for k, v in helper.state_dict().items() if k.endswith(".psi")}
    expected = {k[len(f"{HELPERS}2.model.") :]: v for k, v in message.arrays.items() if k.startswith(f"{HELPERS}2.model.")}
    assert psi.keys() == expected.keys() and all(torch.equal(psi[k], expected[k]) for k in psi)
    ctx.state = {EMBEDDING: state[f"{HELPERS}embedding"][0].clone()}
    ctx.info = RoundInfo(0, "federated", 2).for_client(0)
    choose_helpers(1)(ctx)
    assert len(ctx.extra["helpers"]) == 1  # its own entry is skipped, another one is taken


def test_fedmatch_weights_the_supervised_loss_on_sigma_by_lambda_s():
    from fedprior.algorithms.engines.semi_supervised import Context, Training
    from fedprior.algorithms.fedmatch import disjoint
    from fedprior.models.decomposed import decompose, sigma_psi_pairs

    torch.manual_seed(0)
    model = decompose(torch.nn.Linear(4, 3))
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    ctx = Context(model, None, {}, INFO.for_client(0), Training(epochs=1), None, None, torch.device("cpu"), x, y, x)
    grads = []
    for weight in (1.0, 10.0):
        disjoint(weight)(ctx, torch.nn.functional.cross_entropy(model(x), y), torch.zeros(()))
        grads.append([s.grad.clone() for s, _ in sigma_psi_pairs(model)])
        assert all(p.grad is None for _, p in sigma_psi_pairs(model))
    assert all(torch.allclose(10 * a, b) for a, b in zip(*grads, strict=True))


def test_psi_starts_at_a_fraction_of_sigma_and_is_hard_thresholded_at_inference():
    from fedprior.models.decomposed import decompose, sigma_psi_pairs

    torch.manual_seed(0)
    plain = torch.nn.Linear(4, 3)
    model = decompose(copy.deepcopy(plain), psi_factor=0.2, threshold=0.05)
    for sigma, psi in sigma_psi_pairs(model):
        assert torch.allclose(psi, 0.2 * sigma)
    x = torch.randn(5, 4)
    assert torch.allclose(model(x), 1.2 * plain(x), atol=1e-6)  # theta = 1.2 x the initialization (the code's nets.py)
    # psi = (0.04, 0.06) on a 2-weight layer: training sees both, inference only the one above 0.05.
    layer = decompose(torch.nn.Linear(2, 1, bias=False), threshold=0.05)
    with torch.no_grad():
        layer.parametrizations.weight.original.copy_(torch.tensor([[1.0, 1.0]]))
        layer.parametrizations.weight[0].psi.copy_(torch.tensor([[0.04, 0.06]]))
    ones = torch.ones(1, 2)
    assert float(layer(ones).detach()) == pytest.approx(2.10)
    assert float(layer.eval()(ones).detach()) == pytest.approx(2.06)


def test_fedmatch_upload_resets_entries_that_barely_moved():
    from fedprior.algorithms.fedmatch import cut_upload

    received = {"w.original": torch.tensor([1.0, 1.0, 1.0]), "w.psi": torch.tensor([0.0, 0.5, 0.5]), "bn.other": torch.tensor([3.0])}
    trained = {"w.original": torch.tensor([1.00004, 1.0002, 0.9]), "w.psi": torch.tensor([3e-6, 0.50004, 0.6]), "bn.other": torch.tensor([4.0])}
    out = cut_upload(trained, received, l1_threshold=5e-6, delta=5e-5)
    assert out.keys() == {"w.original", "w.psi"}
    assert out["w.original"].tolist() == pytest.approx([1.0, 1.0002, 0.9])  # a move of 4e-5 is reset, 2e-4 kept
    # psi 3e-6 is below l1_threshold: sparsified to 0, no move from 0, reset; 0.5 -> 0.50004 reset; 0.6 kept.
    assert out["w.psi"].tolist() == pytest.approx([0.0, 0.5, 0.6])


def test_fedmatch_lr_decays_after_patience_epochs_without_improvement():
    from fedprior.algorithms.fedmatch import adaptive_lr_decay

    best, wait, scale = math.inf, 2, 1.0
    trace = []
    for loss in (1.0, 0.9, 0.95, 0.92, 0.91, 0.8, 0.85, 0.85):
        best, wait, scale = adaptive_lr_decay(loss, best, wait, scale, patience=2, factor=3.0)
        trace.append((best, wait, scale))
    assert trace[1] == (0.9, 2, 1.0)
    assert trace[2] == (0.9, 1, 1.0) and trace[3] == (0.9, 2, pytest.approx(1 / 3))  # 2 epochs without a lower loss
    assert trace[4] == (0.9, 1, pytest.approx(1 / 3)) and trace[5] == (0.8, 2, pytest.approx(1 / 3))
    assert trace[7] == (0.8, 2, pytest.approx(1 / 9))


def test_fedmatch_batches_and_the_unlabeled_loss_of_one_batch():
    from fedprior.algorithms.engines.fedmatch_local import batch_plan, unlabeled_batch_loss, vote
    from fedprior.algorithms.engines.semi_supervised import Training

    assert batch_plan(16, 40, 10) == (2, 20) and batch_plan(14, 40, 10) == (1, 40) and batch_plan(3, 7, 10) == (1, 7)
    own = torch.tensor([[0.1, 0.8, 0.1]])
    assert vote(own, [torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([[0.0, 0.0, 1.0]])]).tolist() == [2]
    assert vote(own, [torch.tensor([[0.0, 0.0, 1.0]])]).tolist() == [1]  # a tie goes to the lower class

    # Local prediction softmax(0, 0, ln 8) = (0.1, 0.1, 0.8) on every image: all 4 pass 0.75, label 2, CE = -ln 0.8.
    model = ConstantLogits(torch.tensor([0.0, 0.0, math.log(8.0)]))
    x = torch.zeros(4, 1, 8, 8)
    training = Training(epochs=1, threshold=0.75, unlabeled_weight=0.01, unlabeled_mean="confident")
    ctx = unlabeled_context(model, training, x)
    loss, confident = unlabeled_batch_loss(ctx, x, consistency=0.5, l1=0.0, l2=0.0)
    assert confident == 4 and float(loss.detach()) == pytest.approx(-0.01 * math.log(0.8), rel=1e-5)
    # Two helpers predicting (0.5, 0.25, 0.25) outvote the own class 2: label 0, CE = -ln 0.1;
    # KL(helper || local) = 0.5 ln(0.5 / 0.1) + 0.25 ln(0.25 / 0.1) + 0.25 ln(0.25 / 0.8) per image, weighted 0.5.
    helper = ConstantLogits(torch.log(torch.tensor([0.5, 0.25, 0.25])))
    ctx.extra["helpers"] = [helper, helper]
    loss, confident = unlabeled_batch_loss(ctx, x, consistency=0.5, l1=0.0, l2=0.0)
    kl = 0.5 * math.log(5.0) + 0.25 * math.log(2.5) + 0.25 * math.log(0.3125)
    assert float(loss.detach()) == pytest.approx(0.5 * kl - 0.01 * math.log(0.1), rel=1e-5)
    ctx.training = Training(epochs=1, threshold=0.9)
    assert unlabeled_batch_loss(ctx, x, consistency=0.5, l1=0.0, l2=0.0)[1] == 0  # 0.8 < 0.9: nothing confident


def test_fedmatch_code_loop_takes_per_batch_steps_and_keeps_its_lr_state():
    from fedprior.algorithms.fedmatch import LR_SCALE, PATIENCE

    algorithm = build("fedmatch", threshold=0.34, lr_patience=1)
    data = client_data(labeled=16)
    reply, state = one_update(algorithm, data)
    assert state[PATIENCE] == 1 and float(state[LR_SCALE]) == 1.0  # first epoch: the loss improves on infinity
    assert "pl_confident_batches" in reply.metrics
    full = build("fedmatch", threshold=0.34, labeled_batch_size=0)
    reply_full, _ = one_update(full, data)
    assert "pl_confident_batches" not in reply_full.metrics
    # A client whose loss did not improve (best loss -inf) decays its lr at once, with patience 1.
    _, decayed = one_update(algorithm, data, state={**state, "fedmatch.best_loss": torch.tensor(-math.inf)})
    assert float(decayed[LR_SCALE]) == pytest.approx(1 / 3)


def test_wrn28_2_shape_and_batch_statistics_norm():
    from fedprior.models.wrn import WideResNet

    net = WideResNet(3, 10)
    assert sum(p.numel() for p in net.parameters()) == 1467610  # WRN-28-2 on CIFAR-10: 1.47M
    assert net.feature_dim == 128 and net(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert not any("running" in k for k in net.state_dict())  # bn-batch: no running statistics
    assert any("running_mean" in k for k in WideResNet(1, 10, norm="bn").state_dict())
    assert net.embed(torch.randn(2, 3, 32, 32)).shape == (2, 128)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_optimizer_state_round_trips_through_client_state(kind):
    from fedprior.algorithms.engines.semi_supervised import Training, make_optimizer
    from fedprior.algorithms.pieces.optimizer_state import load_optimizer_state, optimizer_state

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(8, 4)
    training = Training(epochs=1, optimizer=kind)

    def step(opt):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    opt = make_optimizer(list(model.parameters()), training, 0.1)
    step(opt)
    saved = optimizer_state(opt, model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    step(opt)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(before)
    fresh = make_optimizer(list(model.parameters()), training, 0.1)
    load_optimizer_state(fresh, model, saved)
    step(fresh)
    assert all(torch.allclose(model.state_dict()[k], expected[k]) for k in expected)


@pytest.mark.parametrize("name", ["feddb", "fedavg-labeled"])
def test_eval_batch_size_is_the_sample_of_batchnorm_statistics_at_inference(name):
    """norm = bn-batch normalizes by each forward pass's batch: the test loss is that of chunks of eval_batch_size
    images (the code's 250, fedprior's 1024), here 3 of 6."""
    import torch.nn.functional as F

    from fedprior.models import build_model

    x, y = torch.randn(6, 1, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
    chunked, whole = build(name, eval_batch_size=3), build(name)
    state = chunked.init(INFO)
    model = build_model("convnet", TASK, norm="bn-batch", width=4)
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")})
    model.eval()
    with torch.no_grad():
        by_three = F.cross_entropy(torch.cat([model(x[:3]), model(x[3:])]), y).item()
        by_six = F.cross_entropy(model(x), y).item()
    assert chunked.evaluate(state, {"x": x, "y": y})["loss"] == pytest.approx(by_three, rel=1e-5)
    assert whole.evaluate(state, {"x": x, "y": y})["loss"] == pytest.approx(by_six, rel=1e-5)
    assert abs(by_three - by_six) > 1e-3


def test_eval_batch_size_reaches_the_pseudo_labeling_pass():
    """Algorithm 1's APP-U (local_epochs = 0: the uploaded APP-U is DPL's own) changes with the inference batch under bn-batch."""
    data = client_data()

    def appu(**values) -> torch.Tensor:
        algorithm = algorithm_spec("feddb").build(TASK, {**SMALL, **values}, Runtime(0, 8))
        return one_update(algorithm, data)[0].arrays["appu"]

    assert torch.equal(appu(), appu(eval_batch_size=40))  # 40 unlabeled images: one pass either way
    assert not torch.allclose(appu(), appu(eval_batch_size=7), atol=1e-4)
