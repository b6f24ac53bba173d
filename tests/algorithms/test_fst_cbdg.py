"""FST-CBDG: the equations on hand-computed cases, the projected noise, vectorized = per-client."""

import math

import pytest
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.engines.linear_heads import BIAS, WEIGHT, HeadTraining, Sgd
from fedprior.algorithms.fst_cbdg import (
    FstObjective,
    balanced_counts,
    equal_counts,
    fst_cbdg,
    self_training_loss,
    zero_shot_probabilities,
)
from fedprior.algorithms.pieces.pseudo_labels import moving_average

K, D = 3, 6
INFO = RoundInfo(seed=0, stage="federated", round=1)


def make_task(seed=0):
    g = torch.Generator().manual_seed(seed)
    text = F.normalize(torch.randn(K, D, generator=g), dim=1)
    return Task(num_classes=K, input_shape=(D,), class_names=("a", "b", "c"), num_clients=5, prior={"text_features": text})


def client_features(task, n, seed):
    g = torch.Generator().manual_seed(100 + seed)
    y = torch.randint(0, K, (n,), generator=g)
    return {"x": F.normalize(task.prior["text_features"][y] + 0.5 * torch.randn(n, D, generator=g), dim=1)}


def test_eq2_zero_shot_is_softmax_of_raw_dot_products():
    image = torch.tensor([[1.0, 0.0]])
    text = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = zero_shot_probabilities(image, text)
    assert torch.allclose(p, torch.tensor([[math.e / (math.e + 1), 1 / (math.e + 1)]]))


def test_eq3_self_training_loss_by_hand():
    logits = torch.tensor([[0.0, math.log(3.0)]])  # f = (0.25, 0.75)
    q = torch.tensor([[0.5, 0.5]])
    expected = -(0.5 * math.log(0.25) + 0.5 * math.log(0.75))
    assert torch.allclose(self_training_loss(logits, q), torch.tensor([expected]))


def test_eq4_moving_average_by_hand():
    q = torch.tensor([[1.0, 0.0]])
    f = torch.tensor([[0.2, 0.8]])
    assert torch.allclose(moving_average(q, f, 0.9), torch.tensor([[0.92, 0.08]]))


def test_eq7_balanced_counts_by_hand():
    m = torch.tensor([5, 2, 0, 3])
    assert balanced_counts(m, 0.0).tolist() == [0, 3, 5, 2]  # m_k + n_k = m_k* = 5
    assert balanced_counts(m, 0.5).tolist() == [2, 5, 7, 4]  # = floor(1.5 * 5) = 7
    assert balanced_counts(torch.tensor([[1, 1], [4, 0]]), 0.0).tolist() == [[0, 0], [0, 4]]
    assert equal_counts(torch.tensor([10, 3]), 4).tolist() == [[3, 3, 2, 2], [1, 1, 1, 0]]


def objective_for(task, noise, sigma, lam=1.0, rows=4):
    return FstObjective(
        task,
        task.prior["text_features"],
        torch.full((rows, K), 1 / K),
        beta=0.9,
        gamma=0.0,
        lam=lam,
        sigma=sigma,
        sampling="balanced",
        losses="synthetic",
        label_refresh="batch",
        count_source="labels",
        count_every="epoch",
        noise=noise,
    )


def test_eq6_synthetic_loss_is_the_mean_ce_at_the_text_prototypes_when_sigma_is_zero():
    task = make_task()
    text = task.prior["text_features"]
    w, b = torch.randn(K, D), torch.randn(K)
    run = HeadTraining(w, b, [torch.randn(4, D)], [torch.Generator().manual_seed(0)], 4, Sgd(0.1))
    y = torch.tensor([0, 2, 2, 1])
    expected = F.cross_entropy(text[y] @ w.T + b, y)
    for noise in ("direct", "projected"):
        objective = objective_for(task, noise, sigma=0.0)
        objective.synthetic_labels = [[y]]
        assert torch.allclose(objective.synthetic_loss(objective.synthetic_batch(run, 0)), expected.view(1), atol=1e-6)


def test_closed_form_synthetic_gradient_equals_autograd():
    """dW, db of lambda * mean CE(W z + b, y) on the drawn z ('direct'): our formula vs autograd."""
    task = make_task()
    w, b = torch.randn(K, D), torch.randn(K)
    run = HeadTraining(w, b, [torch.randn(4, D)], [torch.Generator().manual_seed(3)], 4, Sgd(0.1))
    objective = objective_for(task, "direct", sigma=0.5, lam=2.0)
    y = torch.tensor([0, 2, 2, 1, 1])
    objective.synthetic_labels = [[y]]
    batch = objective.synthetic_batch(run, 0)
    g = objective.logit_gradients(batch)
    wg, bg = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    (2.0 * F.cross_entropy(batch["z"][0] @ wg.T + bg, y)).backward()
    assert torch.allclose(objective.span_gradient(batch, g)[0], wg.grad, atol=1e-5)
    assert torch.allclose(g.sum(1)[0], bg.grad, atol=1e-6)


