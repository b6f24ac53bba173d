"""Robust aggregation rules: coordinate-wise median, trimmed mean, Krum and Multi-Krum, over any algorithm whose aggregate is a mean of models.

An algorithm here whose ``aggregate`` is a (weighted) mean of its clients' models (FedAvg's example-weighted mean, and
what builds on it: FedProx, MOON, FedAvgM, FedAdagrad, FedAdam, FedYogi) takes ``algorithm.aggregation_rule``: the rule
replaces that mean. With w_1 .. w_n the models of a round's n replies (every floating array a reply carries; the update
w_i - x_t differs from w_i by the same x_t for all clients, so every rule gives the same model on updates as on models):

- ``median`` (Yin et al., "Byzantine-Robust Distributed Learning: Towards Optimal Statistical Rates", ICML 2018,
  Sec. 3, Algorithm 1, option I): g_j = med{w_{i,j} : i = 1..n} for every coordinate j (the mean of the two middle
  values where n is even, as numpy's median and Flower's FedMedian);
- ``trimmed_mean`` (the same paper, Sec. 3, Algorithm 1, option II, Definition 2): for every coordinate j, drop the
  beta n largest and the beta n smallest w_{i,j} (``int(beta n)`` each, as Flower's FedTrimmedAvg) and average the rest,
  beta = ``trim_fraction`` in [0, 1/2);
- ``krum`` (Blanchard et al., "Machine Learning with Adversaries: Byzantine Tolerant Gradient Descent", NeurIPS 2017,
  Sec. 4): score(i) = sum of ||w_i - w_j||^2 over the n - f - 2 models j != i closest to w_i, f = ``krum_f`` the number
  of Byzantine clients it tolerates, which needs n >= 2f + 3; the model of least score is the aggregate;
- ``multi_krum`` (the same paper, Sec. 4, Multi-Krum): the m models of least score (``krum_m``; unset: n - f), averaged
  by the algorithm's own mean (FedAvg's weighs them by examples, as Flower's Krum with ``num_clients_to_keep``).

:func:`with_robust_aggregation` puts a rule in front of an algorithm's aggregate: the rule turns the round's replies into
the replies the algorithm then averages (Krum's one, Multi-Krum's m, or one reply holding the median or trimmed mean), so
that a server optimizer (``algorithm.server_optimizer``, FedAvgM .. FedYogi) steps on Delta = robust aggregate - x_t.
The median and the trimmed mean are unweighted (Yin et al.'s, Flower's): a client's example count no longer weighs.

Choices: where fewer replies arrive than the round sampled (failed clients), Krum keeps max(1, n - f - 2) neighbours,
as Flower's ``aggregate_krum`` does; the config check asks n >= 2f + 3 of the sampled count
(:func:`~fedprior.algorithms.pieces.robust_aggregation_fields.check_round_size`). Integer arrays (BatchNorm's ``num_batches_tracked``) take the first reply's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedprior.algorithms.base import Algorithm, Arrays, Reply, RoundInfo, State
from fedprior.algorithms.pieces.hyperparameters import parameters
from fedprior.algorithms.pieces.robust_aggregation_fields import Rule, check_rule_fields, robust_aggregation

ROBUST_AGGREGATION = parameters(robust_aggregation)
"""The parameters of the option, for ``with_shared``."""


@dataclass(frozen=True)
class RobustAggregation:
    """A rule and its hyperparameters (the defaults: :func:`~fedprior.algorithms.pieces.robust_aggregation_fields.robust_aggregation`'s)."""

    rule: Rule = "mean"
    trim_fraction: float = 0.1
    f: int = 0
    m: int | None = None

    def select(self, replies: Sequence[Reply]) -> list[Reply]:
        """The replies the algorithm's mean then takes: Krum's best, Multi-Krum's m best, or one reply holding the median or trimmed mean."""
        if self.rule == "mean" or not replies:
            return list(replies)
        if self.rule in ("krum", "multi_krum"):
            keep = 1 if self.rule == "krum" else (self.m if self.m is not None else max(1, len(replies) - self.f))
            return [replies[i] for i in krum_order(krum_scores([r.arrays for r in replies], self.f))[:keep]]
        combine = coordinate_median if self.rule == "median" else (lambda stack: trimmed_mean(stack, self.trim_fraction))
        arrays = coordinatewise([r.arrays for r in replies], combine)
        return [Reply(arrays, num_examples=sum(r.num_examples for r in replies), client_id=-1)]


def checked_robust_aggregation(*, aggregation_rule: Rule, trim_fraction: float, krum_f: int, krum_m: int | None) -> RobustAggregation:
    """The rule of the option's config fields (:func:`~fedprior.algorithms.pieces.robust_aggregation_fields.check_rule_fields`)."""
    check_rule_fields(aggregation_rule, trim_fraction, krum_f, krum_m)
    return RobustAggregation(aggregation_rule, trim_fraction, krum_f, krum_m)


def floating(arrays: Arrays) -> list[str]:
    return [name for name, value in arrays.items() if value.is_floating_point()]


def krum_scores(models: Sequence[Arrays], f: int) -> torch.Tensor:
    """score(i) = sum of the n - f - 2 smallest ||w_i - w_j||^2, j != i (Blanchard et al., NeurIPS 2017, Sec. 4), over every floating array
    (at least one neighbour: max(1, n - f - 2), as Flower's ``aggregate_krum``); float64."""
    names = floating(models[0])
    flat = torch.stack([torch.cat([m[name].detach().reshape(-1).to(torch.float64) for name in names]) for m in models])
    n = len(models)
    if n == 1:
        return torch.zeros(1, dtype=torch.float64)
    distances = torch.stack([(flat - row).square().sum(dim=1) for row in flat])  # row by row: no n x n x d tensor
    others = distances.masked_fill(torch.eye(n, dtype=torch.bool, device=distances.device), float("inf"))
    return others.sort(dim=1).values[:, : min(max(1, n - f - 2), n - 1)].sum(dim=1)


def krum_order(scores: torch.Tensor) -> list[int]:
    """Reply indices by increasing score (ties: the earlier reply first, as numpy's argmin)."""
    return torch.sort(scores.cpu(), stable=True).indices.tolist()


def coordinate_median(stack: torch.Tensor) -> torch.Tensor:
    """The median over dimension 0, the two middle values averaged where their number is even (Yin et al. 2018, Algorithm 1, option I)."""
    n = stack.shape[0]
    middle = stack.sort(dim=0).values
    return middle[(n - 1) // 2 : n // 2 + 1].mean(dim=0)


def trimmed_mean(stack: torch.Tensor, beta: float) -> torch.Tensor:
    """The mean over dimension 0 of what is left once the int(beta n) largest and smallest are dropped (Yin et al. 2018, Definition 2)."""
    n = stack.shape[0]
    cut = int(beta * n)
    return stack.sort(dim=0).values[cut : n - cut].mean(dim=0)


def coordinatewise(models: Sequence[Arrays], combine) -> Arrays:
    """``combine`` of the replies' stacked values for every floating array, in float64 and cast back; other arrays: the first reply's."""
    first = models[0]
    out = {name: value.clone() for name, value in first.items()}
    for name in floating(first):
        out[name] = combine(torch.stack([m[name].detach().to(torch.float64) for m in models])).to(first[name].dtype)
    return out


def with_robust_aggregation(algorithm: Algorithm, rule: RobustAggregation) -> Algorithm:
    """``algorithm`` whose aggregate averages the replies ``rule`` selects or combines (:meth:`RobustAggregation.select`) instead of all of them.

    Only for an algorithm whose ``aggregate`` is a (weighted) mean of its replies' arrays (fedavg, fedprox, moon): Krum's one
    model, Multi-Krum's m and the one combined reply are then averaged by it. With ``rule.rule == 'mean'`` it is ``algorithm`` itself.
    """
    if rule.rule == "mean":
        return algorithm

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        return algorithm.aggregate(state, rule.select(replies), info)

    return algorithm.with_(aggregate=aggregate)
