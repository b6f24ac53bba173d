"""The power of a paired comparison over seeds: the smallest difference n seeds detect, and the seeds a gap needs.

A claim is tested with the two-sided one-sample t test on its paired differences ``d_s`` (the 95% interval of
:mod:`fedprior.results.paired` excludes 0 exactly when this test rejects at alpha = 0.05). With n seeds and a
true mean difference delta, the statistic ``mean(d) / (sd / sqrt(n))`` follows the noncentral t distribution
with n - 1 degrees of freedom and noncentrality ``delta * sqrt(n) / sd``, so the test rejects with probability

    power(n, delta / sd) = P(T' > t_crit) + P(T' < -t_crit),  T' ~ nct(n - 1, delta sqrt(n) / sd),
    t_crit = t(1 - alpha / 2, n - 1)

(Cohen, *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed., Ch. 2; the exact form of the
one-sample t power). :func:`detectable_effect` solves ``power = 0.8`` for delta at the observed n and sd (the
smallest difference those seeds find four times in five); :func:`seeds_needed` is the smallest n whose power
at a given gap (the paper's, for a claim) reaches 0.8, at the observed sd. Both take the observed sd as the
true one: a plan, not a guarantee.
"""

from __future__ import annotations

import math

ALPHA = 0.05
POWER = 0.8
MAX_SEEDS = 1000
"""Where :func:`seeds_needed` stops looking (a gap that small against its spread is out of any budget)."""


def power(n: int, effect: float, alpha: float = ALPHA) -> float:
    """The probability that n paired seeds with standardized mean difference ``effect`` (delta / sd) reject 0 (two-sided)."""
    from scipy.stats import nct, t

    if n < 2:
        return 0.0
    df, critical = n - 1, float(t.ppf(1 - alpha / 2, n - 1))
    shift = abs(effect) * math.sqrt(n)  # symmetric: the power of -delta is that of delta
    upper, lower = float(nct.sf(critical, df, shift)), float(nct.cdf(-critical, df, shift))
    return upper + (lower if math.isfinite(lower) else 0.0)  # scipy's far tail underflows to NaN at large shifts (n = 2: shift > 11)


def detectable_effect(n: int, sd: float | None, alpha: float = ALPHA, target: float = POWER) -> float | None:
    """The smallest |mean difference| that n seeds with paired sd ``sd`` detect with power ``target`` (None: fewer than 2 seeds)."""
    from scipy.optimize import brentq

    if n < 2 or sd is None:
        return None
    if sd == 0:
        return 0.0
    high = 1.0
    while power(n, high, alpha) < target:
        high *= 2
    return sd * float(brentq(lambda e: power(n, e, alpha) - target, 0.0, high, xtol=1e-10))


def seeds_needed(gap: float | None, sd: float | None, alpha: float = ALPHA, target: float = POWER) -> int | None:
    """The fewest seeds (at least 2) whose power at the mean difference ``gap`` reaches ``target``, at paired sd ``sd``.

    None where it cannot be said: no gap, no sd (one seed), or a gap of 0; :data:`MAX_SEEDS` + 1 where even
    :data:`MAX_SEEDS` seeds fall short.
    """
    if gap is None or sd is None or gap == 0:
        return None
    if sd == 0:
        return 2
    effect = abs(gap) / sd
    low, high = 2, 2
    while power(high, effect, alpha) < target:
        if high >= MAX_SEEDS:
            return MAX_SEEDS + 1
        low, high = high, min(2 * high, MAX_SEEDS)
    while low < high:  # power rises with n: the first n that reaches the target
        middle = (low + high) // 2
        if power(middle, effect, alpha) >= target:
            high = middle
        else:
            low = middle + 1
    return high