def gradient_samples(noise: str, draws: int, orthogonal: bool = True) -> torch.Tensor:
    """Gradients of lambda L_tSamp w.r.t. W for ``draws`` independent noise draws (one client each, one batched call)."""
    task = make_task(1)
    g = torch.Generator().manual_seed(5)
    w, b = torch.randn(K, D, generator=g), torch.randn(K, generator=g)
    y = torch.tensor([0, 1, 1, 2, 2, 2])
    generators = [torch.Generator().manual_seed(1000 + i) for i in range(draws)]
    run = HeadTraining(w, b, [torch.randn(2, D)] * draws, generators, 2, Sgd(0.1))
    objective = objective_for(task, noise, sigma=0.7, lam=2.0, rows=2 * draws)
    objective.synthetic_labels = [[y]] * draws
    batch = objective.synthetic_batch(run, 0)
    logit_grads = objective.logit_gradients(batch)
    grad = objective.span_gradient(batch, logit_grads)
    if noise == "projected" and orthogonal:
        grad = grad + objective.orthogonal_gradient(batch, logit_grads)
    return grad.flatten(1)


@pytest.mark.parametrize(
    "label_refresh, count_source, sampling, losses, count_every",
    [
        ("batch", "labels", "balanced", "both", "iteration"),
        ("all", "model", "equal", "both", "iteration"),
        ("batch", "labels", "balanced", "synthetic", "iteration"),
        ("all", "labels", "balanced", "both", "epoch"),
        ("batch", "model", "equal", "both", "epoch"),
    ],
)
def test_vectorized_equals_per_client(label_refresh, count_source, sampling, losses, count_every):
    task = make_task()
    algo = fst_cbdg(
        task, Runtime(2, 4), label_refresh=label_refresh, count_source=count_source, sampling=sampling, losses=losses, count_every=count_every, sigma=0.3
    )
    state = algo.init(INFO)
    message = algo.broadcast(state, INFO)
    datas = [client_features(task, n, c) for c, n in enumerate([9, 4, 13])]
    infos = [INFO.for_client(c) for c in range(3)]
    together = algo.client_update_many(message, [{}, {}, {}], datas, infos)
    for (reply, new_state), data, info in zip(together, datas, infos, strict=True):
        alone, alone_state = algo.client_update(message, {}, data, info)
        for name in (WEIGHT, BIAS):
            assert torch.allclose(reply.arrays[name], alone.arrays[name], atol=1e-5)
        assert torch.allclose(new_state["labels"], alone_state["labels"], atol=1e-5)
        assert reply.metrics == alone.metrics and reply.num_examples == data["x"].shape[0]


def test_initial_model_is_zero_shot_and_self_training_alone_cannot_move_it():
    """With q^0 = p = f, the soft cross-entropy has zero gradient, so L_iST alone keeps W = T (Table 3's finding)."""
    task = make_task()
    algo = fst_cbdg(task, Runtime(3, 4), losses="self-training", weight_decay=0.0)
    state = algo.init(INFO)
    assert torch.equal(state[WEIGHT], task.prior["text_features"]) and torch.equal(state[BIAS], torch.zeros(K))
    data = client_features(task, 10, 0)
    reply, new_state = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(0))
    assert torch.allclose(reply.arrays[WEIGHT], state[WEIGHT], atol=1e-6)
    assert torch.allclose(new_state["labels"], zero_shot_probabilities(data["x"], task.prior["text_features"]), atol=1e-6)


def test_soft_labels_persist_and_move_towards_the_model():
    task = make_task()
    algo = fst_cbdg(task, Runtime(1, 4), sigma=0.2)
    state = algo.init(INFO)
    data = client_features(task, 12, 3)
    reply, first = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(0))
    assert first["labels"].shape == (12, K) and torch.allclose(first["labels"].sum(1), torch.ones(12))
    info2 = RoundInfo(seed=0, stage="federated", round=2).for_client(0)
    _, second = algo.client_update(algo.broadcast(state, INFO), first, data, info2)
    _, fresh = algo.client_update(algo.broadcast(state, INFO), {}, data, info2)
    assert not torch.allclose(second["labels"], fresh["labels"])  # the state was used
    forgetful = fst_cbdg(task, Runtime(1, 4), keep_labels=False)
    assert forgetful.client_update(algo.broadcast(state, INFO), first, data, info2)[1] == {}


def test_synthetic_counts_follow_eq7_and_clients_never_see_labels():
    task = make_task()
    algo = fst_cbdg(task, Runtime(1, 64))
    assert algo.inputs == ("x",)
    data = client_features(task, 30, 4)
    state = algo.init(INFO)
    p = zero_shot_probabilities(data["x"], task.prior["text_features"])
    expected = int(balanced_counts(torch.bincount(p.argmax(1), minlength=K), 0.0).sum())
    reply, _ = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(0))
    assert reply.metrics["synthetic_samples"] == expected


