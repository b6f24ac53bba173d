"""FedRGD (Zhang, Yang, Yao, Yan, Gonzalez & Mahoney, "Improving Semi-supervised Federated Learning by Reducing the
Gradient Diversity of Models", IEEE BigData 2021; arXiv:2008.11364), as a baseline of FedDB (the FedDB paper,
"Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 5.1).

FedRGD's three design choices, on the shared semi-supervised client
(:mod:`fedprior.algorithms.engines.semi_supervised`):

- the consistency-regularization loss on the clients (FixMatch's: confident weak-view
  pseudo-labels, cross-entropy of the strong view);
- GroupNorm instead of BatchNorm (``norm = gn`` by default), which the paper finds
  lowers the gradient diversity between clients;
- grouping-based model averaging: the server splits the clients of the round into
  ``groups`` random groups, averages the models within each group (FedAvg, by the
  clients' example counts) and then averages the group models with equal weight, i.e.
  client m gets weight n_m / (S N_g(m)).

Where this departs from the paper: FedRGD was written for labels at the server, where
the server also trains on its labels; FedDB's clients hold the labels, so no server
step happens between the two averages and grouping becomes the reweighting above
(the FedDB paper describes FedRGD only as "reducing gradient divergence among clients").
The source paper was not available offline; the number of groups is a field (2 here).
``dpl = true`` gives FedRGD-FedDPL.

Equations: the source paper was not available offline, so none is numbered; where each step is
computed: the consistency loss, :class:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised`
with :func:`~fedprior.algorithms.engines.semi_supervised.default_pseudo_labels`; GroupNorm, the network of
:func:`~fedprior.algorithms.engines.semi_supervised.network` with ``norm = gn``; grouping-based averaging,
:func:`grouped_weights`, applied by :meth:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised.aggregate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Reply, RoundInfo, Runtime, State, Task, runtime_options
from fedprior.algorithms.engines.semi_supervised import Method, semi_supervised_algorithm
from fedprior.algorithms.pieces.hyperparameters import Dpl, SemiSupervisedFields, with_fields

Groups = Annotated[int, Field(ge=1, description="S, the random groups the clients of a round are split into before averaging")]


def grouped_weights(groups: int):
    """Aggregation weights of grouping-based averaging: n_m / (S N_g) for client m in group g of S (round's own draw)."""

    def weights(state: State, replies: Sequence[Reply], info: RoundInfo) -> torch.Tensor:
        m = len(replies)
        s = min(groups, m)
        order = torch.randperm(m, generator=info.generator("groups"))
        group = torch.empty(m, dtype=torch.long)
        group[order] = torch.arange(m) % s
        examples = torch.tensor([float(r.num_examples) for r in replies])
        totals = torch.zeros(s).index_add_(0, group, examples)
        return examples / (s * totals[group])

    return weights


@runtime_options("precision", "compile")
@with_fields("shared", SemiSupervisedFields, norm="gn")
def fedrgd(task: Task, runtime: Runtime, *, dpl: Dpl = False, groups: Groups = 2, shared: SemiSupervisedFields) -> Algorithm:
    """FedRGD (Zhang et al. 2021): consistency loss, GroupNorm, grouping-based averaging; dpl = true gives FedRGD-FedDPL."""
    method = Method(weights=grouped_weights(groups))
    return semi_supervised_algorithm("fedrgd", task, shared, runtime, dpl=dpl, method=method)
