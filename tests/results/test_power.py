"""fedprior.results.power against values computed independently: the noncentral t integrated here, a simulation, a textbook table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from fedprior.results.power import MAX_SEEDS, detectable_effect, power, seeds_needed


def power_by_integration(n: int, delta: float, sd: float, alpha: float = 0.05) -> float:
    """P(|t| > t_crit) for the one-sample t statistic, integrating over the sample sd's chi distribution (no nct):
    t = (z + lam) / sqrt(V / df) with z ~ N(0, 1), V ~ chi2(df), lam = delta sqrt(n) / sd."""
    df, lam = n - 1, delta * math.sqrt(n) / sd
    critical = stats.t.ppf(1 - alpha / 2, df)

    def given_v(v: float) -> float:
        scale = critical * math.sqrt(v / df)
        return (stats.norm.sf(scale - lam) + stats.norm.cdf(-scale - lam)) * stats.chi2.pdf(v, df)

    return integrate.quad(given_v, 0, np.inf, limit=200)[0]


@pytest.mark.parametrize(("n", "delta", "sd"), [(3, 2.0, 1.0), (5, 1.3, 2.0), (10, 0.9, 1.0), (19, 0.3, 0.5), (2, 8.0, 1.0), (2, 30.0, 1.0)])
def test_power_is_the_noncentral_t_integrated_by_hand(n, delta, sd):
    assert power(n, delta / sd) == pytest.approx(power_by_integration(n, delta, sd), abs=1e-6)


def test_power_agrees_with_a_simulated_t_test():
    """3 seeds at a standardized difference of 2: the share of simulated t tests that reject (scipy's ttest_1samp)."""
    rng = np.random.default_rng(0)
    samples = rng.normal(2.0, 1.0, size=(40_000, 3))
    rejected = stats.ttest_1samp(samples, 0.0, axis=1).pvalue < 0.05
    assert power(3, 2.0) == pytest.approx(rejected.mean(), abs=0.01)


def test_seeds_needed_match_the_textbook_one_sample_table():
    """Two-sided alpha 0.05, power 0.8, one-sample t: n = 34 at d = 0.5, 15 at d = 0.8, 10 at d = 1.0 (Cohen 1988, Table
    2.4.1 as G*Power computes it exactly), each the first n whose power reaches 0.8."""
    for d, n in ((0.5, 34), (0.8, 15), (1.0, 10)):
        assert seeds_needed(d * 2.0, 2.0) == n
        assert power_by_integration(n, d, 1.0) >= 0.8 > power_by_integration(n - 1, d, 1.0)


def test_detectable_effect_is_where_power_reaches_80_percent():
    for n, sd in ((3, 1.0), (3, 2.57), (10, 0.68)):
        effect = detectable_effect(n, sd)
        assert effect is not None
        assert power_by_integration(n, effect, sd) == pytest.approx(0.8, abs=1e-5)
    assert detectable_effect(3, 1.0) == pytest.approx(2 * detectable_effect(3, 0.5))


def test_the_limits():
    assert detectable_effect(1, None) is None and detectable_effect(3, 0.0) == 0.0
    assert seeds_needed(None, 1.0) is None and seeds_needed(1.0, None) is None and seeds_needed(0.0, 1.0) is None
    assert seeds_needed(1.0, 0.0) == 2
    assert seeds_needed(0.001, 10.0) == MAX_SEEDS + 1
    assert seeds_needed(-2.0, 1.0) == seeds_needed(2.0, 1.0)
    assert detectable_effect(2, 0.01) == pytest.approx(0.01 * detectable_effect(2, 1.0))  # two seeds: scipy's far tail is NaN there
