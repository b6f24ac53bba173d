"""Self-supervised objectives on two views: NT-Xent (SimCLR, MFCL) and Sinkhorn-Knopp codes (SwAV, Orchestra)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def nt_xent(h1: torch.Tensor, h2: torch.Tensor, temperature: float) -> torch.Tensor:
    """The normalized temperature-scaled cross-entropy of the MFCL paper's Appendix A, Eq. 5 (SimCLR's loss).

    ``h1[i]`` and ``h2[i]`` are the two views of sample i (K rows each); over the 2K rows,

        L = -1/(2K) sum_{(i, j) positive} log [ exp(sim(h_i, h_j)/tau) / sum_{k != i} exp(sim(h_i, h_k)/tau) ]

    with sim the cosine similarity and both orders (i, j) and (j, i) of every pair counted.
    """
    h = F.normalize(torch.cat([h1, h2]), dim=1)
    k = h1.shape[0]
    logits = (h @ h.T) / temperature
    logits = logits.masked_fill(torch.eye(2 * k, dtype=torch.bool, device=h.device), float("-inf"))
    positives = torch.cat([torch.arange(k, 2 * k, device=h.device), torch.arange(0, k, device=h.device)])  # made there: no copy per step
    return F.cross_entropy(logits, positives)


@torch.no_grad()
def sinkhorn(scores: torch.Tensor, epsilon: float, iterations: int) -> torch.Tensor:
    """Soft equal-size assignments of N samples to K clusters from ``scores`` (N, K), rows summing to one.

    Sinkhorn-Knopp on Q = exp(scores / epsilon): alternately scale the K cluster sums to
    N/K and the N sample sums to 1 (SwAV, Caron et al. 2020, Sec. 3.1 and Algorithm 1,
    epsilon 0.05 and 3 iterations; Orchestra's ``sknopp``, epsilon 1/25). The scores are
    shifted by their maximum first, which the scaling absorbs, so exp never overflows.
    """
    q = torch.exp((scores - scores.max()) / epsilon).T  # (K, N)
    q /= q.sum()
    k, n = q.shape
    for _ in range(iterations):
        q /= q.sum(dim=1, keepdim=True) * k
        q /= q.sum(dim=0, keepdim=True) * n
    return (q * n).T


def swapped_prediction(scores1: torch.Tensor, scores2: torch.Tensor, codes1: torch.Tensor, codes2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SwAV's swapped prediction (Caron et al. 2020, Eq. 1-2): predict each view's code from the other view.

    L = -1/2 mean_i [ q2_i . log softmax(s1_i / tau) + q1_i . log softmax(s2_i / tau) ],
    with s the prototype scores and q the Sinkhorn codes of each view.
    """
    return -0.5 * ((codes2 * F.log_softmax(scores1 / temperature, dim=1)).sum(1).mean() + (codes1 * F.log_softmax(scores2 / temperature, dim=1)).sum(1).mean())
