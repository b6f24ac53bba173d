"""How biased the global model is, and how well APP-U and the labeled distribution predict that bias.

the FedDB paper ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning"),
Sec. 4.2 and Figure 3: taking the global model's per-class accuracy on the
balanced test set (normalized to sum to one) as the ground-truth prior bias, the
Jensen-Shannon divergence between it and a client's APP-U is much smaller than the
one between it and the client's labeled class distribution. These functions compute
both, per client (mean, min and max over the clients of the round, the paper's line and
band) and for the aggregates weighted by the round's aggregation weights.

The JS divergence is SciPy's (``jensenshannon`` returns its square root), in bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def js_divergence(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """JS(p || q) in bits (0 for equal distributions, at most 1); inputs are normalized first."""
    from scipy.spatial.distance import jensenshannon

    return float(jensenshannon(np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64), base=2) ** 2)


def normalized(values: Sequence[float]) -> np.ndarray:
    """``values`` scaled to sum to one; uniform when they sum to zero."""
    v = np.clip(np.asarray(values, dtype=np.float64), 0.0, None)
    total = v.sum()
    return v / total if total > 0 else np.full(v.size, 1.0 / v.size)


def bias_diagnostics(class_accuracy: Sequence[float], appus: np.ndarray, labeled: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """JS divergences of Figure 3 (global model) for one round.

    ``appus`` (M, K): the APP-U each client of the round sent; ``labeled`` (M, K): their
    labeled class counts; ``weights`` (M,): the aggregation weights. Keys:
    ``js_appu_{mean,min,max}``, ``js_labeled_{mean,min,max}`` over the clients (a client
    with no labeled image is left out of the labeled ones), and ``js_appu_aggregated`` /
    ``js_labeled_aggregated`` for the weighted sums.
    """
    truth = normalized(class_accuracy)
    appus, labeled, weights = np.asarray(appus, float), np.asarray(labeled, float), np.asarray(weights, float)
    out: dict[str, float] = {}
    per_client = {
        "appu": [js_divergence(truth, normalized(a)) for a in appus],
        "labeled": [js_divergence(truth, normalized(c)) for c in labeled if c.sum() > 0],
    }
    for name, values in per_client.items():
        if values:
            out.update({f"js_{name}_mean": float(np.mean(values)), f"js_{name}_min": float(np.min(values)), f"js_{name}_max": float(np.max(values))})
    out["js_appu_aggregated"] = js_divergence(truth, normalized(weights @ appus))
    shares = labeled / np.clip(labeled.sum(axis=1, keepdims=True), 1.0, None)
    if labeled.sum() > 0:
        out["js_labeled_aggregated"] = js_divergence(truth, normalized(weights @ shares))
    return out
