"""What a partition looks like: per-client class histograms, class imbalance and heterogeneity (the MFCL paper's Appendix B).

The two measures are MFCL's (the MFCL paper's section 4 "Setup" and Appendix B), in bits:

* ``beta^m = KL(P^m || U) = log2(n) - H(P^m)``: how far client m's class distribution is
  from uniform over the ``n`` classes; ``beta^CIB`` is its mean over clients (Eq. 6).
* ``beta^{m,z} = KL(P^m || P^z) = H(P^m, P^z) - H(P^m)``, with ``p^z(v)`` set to
  ``smoothing = 1e-6`` where client z has no sample of class v (Eq. 7); ``beta^hetero``
  averages it over clients.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SMOOTHING = 1e-6
"""Probability given to a class a client does not hold, in beta^{m,z} (the MFCL paper's Appendix B: varsigma = 1e-6)."""


def class_counts(labels: np.ndarray, parts: Sequence[np.ndarray], num_classes: int) -> np.ndarray:
    """The ``(clients, classes)`` int64 matrix: row m counts client m's samples of each class.

    ``parts`` holds one array of positions into ``labels`` per client (what a partitioner's
    ``split`` returns, or one role of a :class:`~fedprior.partition.base.Partition`).
    """
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels fall outside 0..{num_classes - 1}")
    rows = [np.bincount(labels[np.asarray(part, dtype=np.int64)], minlength=num_classes) for part in parts]
    return np.array(rows, dtype=np.int64).reshape(len(rows), num_classes)


def _distributions(counts: np.ndarray) -> np.ndarray:
    """Each non-empty client's class distribution P^m (rows); clients without samples are left out."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2:
        raise ValueError(f"counts must be a (clients, classes) matrix, got shape {counts.shape}")
    if (counts < 0).any():
        raise ValueError("counts must be non-negative")
    kept = counts[counts.sum(axis=1) > 0]
    if kept.shape[0] == 0:
        raise ValueError("no client holds any sample")
    return kept / kept.sum(axis=1, keepdims=True)


def _entropy_bits(p: np.ndarray) -> np.ndarray:
    """H(P) in bits along the last axis, with 0 log 0 = 0."""
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log2(safe)).sum(axis=-1)


def client_imbalance(counts: np.ndarray) -> np.ndarray:
    """``beta^m = log2(n) - H(P^m)`` of every non-empty client, in bits (the MFCL paper's Appendix B, Eq. 6).

    ``n`` is the number of columns of ``counts`` (all classes of the data set, held or not).
    """
    p = _distributions(counts)
    return np.log2(p.shape[1]) - _entropy_bits(p)


def beta_cib(counts: np.ndarray) -> float:
    """``beta^CIB``: the mean of ``beta^m = KL(P^m || U)`` over clients, in bits (the MFCL paper's Eq. 6).

    0 when every client is class-balanced, ``log2(n)`` when every client holds a single
    class. Clients without samples are left out of the mean.
    """
    return float(client_imbalance(counts).mean())


def pairwise_divergence(counts: np.ndarray, smoothing: float = SMOOTHING) -> np.ndarray:
    """The ``(M, M)`` matrix of ``beta^{m,z} = KL(P^m || P^z)`` in bits (the MFCL paper's Appendix B, Eq. 7).

    Where client z holds no sample of class v, ``p^z(v) = smoothing`` (the paper's
    varsigma = 1e-6); P^z is not renormalized afterwards, as in the paper. Terms with
    ``p^m(v) = 0`` contribute 0. The diagonal is 0. Clients without samples are left out.
    """
    p = _distributions(counts)
    log_q = np.log2(np.where(p > 0, p, smoothing))
    cross = -(p @ log_q.T)
    divergence = cross - _entropy_bits(p)[:, None]
    np.fill_diagonal(divergence, 0.0)
    return divergence


def beta_hetero(counts: np.ndarray, smoothing: float = SMOOTHING) -> float:
    """``beta^hetero``: the mean of ``beta^{m,z}`` over ALL ``M * M`` ordered pairs of clients, in bits.

    Departure from the main text, on purpose: the MFCL paper's section 4 writes the average over the
    ``M(M-1)`` pairs with ``z != m``, but Appendix B says "the average of beta^{m,z} over m and
    z", and the published Tables 1 and 4 are the average over all ``M^2`` pairs (the ``m = z``
    terms are 0). E.g. Table 1 Sc1 (10 clients with one class each): every ``m != z`` pair
    has ``log2(1e6) = 19.93`` bits and the table prints 17.94 = 19.93 * 90 / 100, not 19.93.
    This function reproduces the tables (tests/partition/test_statistics.py).

    Computed in O(M C) time and memory, not through the M x M matrix of :func:`pairwise_divergence` (whose
    mean it equals to rounding: tests/partition/test_statistics.py; a 10^5-client matrix would be 80 GB). Write
    ``log q_zv`` for ``log2 p_zv`` where ``p_zv > 0`` and ``log2(smoothing)`` where ``p_zv = 0`` (Eq. 7's smoothing).
    Then ``beta^{m,z} = sum_v p_mv log2 p_mv - sum_v p_mv log q_zv`` for every pair, the diagonal included (there
    ``q_m = p_m`` wherever ``p_mv > 0``, so the two sums cancel, as the matrix's zero diagonal says), and its mean
    over the ``M^2`` ordered pairs is ``mean_m sum_v p_mv log2 p_mv - sum_v pbar_v mean_z log q_zv``, with
    ``pbar_v = mean_m p_mv``.
    """
    p = _distributions(counts)
    log_q = np.log2(np.where(p > 0, p, smoothing))
    negative_entropy = -_entropy_bits(p).mean()
    return float(negative_entropy - p.mean(axis=0) @ log_q.mean(axis=0))


def describe(counts: np.ndarray, class_names: Sequence[str] | None = None) -> dict:
    """A JSON-ready summary of a partition's class histograms.

    Keys: ``num_clients``, ``num_classes``, ``num_samples``, ``client_sizes``,
    ``class_counts`` (clients x classes), ``classes_per_client`` (classes with at least one
    sample), ``min_client_size``, ``mean_client_size``, ``max_client_size``,
    ``empty_clients``, ``beta_cib``, ``beta_hetero`` (bits; None when no client holds
    data) and ``class_names`` when given.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2:
        raise ValueError(f"counts must be a (clients, classes) matrix, got shape {counts.shape}")
    sizes = counts.sum(axis=1)
    nonempty = bool(sizes.sum() > 0)
    summary: dict = {
        "num_clients": int(counts.shape[0]),
        "num_classes": int(counts.shape[1]),
        "num_samples": int(sizes.sum()),
        "client_sizes": sizes.tolist(),
        "class_counts": counts.tolist(),
        "classes_per_client": (counts > 0).sum(axis=1).tolist(),
        "min_client_size": int(sizes.min()) if sizes.size else 0,
        "mean_client_size": float(sizes.mean()) if sizes.size else 0.0,
        "max_client_size": int(sizes.max()) if sizes.size else 0,
        "empty_clients": int((sizes == 0).sum()),
        "beta_cib": beta_cib(counts) if nonempty else None,
        "beta_hetero": beta_hetero(counts) if nonempty else None,
    }
    if class_names is not None:
        if len(class_names) != counts.shape[1]:
            raise ValueError(f"{len(class_names)} class names for {counts.shape[1]} classes")
        summary["class_names"] = list(class_names)
    return summary
