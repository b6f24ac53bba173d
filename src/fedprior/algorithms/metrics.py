"""Test metrics from a model's logits: accuracy, cross-entropy, macro-F1 and per-class accuracy.

Every algorithm's ``evaluate`` reports these, so runs of different methods can be
compared on the same footing: FedBM's tables give accuracy and macro-F1
(fedbm.txt, Sec. IV-A), FedDB's Figure 1 plots the global model's per-class test
accuracy. F1 comes from scikit-learn, not from a hand-written formula.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score, recall_score


def logit_metrics(logits: torch.Tensor, y: torch.Tensor) -> dict[str, float | list[float]]:
    """Metrics of ``logits`` (N, K) against labels ``y`` (N,).

    ``macro_f1`` is the unweighted mean of the K per-class F1 scores (a class absent
    from both labels and predictions counts as 0, scikit-learn's ``zero_division=0``);
    ``class_accuracy[k]`` is the fraction of class-k examples predicted as k (recall).
    """
    num_classes = logits.shape[1]
    y_true = y.detach().cpu().numpy()
    y_pred = logits.detach().argmax(1).cpu().numpy()
    labels = np.arange(num_classes)
    n = max(y_true.size, 1)
    return {
        "accuracy": float((y_pred == y_true).sum()) / n,
        "loss": float(F.cross_entropy(logits.detach().float(), y.to(logits.device), reduction="sum")) / n,
        "macro_f1": float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)),
        "class_accuracy": [round(float(v), 6) for v in recall_score(y_true, y_pred, labels=labels, average=None, zero_division=0)],
    }
