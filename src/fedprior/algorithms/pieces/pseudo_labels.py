"""Pseudo-labels for semi-supervised FL: APP-U, debiased pseudo-labeling (DPL), the confidence mask, diagnostics.

FedDB (the FedDB paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning",
Sec. 4.2-4.3, Algorithm 1):

- APP-U, Eq. (8): the average prediction probability of a client's unlabeled data,
  ``p_bar = (1 / N_u) sum_n p(y | alpha(x_u^n))``, the estimate of the model's label-prior bias;
- DPL, Eq. (14): the debiased prediction ``p_hat = (p / p_bar) / sum_k (p_k / p_bar_k)``
  (Bayes' rule with a uniform target prior, Eq. 13), then a hard label where
  ``max p_hat >= tau`` (Algorithm 1, lines 4-9);
- FixMatch's plain pseudo-label, Eq. (3)-(4): the same threshold on ``p`` itself.

Everything here is a pure function of tensors, so the tests check it on hand-made
numbers, and "X-FedDPL" (the FedDB paper, Sec. 5.1) is X with :func:`debias` switched on. Nothing
here reads a value back to the host or selects rows by a mask (the output shapes depend
only on the input shapes), so a training loop on a GPU never waits on these.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORED = -100
"""The target of a row left out of :func:`masked_cross_entropy` (PyTorch's ``ignore_index`` default)."""


def app_u(probabilities: torch.Tensor) -> torch.Tensor:
    """Eq. (8): the mean of the rows of ``probabilities`` (N, K); uniform when N = 0."""
    if probabilities.shape[0] == 0:
        return torch.full((probabilities.shape[1],), 1.0 / probabilities.shape[1], dtype=probabilities.dtype, device=probabilities.device)
    return probabilities.mean(dim=0)


def debias(probabilities: torch.Tensor, prior: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Eq. (14): ``p / p_bar`` renormalized per row (``prior`` = APP-U, shape (K,))."""
    scaled = probabilities / prior.clamp_min(eps)
    return scaled / scaled.sum(dim=1, keepdim=True)


def hard_labels(probabilities: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(argmax labels, mask of rows whose largest probability is >= ``threshold``): Algorithm 1 lines 5-9, Eq. (4)."""
    confidence, labels = probabilities.max(dim=1)
    return labels, confidence >= threshold


def moving_average(previous: torch.Tensor, current: torch.Tensor, gamma: float) -> torch.Tensor:
    """``gamma previous + (1 - gamma) current``: the exponential moving average of a pseudo-label quantity.

    FedDB, Algorithm 3 line 20: APP-U, ``p_bar <- gamma p_bar + (1 - gamma) p_bar^e``
    (gamma, the momentum accumulation coefficient); FST-CBDG, Eq. 4: the soft
    pseudo-labels, ``q^t = beta q^{t-1} + (1 - beta) f(I)`` (``gamma`` = beta).
    """
    return gamma * previous + (1.0 - gamma) * current


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, mean: str, total: int) -> torch.Tensor:
    """Eq. (4) as a masked loss: the cross-entropy of ``logits`` against ``labels`` summed over the rows where ``mask``
    holds, divided by ``total`` (``mean = "all"``: the number of all unlabeled images, FixMatch's mean) or by the
    number of masked rows (``mean = "confident"``: the FedDB code's mean; 1 when none is masked).

    The same value as ``F.cross_entropy(logits[mask], labels[mask], reduction="sum") / (total or mask.sum())`` and 0
    when no row is masked, with shapes that do not depend on the mask: rows out of the mask get the ignored target
    (:data:`IGNORED`) instead of being selected, and the count stays a device tensor.
    """
    if mean not in ("all", "confident"):
        raise ValueError(f"unlabeled_mean must be 'all' or 'confident', got {mean!r}")
    target = torch.where(mask, labels, torch.full_like(labels, IGNORED))
    summed = F.cross_entropy(logits, target, reduction="sum", ignore_index=IGNORED)
    return summed / (total if mean == "all" else mask.sum().clamp_min(1))


def label_quality_tensors(labels: torch.Tensor, mask: torch.Tensor, truth: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """:func:`label_quality` as 0-dim tensors on the labels' device, nothing read back; ``accuracy`` is NaN when no image received a label."""
    out = {"coverage": mask.float().mean() if mask.numel() else torch.zeros((), device=mask.device)}
    if truth is None:
        return out
    right = labels == truth
    if labels.numel():
        out["accuracy_all"] = right.float().mean()
    labeled = mask.sum()
    out["accuracy"] = torch.where(labeled > 0, (right & mask).sum().float() / labeled.clamp_min(1), torch.full((), float("nan"), device=mask.device))
    return out


def label_quality(labels: torch.Tensor, mask: torch.Tensor, truth: torch.Tensor | None = None) -> dict[str, float]:
    """How good a pseudo-labeling is (Figures 6 and 7 of the FedDB paper).

    ``coverage``: the fraction of unlabeled images that received a label (Figure 7);
    with the true labels ``truth``: ``accuracy``, the accuracy of the labels they
    received (Figure 6), left out when none did, and ``accuracy_all``, the accuracy of
    the argmax on every image. (:func:`label_quality_tensors` read back once.)
    """
    values = label_quality_tensors(labels, mask, truth)
    read = dict(zip(values, torch.stack([v.double() for v in values.values()]).tolist(), strict=True))
    return without_missing_accuracy(read)


def without_missing_accuracy(values: dict[str, float], key: str = "accuracy") -> dict[str, float]:
    """``values`` without the pseudo-label accuracy ``key`` when it is NaN (no image received a label)."""
    return {k: v for k, v in values.items() if not (k == key and v != v)}
