"""The config fields of the robust aggregation rules (``algorithm.aggregation_rule``), and their checks: no torch, so a config is checked without it.

The rules themselves: :mod:`fedprior.algorithms.pieces.robust_aggregation` (Yin et al., "Byzantine-Robust Distributed Learning:
Towards Optimal Statistical Rates", ICML 2018, Sec. 3; Blanchard et al., "Machine Learning with Adversaries: Byzantine Tolerant
Gradient Descent", NeurIPS 2017, Sec. 4).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Literal

from pydantic import Field

from fedprior.errors import ConfigError

Rule = Literal["mean", "median", "trimmed_mean", "krum", "multi_krum"]


AggregationName = Annotated[
    Rule,
    Field(
        description="the rule that replaces the mean of the client models: 'mean' (the algorithm's own), 'median' (coordinate-wise, "
        "Yin et al. 2018), 'trimmed_mean' (trim_fraction), 'krum' (krum_f) or 'multi_krum' (krum_f, krum_m; Blanchard et al. 2017)"
    ),
]
TrimFraction = Annotated[
    float,
    Field(
        ge=0,
        description="trimmed mean's beta: the fraction of clients dropped at each end of every coordinate, int(beta n) each (0 <= beta < 0.5)",
    ),
]
KrumF = Annotated[
    int, Field(ge=0, description="Krum's f: the Byzantine clients it tolerates; score = sum of squared distances to the n - f - 2 closest; needs n >= 2f + 3")
]
KrumM = Annotated[int | None, Field(ge=1, description="Multi-Krum's m: how many models of least score are averaged; unset: n - f")]


def robust_aggregation(*, aggregation_rule: AggregationName = "mean", trim_fraction: TrimFraction = 0.1, krum_f: KrumF = 0, krum_m: KrumM = None) -> None:
    """The option of an algorithm whose aggregate is a mean of models (``algorithm.aggregation_rule`` and its fields)."""


OPTION_DEFAULTS = {name: p.default for name, p in inspect.signature(robust_aggregation, eval_str=True).parameters.items()}
NAMES = tuple(OPTION_DEFAULTS)
USED: dict[str, tuple[str, ...]] = {"mean": (), "median": (), "trimmed_mean": ("trim_fraction",), "krum": ("krum_f",), "multi_krum": ("krum_f", "krum_m")}
"""The fields each rule reads."""


def check_rule_fields(aggregation: Rule, trim_fraction: float, krum_f: int, krum_m: int | None) -> None:
    """ConfigError for a field set away from its default that the rule does not read, and for trim_fraction >= 1/2."""
    given = {"trim_fraction": trim_fraction, "krum_f": krum_f, "krum_m": krum_m}
    unused = [name for name, value in given.items() if name not in USED[aggregation] and value != OPTION_DEFAULTS[name]]
    if unused:
        readers = [rule for rule, used in USED.items() if unused[0] in used]
        raise ConfigError(
            f"algorithm.{unused[0]}: applies with algorithm.aggregation_rule = {' or '.join(repr(r) for r in readers)}, not with {aggregation!r}; "
            f"leave it {'unset' if OPTION_DEFAULTS[unused[0]] is None else f'at its default {OPTION_DEFAULTS[unused[0]]}'} or choose a rule that reads it"
        )
    if trim_fraction >= 0.5:
        raise ConfigError(
            f"algorithm.trim_fraction: trimming beta = {trim_fraction} of the clients at each end leaves none to average "
            "(Yin et al. 2018, Sec. 3: beta < 1/2); accepted: 0 <= trim_fraction < 0.5"
        )


def check_round_size(rule: Rule, krum_f: int, krum_m: int | None, clients: int) -> None:
    """ConfigError where a round of ``clients`` replies is too small for the rule: Krum's n >= 2f + 3 (Blanchard et al. 2017,
    Sec. 4), Multi-Krum's m <= n - f, a trimmed mean's int(beta n) >= 1 at each end is not asked (beta n < 1 trims none)."""
    if rule in ("krum", "multi_krum") and clients < 2 * krum_f + 3:
        raise ConfigError(
            f"algorithm.krum_f: Krum tolerating f = {krum_f} Byzantine clients needs n >= 2f + 3 = {2 * krum_f + 3} clients a round "
            f"(Blanchard et al. 2017, Sec. 4); a round samples {clients} (federation.num_clients x federation.fraction); accepted: krum_f <= {max((clients - 3) // 2, 0)}"
            + ("" if clients >= 3 else " (and at least 3 clients a round)")
        )
    if rule == "multi_krum" and krum_m is not None and krum_m > clients - krum_f:
        raise ConfigError(
            f"algorithm.krum_m: Multi-Krum averages m <= n - f = {clients - krum_f} models of a round of {clients}; accepted: 1 .. {clients - krum_f}"
        )
