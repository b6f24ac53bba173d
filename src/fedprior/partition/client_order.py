"""An order of the clients that makes a heatmap of many of them readable: grouped by their largest class, alike clients together.

A partition of 1,000 clients drawn in client-id order is a barcode: neighbouring rows have
nothing in common. Sorting the rows by each client's largest (dominant) class turns it
into a few blocks, one per class; inside a block, clients with similar class
distributions are put next to each other by average-linkage hierarchical clustering of
their class shares (scipy), so sub-populations (e.g. clients holding classes 3 and 7)
show as bands. Empty clients come last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClientGroup:
    """Consecutive rows ``start:stop`` of the ordered clients, all with largest class ``label`` (None: empty clients)."""

    label: int | None
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class ClientOrder:
    """``order[i]``: the client drawn in row ``i``; ``groups``: the row blocks, one per dominant class present."""

    order: np.ndarray
    groups: tuple[ClientGroup, ...]


def class_shares(counts: np.ndarray) -> np.ndarray:
    """Each client's class distribution (rows sum to 1; an empty client's row is all zero)."""
    counts = np.asarray(counts, dtype=np.float64)
    sizes = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, sizes, out=np.zeros_like(counts), where=sizes > 0)


def _similar_first(shares: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Positions of ``shares``' rows in dendrogram-leaf order (average linkage, Euclidean), or by size for fewer than 3 rows."""
    if len(shares) < 3:
        return np.argsort(-sizes, kind="stable")
    from scipy.cluster.hierarchy import leaves_list, linkage

    return leaves_list(linkage(shares, method="average", metric="euclidean")).astype(np.int64)


def cluster_clients(counts: np.ndarray) -> ClientOrder:
    """Clients grouped by their largest class (classes in index order, ties to the lower class), similar ones adjacent inside a group."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or 0 in counts.shape:
        raise ValueError(f"counts must be a non-empty (clients, classes) matrix, got shape {counts.shape}")
    sizes = counts.sum(axis=1)
    shares = class_shares(counts)
    dominant = counts.argmax(axis=1)
    rows: list[np.ndarray] = []
    groups: list[ClientGroup] = []
    labels: list[int | None] = [*range(counts.shape[1]), None]
    for label in labels:
        members = np.flatnonzero(sizes == 0) if label is None else np.flatnonzero((dominant == label) & (sizes > 0))
        if members.size == 0:
            continue
        start = sum(r.size for r in rows)
        rows.append(members[_similar_first(shares[members], sizes[members])])
        groups.append(ClientGroup(label, start, start + members.size))
    return ClientOrder(np.concatenate(rows), tuple(groups))
