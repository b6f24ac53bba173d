"""FedDB's equations on hand-made numbers: APP-U (Eq. 8), DPL (Eq. 14, Algorithm 1), DMA (Eq. 15-17, Algorithm 2),
the moving average (Algorithm 3), the JS diagnostics (Figure 3), and the baselines' distinctive steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import Reply, RoundInfo
from fedprior.algorithms.engines.semi_supervised import Training
from fedprior.algorithms.pieces.bias import bias_diagnostics, js_divergence
from fedprior.algorithms.pieces.dma import algorithm2, dma_weights, uniform_distance
from fedprior.algorithms.pieces.pseudo_labels import app_u, debias, hard_labels, label_quality, label_quality_tensors, masked_cross_entropy, moving_average

# ---------------------------------------------------------------- APP-U and DPL


def test_app_u_is_the_mean_prediction():
    p = torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.4, 0.1], [0.3, 0.3, 0.4]])
    assert torch.allclose(app_u(p), torch.tensor([0.5, 0.3, 0.2]))
    assert torch.allclose(app_u(torch.zeros(0, 4)), torch.full((4,), 0.25))


def test_dpl_turns_a_biased_prediction_into_the_debiased_one():
    # p = (0.6, 0.3, 0.1) under a prior bias p_bar = (0.6, 0.2, 0.2):
    # p / p_bar = (1, 1.5, 0.5), renormalized (1/3, 1/2, 1/6): the label moves from class 0 to class 1.
    p = torch.tensor([[0.6, 0.3, 0.1]])
    prior = torch.tensor([0.6, 0.2, 0.2])
    q = debias(p, prior)
    assert torch.allclose(q, torch.tensor([[1 / 3, 1 / 2, 1 / 6]]))
    assert hard_labels(p, 0.5)[0].item() == 0 and hard_labels(q, 0.5)[0].item() == 1
    # A uniform prior changes nothing.
    assert torch.allclose(debias(p, torch.full((3,), 1 / 3)), p)


def test_threshold_is_inclusive_and_masks_low_confidence():
    p = torch.tensor([[0.95, 0.05], [0.94, 0.06], [0.2, 0.8]])
    labels, mask = hard_labels(p, 0.95)
    assert labels.tolist() == [0, 0, 1] and mask.tolist() == [True, False, False]


def test_moving_average_of_app_u():
    old, new = torch.tensor([0.8, 0.2]), torch.tensor([0.4, 0.6])
    assert torch.allclose(moving_average(old, new, 0.5), torch.tensor([0.6, 0.4]))
    assert torch.allclose(moving_average(old, new, 1.0), old)


def test_label_quality_counts_coverage_and_accuracy_of_assigned_labels():
    labels = torch.tensor([0, 1, 1, 2])
    mask = torch.tensor([True, True, False, False])
    truth = torch.tensor([0, 2, 1, 2])
    out = label_quality(labels, mask, truth)
    assert out == {"coverage": 0.5, "accuracy_all": 0.75, "accuracy": 0.5}
    assert "accuracy" not in label_quality(labels, torch.zeros(4, dtype=torch.bool), truth)
    on_device = label_quality_tensors(labels, mask, truth)
    assert all(v.dim() == 0 for v in on_device.values()) and float(on_device["accuracy"]) == 0.5
    assert math.isnan(float(label_quality_tensors(labels, torch.zeros(4, dtype=torch.bool), truth)["accuracy"]))


# ---------------------------------------------------------------- Eq. (4) as a masked loss

HAND_LOGITS = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0], [-2.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 4.0, -3.0]])
HAND_LABELS = torch.tensor([0, 2, 1, 1, 0])


def indexed_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, mean: str) -> torch.Tensor:
    """The boolean-indexed form the client used before (the reference)."""
    rows = mask.nonzero().flatten()
    if rows.numel() == 0:
        return torch.zeros(())
    total = F.cross_entropy(logits[rows], labels[rows], reduction="sum")
    return total / (logits.shape[0] if mean == "all" else rows.numel())


def by_hand(mask: list[bool], mean: str) -> float:
    """sum_n 1(n confident) -log softmax(z_n)[y_n] / (N or the number confident), in float64."""
    z, y = HAND_LOGITS.double(), HAND_LABELS
    terms = [float(torch.logsumexp(z[n], 0) - z[n, y[n]]) for n in range(5) if mask[n]]
    return sum(terms) / (5 if mean == "all" else max(len(terms), 1))


@pytest.mark.parametrize("mean", ["all", "confident"])
@pytest.mark.parametrize(
    "mask", [[True, False, True, False, True], [False, True, False, False, False], [True] * 5, [False] * 5], ids=["three", "one", "every", "none"]
)
def test_masked_cross_entropy_is_the_boolean_indexed_loss(mean, mask):
    """Eq. (4) with static shapes: rows out of the mask are ignored, not selected; the same value as indexing them out
    (and 0 when nothing passes tau, the labeled-only case), for both means."""
    m = torch.tensor(mask)
    loss = masked_cross_entropy(HAND_LOGITS, HAND_LABELS, m, mean, total=5)
    assert loss.shape == () and loss.dtype == torch.float32
    assert torch.equal(loss, indexed_loss(HAND_LOGITS, HAND_LABELS, m, mean))
    assert float(loss) == pytest.approx(by_hand(mask, mean), rel=1e-6)
    if not any(mask):
        assert float(loss) == 0.0


def test_masked_cross_entropy_keeps_gradients_off_the_unmasked_rows_and_refuses_unknown_means():
    logits = HAND_LOGITS.clone().requires_grad_(True)
    masked_cross_entropy(logits, HAND_LABELS, torch.tensor([True, False, True, False, False]), "confident", total=5).backward()
    assert logits.grad is not None and torch.equal(logits.grad[[1, 3, 4]], torch.zeros(3, 3)) and bool(logits.grad[[0, 2]].abs().sum() > 0)
    with pytest.raises(ValueError, match="unlabeled_mean must be 'all' or 'confident', got 'mean'"):
        masked_cross_entropy(HAND_LOGITS, HAND_LABELS, torch.ones(5, dtype=torch.bool), "mean", total=5)


# ---------------------------------------------------------------- DMA

TWO = torch.tensor([[0.9, 0.1], [0.3, 0.7]])  # beta = (1/3, 2/3) makes the weighted mean uniform


def test_dma_simplex_reaches_uniform_when_it_is_reachable():
    beta = dma_weights(TWO, solver="simplex")
    assert torch.allclose(beta, torch.tensor([1 / 3, 2 / 3]), atol=1e-5)
    assert uniform_distance(TWO, beta) < 1e-5
    rng = np.random.default_rng(0)
    built = 0
    while built < 3:  # 6 clients, 4 classes, built so that weights (0.1 x 5, 0.5) give a uniform mean
        others = rng.dirichlet(np.full(4, 2.0), size=5)
        last = (np.full(4, 0.25) - 0.1 * others.sum(0)) / 0.5
        if (last < 0).any():
            continue
        appus = torch.from_numpy(np.vstack([others, last])).float()
        assert uniform_distance(appus, dma_weights(appus, solver="simplex")) < 1e-5
        assert uniform_distance(appus, torch.full((6,), 1 / 6)) > 1e-3
        built += 1


def test_algorithm2_first_step_by_hand():
    # beta = (1/2, 1/2): aggregated (0.6, 0.4), gap (0.1, -0.1), |gap| = 0.1 sqrt 2;
    # grad of the norm = P gap / |gap| = (0.08, -0.04) / 0.1414 = (0.5657, -0.2828);
    # beta <- softmax((0.5, 0.5) - grad) = softmax(-0.0657, 0.7828) = (0.2998, 0.7002).
    beta = algorithm2(TWO, steps=1, lr=1.0, loss="norm")
    expected = torch.softmax(torch.tensor([0.5 - 0.08 / (0.1 * math.sqrt(2)), 0.5 + 0.04 / (0.1 * math.sqrt(2))]), 0)
    assert torch.allclose(beta, expected, atol=1e-6)
    # The code's MSE: grad = (2/K) P gap = (0.08, -0.04): softmax(0.42, 0.54).
    assert torch.allclose(algorithm2(TWO, steps=1, loss="mse"), torch.softmax(torch.tensor([0.42, 0.54]), 0), atol=1e-6)


def test_dma_mse_code_step_by_hand_and_against_the_authors_loop():
    # beta = (1/2, 1/2), MSE grad (0.08, -0.04); a fresh SGD(momentum 0.9, weight_decay 0.9, nesterov)
    # steps by 1.9 (grad + 0.9 beta) = 1.9 (0.53, 0.41): beta <- softmax(0.5 - 1.007, 0.5 - 0.779).
    expected = torch.softmax(torch.tensor([0.5 - 1.9 * 0.53, 0.5 - 1.9 * 0.41]), 0)
    assert torch.allclose(algorithm2(TWO, steps=1, loss="mse-code"), expected, atol=1e-6)
    assert not torch.allclose(algorithm2(TWO, steps=1, loss="mse"), expected, atol=1e-2)

    def authors_loop(appus: torch.Tensor, steps: int) -> torch.Tensor:  # src/modules/modules.py, Server.update
        weight = torch.full((appus.shape[0], 1), 1.0 / appus.shape[0], dtype=torch.float64, requires_grad=True)
        target = torch.full((appus.shape[1],), 1.0 / appus.shape[1], dtype=torch.float64)
        for _ in range(steps):
            optimizer = torch.optim.SGD([weight], lr=1.0, momentum=0.9, weight_decay=0.9, nesterov=True)
            optimizer.zero_grad()
            torch.nn.functional.mse_loss((appus.double() * weight).sum(0), target).backward()
            optimizer.step()
            weight = torch.softmax(weight.detach(), 0).requires_grad_(True)
        return weight.detach().reshape(-1).float()

    appus = torch.from_numpy(np.random.default_rng(0).dirichlet(np.full(10, 0.3), size=10)).float()
    code = authors_loop(appus, 100)
    assert torch.allclose(algorithm2(appus, loss="mse-code"), code, atol=1e-6)
    assert (algorithm2(appus, loss="mse") - code).abs().max() > 1e-5


def test_algorithm2_keeps_weights_on_the_simplex_and_ignores_identical_clients():
    appus = torch.tensor([[0.5, 0.3, 0.2]] * 4)
    for loss in ("norm", "mse", "mse-code"):
        beta = dma_weights(appus, loss=loss)
        assert torch.all(beta > 0) and math.isclose(float(beta.sum()), 1.0, rel_tol=1e-6)
        assert uniform_distance(appus, beta) == pytest.approx(uniform_distance(appus, torch.full((4,), 0.25)), abs=1e-6)
    assert torch.equal(dma_weights(appus[:1]), torch.ones(1))


def test_uniform_distance_is_the_euclidean_gap():
    assert uniform_distance(TWO, torch.tensor([0.5, 0.5])) == pytest.approx(0.1 * math.sqrt(2))


# ---------------------------------------------------------------- Figure 3 and the schedule


def test_js_divergence_in_bits():
    assert js_divergence([0.5, 0.5], [0.5, 0.5]) == pytest.approx(0.0)
    assert js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    assert js_divergence([2, 2], [1, 1]) == pytest.approx(0.0)  # normalized first


def test_bias_diagnostics_compare_accuracy_with_appu_and_labels():
    accuracy = [0.9, 0.1]  # biased to class 0
    appus = np.array([[0.9, 0.1], [0.5, 0.5]])
    labeled = np.array([[0, 10], [5, 5]])  # client 0's labels point the other way
    out = bias_diagnostics(accuracy, appus, labeled, np.array([0.5, 0.5]))
    assert out["js_appu_min"] == pytest.approx(0.0, abs=1e-12)  # client 0's APP-U is the bias itself
    assert out["js_labeled_max"] == pytest.approx(js_divergence([0.9, 0.1], [0, 1]))
    assert out["js_appu_mean"] < out["js_labeled_mean"]
    assert out["js_appu_aggregated"] == pytest.approx(js_divergence([0.9, 0.1], [0.7, 0.3]))


def test_cosine_learning_rate_follows_the_code_scheduler():
    t = Training(epochs=1, lr=0.03, lr_decay_rounds=800)
    assert t.lr_at(1) == pytest.approx(0.03)
    assert t.lr_at(401) == pytest.approx(0.015)
    assert t.lr_at(801) == pytest.approx(0.0, abs=1e-12)
    assert Training(epochs=1, lr=0.03, lr_decay_rounds=0).lr_at(500) == 0.03


# ---------------------------------------------------------------- FedRGD's grouping-based averaging


def test_grouped_averaging_weights_are_group_means_of_fedavg():
    from fedprior.algorithms.fedrgd import grouped_weights

    replies = [Reply({}, n, client_id=c) for c, n in enumerate([10, 30, 20, 20])]
    info = RoundInfo(seed=0, stage="federated", round=1)
    w = grouped_weights(2)({}, replies, info)
    assert float(w.sum()) == pytest.approx(1.0)
    # Within a group, weights are proportional to example counts, and every group sums to 1/2.
    order = torch.randperm(4, generator=info.generator("groups"))
    groups = [{int(order[j]) for j in range(4) if j % 2 == g} for g in range(2)]  # the draw the function makes
    for members in groups:
        assert float(sum(w[m] for m in members)) == pytest.approx(0.5)
        counts = {m: replies[m].num_examples for m in members}
        first = next(iter(members))
        for m in members:
            assert float(w[m] / w[first]) == pytest.approx(counts[m] / counts[first])
    assert torch.equal(w, grouped_weights(2)({}, replies, info))  # same round, same groups
    assert torch.allclose(grouped_weights(1)({}, replies, info), torch.tensor([10, 30, 20, 20]) / 80.0)
