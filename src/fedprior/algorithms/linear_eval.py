"""Linear evaluation of frozen features: the self-supervised methods' test metric (mfcl.md Sec. 3, "Performance metric").

The paper scores MFCL and the self-supervised baselines as SimCLR does: a linear
classifier is trained with labels on the frozen features, and its top-1 accuracy on the
class-balanced test set is reported. An algorithm's ``evaluate`` only sees the test set,
so the labelled examples the classifier learns from come from it, without ever scoring
an image the classifier was fitted on: the test set is split into ``folds`` stratified
folds (scikit-learn's StratifiedKFold, in order: deterministic); a multinomial logistic
regression on the features standardized with the training folds' statistics is fitted
on all folds but one and scores the held-out fold; the metrics (accuracy, loss,
macro-F1, per-class accuracy; :func:`~fedprior.algorithms.metrics.logit_metrics`) are
those of the out-of-fold log-probabilities over the whole test set.

The regression is scikit-learn's default objective (mean cross-entropy plus
||W||^2 / (2 n), i.e. C = 1), minimized from zero by torch's full-batch L-BFGS with a
strong Wolfe line search for at most ``iterations`` iterations, in float32 (scikit-learn's
float64 solver took minutes on 5,000 x 128 features on a busy 2-core machine; this takes
a fraction of a second). With 2 folds the classifier sees half the test set (5,000
labelled images on CIFAR-10 or Fashion-MNIST) where SimCLR's protocol uses the training
labels; it is identical for every method.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import StratifiedKFold

from fedprior.algorithms.metrics import logit_metrics


def fit_logistic_regression(x: torch.Tensor, y: torch.Tensor, num_classes: int, iterations: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, b) minimizing mean CE(x W + b, y) + ||W||^2 / (2 n) from zero (L-BFGS, strong Wolfe)."""
    weight = torch.zeros(x.shape[1], num_classes, requires_grad=True)
    bias = torch.zeros(num_classes, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=iterations, history_size=10, line_search_fn="strong_wolfe")
    penalty = 1.0 / (2 * x.shape[0])

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(x @ weight + bias, y) + penalty * (weight**2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return weight.detach(), bias.detach()


@torch.no_grad()
def _standardize(train: torch.Tensor, other: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean, std = train.mean(0), train.std(0, unbiased=False).clamp_min(1e-6)
    return (train - mean) / std, (other - mean) / std


def linear_evaluation(features: torch.Tensor, labels: torch.Tensor, num_classes: int, folds: int = 2, iterations: int = 100) -> dict[str, float | list[float]]:
    """Out-of-fold metrics of a linear classifier on ``features`` (N, D) against ``labels`` (N,)."""
    x = features.detach().cpu().float()
    y = labels.detach().cpu().long()
    counts = np.bincount(y.numpy(), minlength=num_classes)
    folds = max(2, min(folds, int(counts[counts > 0].min())))
    log_p = torch.empty(len(y), num_classes)
    for train, held_out in StratifiedKFold(n_splits=folds).split(np.zeros(len(y)), y.numpy()):
        train, held_out = torch.from_numpy(train), torch.from_numpy(held_out)
        x_train, x_held = _standardize(x[train], x[held_out])
        weight, bias = fit_logistic_regression(x_train, y[train], num_classes, iterations)
        logits = x_held @ weight + bias
        logits[:, torch.from_numpy(np.bincount(y[train].numpy(), minlength=num_classes) == 0)] = -1e4  # classes never seen
        log_p[held_out] = F.log_softmax(logits, dim=1)
    return logit_metrics(log_p, y)
