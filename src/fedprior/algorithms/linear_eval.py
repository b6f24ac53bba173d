"""Linear evaluation of frozen features: the self-supervised methods' test metric (mfcl.md Sec. 3, "Performance metric").

The paper scores MFCL and the self-supervised baselines as SimCLR does: a linear
classifier is trained with labels on the frozen features, and its top-1 accuracy on the
class-balanced test set is reported. An algorithm's ``evaluate`` only sees the test set,
so the labelled examples the classifier learns from come from it, without ever scoring
an image the classifier was fitted on: the test set is split into ``folds`` stratified
folds (in order, no shuffling: deterministic), a multinomial logistic regression
(scikit-learn, L2, lbfgs) on standardized features is fitted on all folds but one and
predicts the held-out fold's log-probabilities, and the metrics (accuracy, loss, macro-F1, per-class
accuracy; :func:`~fedprior.algorithms.metrics.logit_metrics`) are those of the
out-of-fold scores over the whole test set. With 2 folds the classifier sees half the
test set (5,000 labelled images on CIFAR-10 or Fashion-MNIST) where SimCLR's protocol
uses the training labels; it is cheap (a second or two) and identical for every method.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from fedprior.algorithms.metrics import logit_metrics


def linear_evaluation(features: torch.Tensor, labels: torch.Tensor, num_classes: int, folds: int = 2,
                      max_iter: int = 500) -> dict[str, float | list[float]]:
    """Out-of-fold metrics of a linear classifier on ``features`` (N, D) against ``labels`` (N,)."""
    x = features.detach().cpu().double().numpy()
    y = labels.detach().cpu().numpy()
    present, counts = np.unique(y, return_counts=True)
    folds = max(2, min(folds, int(counts.min())))
    classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        log_p = cross_val_predict(classifier, x, y, cv=StratifiedKFold(n_splits=folds), method="predict_log_proba")
    logits = torch.full((len(y), num_classes), -1e4, dtype=torch.float64)  # classes absent from the labels
    logits[:, torch.from_numpy(present)] = torch.from_numpy(np.asarray(log_p, dtype=np.float64))
    return logit_metrics(logits, labels.cpu())
