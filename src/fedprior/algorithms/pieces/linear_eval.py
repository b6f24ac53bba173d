"""Linear evaluation of frozen features: the self-supervised methods' test metric (the MFCL paper's Sec. 3, "Performance metric").

The paper scores MFCL and the self-supervised baselines as SimCLR does: "one linear
Dense layer on top of the projection layers" (Sec. 3 and Appendix C.3), trained with
labels on top of the frozen (trained) network, its top-1 accuracy reported on the
class-balanced test set. Two protocols, the field ``linear_eval`` of every
self-supervised algorithm (:data:`PROTOCOLS`):

- ``"train-test"`` (the paper's, the default), :func:`dense_evaluation`: a dense layer
  (``x W + b``, zero-initialized) is trained with the labels of the *training* set's frozen
  features (the images the federation holds: the run's training pool) and scores the
  test set's features. Features are standardized with the training features' mean and
  std (so one learning rate serves projections, representations and raw pixels); Adam
  (lr 1e-2), mini-batches of 512 shuffled by a generator seeded with ``seed`` (0), 100
  epochs, no weight decay and no augmentation (the features are computed once): seeded
  and deterministic, on the run's device, a few seconds on a CPU for 2,000 x 3,136
  features. The metrics (accuracy, loss, macro-F1, per-class accuracy;
  :func:`~fedprior.algorithms.pieces.metrics.logit_metrics`) are those of the test set.
- ``"test-2fold"`` (this library's earlier protocol, kept as an option),
  :func:`linear_evaluation`: the test set alone, split into ``folds`` stratified folds
  (scikit-learn's StratifiedKFold, in order: deterministic); a multinomial logistic
  regression on the features standardized with the training folds' statistics is fitted
  on all folds but one and scores the held-out fold; the metrics are those of the
  out-of-fold log-probabilities over the whole test set. The regression is
  scikit-learn's default objective (mean cross-entropy plus ||W||^2 / (2 n), i.e. C = 1),
  minimized from zero by torch's full-batch L-BFGS with a strong Wolfe line search for
  at most ``iterations`` iterations, in float32, on the run's device. It needs no training labels, but it
  scores random features of an untrained network at 83-86% on Fashion-MNIST,
  as high as trained ones: it cannot rank methods there (docs/mfcl.md, ``linear_eval``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import StratifiedKFold

from fedprior.algorithms.pieces.local_training import epoch_orders
from fedprior.algorithms.pieces.metrics import logit_metrics

PROTOCOLS = ("train-test", "test-2fold")
DENSE_EPOCHS, DENSE_LR, DENSE_BATCH = 100, 1e-2, 512


def fit_logistic_regression(x: torch.Tensor, y: torch.Tensor, num_classes: int, iterations: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, b) minimizing mean CE(x W + b, y) + ||W||^2 / (2 n) from zero (L-BFGS, strong Wolfe), on ``x``'s device."""
    weight = torch.zeros(x.shape[1], num_classes, device=x.device, requires_grad=True)
    bias = torch.zeros(num_classes, device=x.device, requires_grad=True)
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


def linear_evaluation(
    features: torch.Tensor, labels: torch.Tensor, num_classes: int, folds: int = 2, iterations: int = 100, device: torch.device = torch.device("cpu")
) -> dict[str, float | list[float]]:
    """Out-of-fold metrics of a linear classifier on ``features`` (N, D) against ``labels`` (N,), fitted on ``device``.

    The folds are drawn on the host from the labels (scikit-learn); the features stay on (or go once to) ``device``,
    where the regression is fitted and scored; the out-of-fold log-probabilities come back once for the metrics.
    """
    x = features.detach().float().to(device)
    y_host = labels.detach().cpu().long()
    y = y_host.to(device)
    counts = np.bincount(y_host.numpy(), minlength=num_classes)
    folds = max(2, min(folds, int(counts[counts > 0].min())))
    log_p = torch.empty(len(y_host), num_classes, device=device)
    for train, held_out in StratifiedKFold(n_splits=folds).split(np.zeros(len(y_host)), y_host.numpy()):
        unseen = torch.from_numpy(np.flatnonzero(np.bincount(y_host.numpy()[train], minlength=num_classes) == 0)).to(device)
        train, held_out = torch.from_numpy(train).to(device), torch.from_numpy(held_out).to(device)
        x_train, x_held = _standardize(x[train], x[held_out])
        weight, bias = fit_logistic_regression(x_train, y[train], num_classes, iterations)
        logits = x_held @ weight + bias
        logits[:, unseen] = -1e4  # classes never seen (their columns by index: no boolean mask, no sync on a GPU)
        log_p[held_out] = F.log_softmax(logits, dim=1)
    return logit_metrics(log_p.cpu(), y_host)


def dense_evaluation(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    test_features: torch.Tensor,
    test_labels: torch.Tensor,
    num_classes: int,
    *,
    epochs: int = DENSE_EPOCHS,
    lr: float = DENSE_LR,
    batch_size: int = DENSE_BATCH,
    seed: int = 0,
    device: torch.device = torch.device("cpu"),
) -> dict[str, float | list[float]]:
    """The paper's linear evaluation (the MFCL paper's Sec. 3): a dense layer trained on the training features, scored on the test features.

    Cross-entropy, Adam (``lr``), ``epochs`` passes of shuffled mini-batches of ``batch_size``
    (the orders drawn from a CPU generator seeded with ``seed``, every epoch's before the first
    step, and copied to ``device`` at once: no host sync per epoch), from zero weights, on
    ``device``; features standardized with the training features' statistics. Returns
    :func:`~fedprior.algorithms.pieces.metrics.logit_metrics` of the test set.
    """
    with torch.no_grad():
        x_train, x_test = _standardize(train_features.detach().float().to(device), test_features.detach().float().to(device))
    y_train = train_labels.detach().long().to(device)
    layer = torch.nn.Linear(x_train.shape[1], num_classes).to(device)
    torch.nn.init.zeros_(layer.weight)
    torch.nn.init.zeros_(layer.bias)
    optimizer = torch.optim.Adam(layer.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    n = x_train.shape[0]
    orders = epoch_orders(n, epochs, generator, device)  # one copy
    with torch.enable_grad():  # also when the caller evaluates under no_grad
        for order in orders:
            for start in range(0, n, batch_size):
                rows = order[start : start + batch_size]
                loss = F.cross_entropy(layer(x_train[rows]), y_train[rows])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
    with torch.no_grad():
        log_p = F.log_softmax(layer(x_test), dim=1).cpu()
    return logit_metrics(log_p, test_labels.detach().cpu().long())
