"""Test metrics from a model's logits: accuracy, cross-entropy, macro-F1 and per-class accuracy.

Every algorithm's ``evaluate`` reports these, so runs of different methods can be
compared on the same footing: FedBM's tables give accuracy and macro-F1
(the FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning",
Sec. IV-A), FedDB's Figure 1 plots the global model's per-class test
accuracy. F1 comes from scikit-learn, not from a hand-written formula.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score


def macro_auc(probabilities: np.ndarray, y_true: np.ndarray) -> float:
    """Mean one-vs-rest ROC AUC over the classes that occur in ``y_true`` (and not in every example); 0 if none do,
    NaN if the model's outputs are not finite (a diverged model: the round loop then stops the run and names it)."""
    if not np.isfinite(probabilities).all():
        return float("nan")
    present = [k for k in np.unique(y_true) if 0 < (y_true == k).sum() < y_true.size]
    if not present:
        return 0.0
    return float(np.mean([roc_auc_score(y_true == k, probabilities[:, k]) for k in present]))


def logit_metrics(logits: torch.Tensor, y: torch.Tensor) -> dict[str, float | list[float]]:
    """Metrics of ``logits`` (N, K) against labels ``y`` (N,).

    ``macro_f1`` is the unweighted mean of the K per-class F1 scores (a class absent
    from both labels and predictions counts as 0, scikit-learn's ``zero_division=0``);
    ``class_accuracy[k]`` is the fraction of class-k examples predicted as k (recall).
    ``macro_precision`` and ``auc`` (one-vs-rest on the softmax, averaged over the classes
    present) complete the sum FedBM's code ranks rounds by (see :func:`selection_score`).
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
        "macro_precision": float(precision_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)),
        "auc": macro_auc(torch.softmax(logits.detach().float(), dim=1).cpu().numpy(), y_true),
    }


SELECTION_KEYS = ("accuracy", "accuracy", "macro_precision", "macro_f1", "auc")
"""What FedBM's code sums to rank rounds on the validation split: accuracy, micro recall (= accuracy),
macro precision, macro F1 and AUC (``main.py``: ``val_acc + val_recall + val_prec + val_f1 + val_auc``)."""


def selection_score(metrics: dict) -> float:
    """The validation score of a round record (``validation_*`` keys), the code's sum of :data:`SELECTION_KEYS`."""
    return float(sum(metrics[f"validation_{key}"] for key in SELECTION_KEYS))


def selected_round(history: list[dict]) -> dict | None:
    """The first round record with the highest validation score (the code keeps the first best), or None."""
    scored = [r for r in history if "validation_accuracy" in r]
    return max(scored, key=selection_score) if scored else None


def read_once(values: Mapping[str, float | torch.Tensor]) -> dict[str, float]:
    """Training metrics as Python floats, the tensors among them (0-dim, kept on the device while training) read
    back in one copy per device: a client update reads its metrics once, not once per step or epoch (no host sync
    inside a training loop)."""
    by_device: dict[torch.device, dict[str, torch.Tensor]] = {}
    for key, value in values.items():
        if isinstance(value, torch.Tensor):
            by_device.setdefault(value.device, {})[key] = value.detach().double().reshape(())
    read: dict[str, float] = {}
    for tensors in by_device.values():
        read.update(zip(tensors, torch.stack(list(tensors.values())).tolist(), strict=True))
    return {key: read[key] if key in read else float(value) for key, value in values.items()}
