"""Paired differences over seeds: mean, sample sd and the 95% interval of the mean from Student's t, and a verdict.

Two methods run with the same seeds (the same partition and client sampling for both, where they share those
settings) give one difference per seed, ``d_s = a_s - b_s``. Their mean, sample standard deviation (n - 1) and
the 95% interval of the mean, ``mean +- t(0.975, n - 1) * sd / sqrt(n)``, say whether a is better than b: the
difference **holds** where the interval lies above 0, is **reversed** below 0, and is **not resolved** where it
spans 0 or there is one seed. ``fedprior table`` gives the papers' claims these verdicts
(:mod:`fedprior.reproduce.findings`); ``fedprior compare`` prints them between paired groups
(:mod:`fedprior.results.compare`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
HOLDS, REVERSED, NOT_RESOLVED = "holds", "reversed", "not resolved"


@dataclass(frozen=True)
class Paired:
    """Paired differences over seeds: n, mean, sample sd and the t interval of the mean (None with one seed)."""

    n: int
    mean: float
    sd: float | None
    low: float | None
    high: float | None


def t_quantile(n: int) -> float:
    """t(0.975, n - 1): the two-sided 95% quantile of Student's t with n - 1 degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def paired(differences: Sequence[float]) -> Paired:
    """Mean, sd (n - 1) and 95% t interval of ``differences`` (one per seed)."""
    d = np.asarray(differences, dtype=float)
    mean = float(d.mean())
    if d.size < 2:
        return Paired(int(d.size), mean, None, None, None)
    sd = float(d.std(ddof=1))
    half = t_quantile(d.size) * sd / math.sqrt(d.size)
    return Paired(int(d.size), mean, sd, mean - half, mean + half)


def verdict(stats: Paired) -> str:
    """holds (interval above 0), reversed (below 0) or not resolved (spans 0, or one seed)."""
    if stats.low is None or stats.high is None:
        return NOT_RESOLVED
    if stats.low > 0:
        return HOLDS
    if stats.high < 0:
        return REVERSED
    return NOT_RESOLVED
