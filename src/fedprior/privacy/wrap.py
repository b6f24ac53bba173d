"""A run's algorithm under its ``[privacy]`` section: the composition both the server and the clients (workers, Flower nodes) build."""

from __future__ import annotations

from fedprior.algorithms.base import Algorithm
from fedprior.privacy.config import PrivacyConfig


def with_privacy(algorithm: Algorithm, privacy: PrivacyConfig, num_clients: int, fraction: float, accounted: bool = True) -> Algorithm:
    """``algorithm`` under the ``[privacy]`` section's client-level DP (``privacy.dp``; itself where 'none'), on both sides:
    the server's clipping, noise and accounting (``accounted``: report ``dp_epsilon`` each round), the clients' clipping."""
    if privacy.dp == "none":
        return algorithm
    from fedprior.algorithms.pieces.differential_privacy import ClientLevelDp, with_client_level_dp
    from fedprior.privacy.accountant import epsilon
    from fedprior.privacy.config import sampled_clients

    m = sampled_clients(num_clients, fraction)
    dp = ClientLevelDp(
        privacy.dp,
        privacy.noise_multiplier,
        privacy.clip_norm,
        m,
        adaptive=privacy.clipping == "adaptive",
        target_quantile=privacy.target_quantile,
        clip_lr=privacy.clip_lr,
        count_stddev=privacy.count_stddev,
        overnorm=privacy.overnorm,
    )

    def spent(releases: int) -> float:
        return epsilon(privacy.noise_multiplier, num_clients, m, releases, privacy.delta, privacy.accountant)

    return with_client_level_dp(algorithm, dp, spent if accounted else None)