def step_counts(objective, run, step):
    """Per client, how many synthetic samples of each class the step draws."""
    batch = objective.synthetic_batch(run, step)
    return [torch.bincount(batch["y"][c][batch["mask"][c]], minlength=K) for c in range(run.num_clients)]


@pytest.mark.parametrize("sampling", ["balanced", "equal"])
def test_eq7_counts_every_iteration_from_the_refreshed_labels(sampling):
    """Algorithm 1, lines 14-16: each iteration counts m_k from the labels q^t it has just refreshed.

    With count_every='epoch' the step draws its share of the plan made at the epoch's start,
    whatever the labels have become since (the order that collapsed the IID columns).
    """
    task = make_task()
    xs = [client_features(task, n, c)["x"] for c, n in enumerate([6, 9])]
    q = torch.zeros(15, K)
    q[:, 0] = 1.0  # every image's pseudo-label is class 0 at the epoch's start
    by_iteration = objective_for(task, "projected", 0.1, rows=15)
    by_iteration.count_every, by_iteration.sampling, by_iteration.q = "iteration", sampling, q.clone()
    by_epoch = objective_for(task, "projected", 0.1, rows=15)
    by_epoch.sampling, by_epoch.q = sampling, q.clone()
    runs = [
        HeadTraining(task.prior["text_features"], torch.zeros(K), xs, [torch.Generator().manual_seed(c) for c in range(2)], 3, Sgd(0.1, 0.0, 0.0))
        for _ in range(2)
    ]
    for objective, run in zip((by_iteration, by_epoch), runs, strict=True):
        objective.start_epoch(run, 0)
    start = [torch.tensor([6, 0, 0]), torch.tensor([9, 0, 0])]  # m_k at the start: n = (0, 6, 6), (0, 9, 9)
    for c, m in enumerate(start):
        n = balanced_counts(m, 0.0)
        expected = equal_counts(n.sum()[None], K)[0] if sampling == "equal" else n
        assert torch.equal(step_counts(by_iteration, runs[0], 0)[c], expected)
    refreshed = torch.zeros(15, K)
    refreshed[[0, 1, 2, 3, 4, 6, 7]] = torch.tensor([0.2, 0.7, 0.1])  # client 0: 5 of class 1, 1 of 0; client 1: 2 of class 1
    refreshed[[5, 8, 9, 10, 11, 12, 13, 14]] = torch.tensor([0.6, 0.3, 0.1])
    for objective in (by_iteration, by_epoch):
        objective.q = refreshed
    now = [torch.tensor([1, 5, 0]), torch.tensor([7, 2, 0])]
    iteration_counts = step_counts(by_iteration, runs[0], 1)
    for c, m in enumerate(now):
        n = balanced_counts(m, 0.0)
        expected = equal_counts(n.sum()[None], K)[0] if sampling == "equal" else n
        assert torch.equal(iteration_counts[c], expected)
    # the epoch's plan splits the start's n over the client's steps (2 and 3), whatever q is now
    planned = [torch.cat(by_epoch.synthetic_labels[c]) for c in range(2)]
    assert [int(p.numel()) for p in planned] == [12, 18]
    assert sum(int(t.sum()) for t in step_counts(by_epoch, runs[1], 1)) == sum(int(by_epoch.synthetic_labels[c][1].numel()) for c in range(2))


def test_aggregation_is_the_plain_mean_by_default():
    task = make_task()
    algo = fst_cbdg(task, Runtime(1, 4))
    state = algo.init(INFO)
    from fedprior.algorithms.base import Reply

    r1 = Reply({WEIGHT: torch.zeros(K, D), BIAS: torch.zeros(K)}, num_examples=1)
    r2 = Reply({WEIGHT: torch.ones(K, D), BIAS: torch.ones(K)}, num_examples=3)
    assert torch.allclose(algo.aggregate(state, [r1, r2], INFO)[WEIGHT], torch.full((K, D), 0.5))
    weighted = fst_cbdg(task, Runtime(1, 4), aggregation="weighted")
    assert torch.allclose(weighted.aggregate(state, [r1, r2], INFO)[WEIGHT], torch.full((K, D), 0.75))


def test_the_run_summary_reports_zero_shot_accuracy(shared_cache, tmp_path):
    """--json gains zero_shot_accuracy (Eq. 2's argmax): the accuracy of the text-initialized head before round 1."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start
    from tests.support.cli import STANDIN

    name, config = load_config("fst-cbdg", [*STANDIN, "federation.num_clients=10", "federation.rounds=1"])
    summary = start(name, config, tmp_path / "run")
    assert 0.3 < summary["zero_shot_accuracy"] <= 1.0  # chance is 0.1
    assert summary["zero_shot_accuracy"] == summary["initial_accuracy"]
