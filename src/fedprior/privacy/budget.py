"""A privacy budget, ``privacy.max_epsilon``: the run ends cleanly before the round whose release would spend more.

Before each round the round loop asks :func:`budget_check`'s function (``RoundLoop.before_round``) with the server
state: the releases so far (``privacy.releases``, :mod:`fedprior.algorithms.pieces.differential_privacy`) give the
epsilon spent and the one the next round's release would reach (:class:`fedprior.privacy.accountant.Accounting`);
where the latter exceeds the budget the loop stops before that round (``runtime.simulation.run_rounds``), and a resume
asks again and stops at the same round. Every round releases (a round with no client too), so the round a budget
allows is known before the run: :func:`planned` (``--dry-run`` prints it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedprior.algorithms.base import State
from fedprior.privacy.accountant import Accounting, rounds_within
from fedprior.privacy.config import PrivacyConfig, accounting


def budget_check(privacy: PrivacyConfig, sampler: str, num_clients: int, fraction: float) -> Callable[[State], dict[str, Any] | None] | None:
    """The round loop's ``before_round`` for ``privacy.max_epsilon`` (None with DP off or no budget): None while the next
    round's release keeps epsilon within the budget, else what the stop record says."""
    if privacy.dp == "none" or privacy.max_epsilon is None:
        return None
    from fedprior.algorithms.pieces.differential_privacy import RELEASES

    accounted, budget = accounting(privacy, sampler, num_clients, fraction), privacy.max_epsilon

    def before_round(state: State) -> dict[str, Any] | None:
        releases = int(state[RELEASES])
        spent, following = accounted.epsilon(releases), accounted.epsilon(releases + 1)
        if following <= budget:
            return None
        return {
            "stopped_by": "privacy.max_epsilon",
            "max_epsilon": budget,
            "dp_epsilon": spent,
            "dp_epsilon_next": following,
            "dp_releases": releases,
            "note": (
                f"privacy budget: stopped before this round: epsilon spent {spent:.4g} after {releases} releases; this round would reach "
                f"{following:.4g} > privacy.max_epsilon = {budget:g} ({accounted.label()}, delta {accounted.delta:g})"
            ),
        }

    return before_round


def planned(accounted: Accounting, max_epsilon: float | None, rounds: int) -> tuple[float, int]:
    """(epsilon after ``rounds`` releases, the releases ``max_epsilon`` allows of them: all where unset)."""
    spent = accounted.epsilon(rounds)
    if max_epsilon is None or spent <= max_epsilon:
        return spent, rounds
    return spent, rounds_within(accounted, max_epsilon, rounds)
