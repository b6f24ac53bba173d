"""What client-level DP (``privacy.dp``) and SecAgg+ (``--secagg``) need of a run's aggregation: the one rule set, whose
refusals name their cause. No torch, so a config is checked with it before anything loads.

Both hand the algorithm's ``aggregate`` one vector and never a client's reply: DP-FedAvg the noised mean of the clipped
updates (McMahan et al., "Learning Differentially Private Recurrent Language Models", ICLR 2018, Algorithm 1), SecAgg+ the
sum of the nodes' masked vectors (Bell et al., "Secure Single-Server Aggregation with (Poly)Logarithmic Overhead", CCS 2020).
An aggregation that reads each reply runs under neither. The causes, in the order they are checked:

1. a robust rule (``algorithm.aggregation_rule`` other than 'mean': the coordinate-wise median, the trimmed mean, Krum and
   Multi-Krum read every reply; Yin et al. 2018, Definitions 1-2; Blanchard et al. 2017, Sec. 4): refused with DP and with SecAgg+;
2. under SecAgg+, a ``privacy.dp`` mode SecAgg+ cannot run: 'server' clips each client's update on the server,
   which SecAgg+ never shows it; 'sample' reports each client's own epsilon (:data:`SECAGG_DP`: the modes SecAgg+ runs with);
3. the algorithm's own aggregate (:attr:`~fedprior.algorithms.base.Algorithm.mean_aggregate` False: SCAFFOLD's control
   variates, FedDB's DMA, per-client uploads), refused by the wrappers themselves on the built algorithm
   (:func:`~fedprior.algorithms.pieces.differential_privacy.with_client_level_dp`,
   :func:`~fedprior.flower.secagg.require_secure_summable`, both through
   :func:`~fedprior.algorithms.base.require_mean_aggregate`).

(1) and (2) are known from the config: :func:`check_private_aggregation` refuses them when the config is loaded (DP) and
before ``fedprior flower local --secagg`` loads any data. (3) needs the built algorithm: the run builds it after its data
loads; ``--dry-run`` and a grid's planning build it on the run's task before anything trains
(:func:`fedprior.experiments.dry_run.check_built_algorithm`).
"""

from __future__ import annotations

from fedprior.errors import ConfigError

CLIENT_LEVEL_DP = ("server", "client")
"""The ``privacy.dp`` modes of DP-FedAvg: the clients' updates are clipped and their mean noised, so the aggregate reads that mean only."""

SECAGG_DP = ("none", "client")
"""The ``privacy.dp`` modes SecAgg+ runs with (the others are refused by :func:`check_private_aggregation`, with :data:`SECAGG_DP_REFUSED`'s reason)."""

SECAGG_DP_REFUSED = {
    "server": "clips each client's update on the server, and under SecAgg+ the server sees only their sum (it cannot clip what it cannot see)",
    "sample": "reports each client's own epsilon, which SecAgg+'s sum hides from the server",
}
"""Why SecAgg+ refuses a ``privacy.dp`` mode that is not in :data:`SECAGG_DP`."""


def check_private_aggregation(aggregation_rule: str, dp: str, secagg: bool) -> None:
    """One ConfigError line naming the cause where ``privacy.dp`` or SecAgg+ (``secagg``) cannot run with the config's
    aggregation: the robust rule ``aggregation_rule`` ('mean' where the algorithm has none), or ``dp`` under SecAgg+
    (causes 1 and 2 of the module docstring)."""
    if aggregation_rule != "mean":
        if dp in CLIENT_LEVEL_DP:
            raise ConfigError(
                f"privacy.dp: algorithm.aggregation_rule = {aggregation_rule!r} reads each client's reply, and DP-FedAvg gives the aggregate "
                f"only the noised mean of the clipped updates; accepted with privacy.dp = {dp!r}: algorithm.aggregation_rule = 'mean' "
                "(or privacy.dp = 'none' for the robust rule)"
            )
        if secagg:
            raise ConfigError(
                f"--secagg: algorithm.aggregation_rule = {aggregation_rule!r} reads each client's reply, and SecAgg+ gives the server only "
                "their sum; accepted with --secagg: algorithm.aggregation_rule = 'mean'"
            )
    if secagg and dp not in SECAGG_DP:
        reason = SECAGG_DP_REFUSED.get(dp, "is not combined with SecAgg+")
        raise ConfigError(
            f"--secagg: privacy.dp = {dp!r} {reason}; accepted with --secagg: privacy.dp = 'client' (clients clip, SecAgg+ sums, the server adds the noise) or 'none'"
        )
