"""A run's algorithm under its ``[privacy]`` section: the composition both the server and the clients (workers, Flower nodes) build."""

from __future__ import annotations

import math

from fedprior.algorithms.base import Algorithm
from fedprior.privacy.config import PrivacyConfig


def with_privacy(algorithm: Algorithm, privacy: PrivacyConfig, num_clients: int, fraction: float, sampler: str, accounted: bool = True) -> Algorithm:
    """``algorithm`` under the ``[privacy]`` section's client-level DP (``privacy.dp``; itself where 'none'), on both sides:
    the server's clipping, noise and accounting (``accounted``: report ``dp_epsilon`` each round), the clients' clipping.
    ``sampler`` (``federation.sampler`` as run) decides the noise's denominator (qN for 'poisson', m for 'uniform') and the
    accounting's sampling model."""
    if privacy.dp == "none":
        return algorithm
    if privacy.dp == "sample":  # the clients' DP-SGD: fedprior.privacy.record_level
        return algorithm
    from fedprior.algorithms.pieces.differential_privacy import ClientLevelDp, with_client_level_dp
    from fedprior.privacy.config import accounting, noise_denominator

    dp = ClientLevelDp(
        privacy.dp,
        privacy.noise_multiplier,
        privacy.clip_norm,
        noise_denominator(sampler, num_clients, fraction),
        adaptive=privacy.clipping == "adaptive",
        target_quantile=privacy.target_quantile,
        clip_lr=privacy.clip_lr,
        count_stddev=privacy.count_stddev,
        overnorm=privacy.overnorm,
    )
    return with_client_level_dp(algorithm, dp, accounting(privacy, sampler, num_clients, fraction) if accounted else None)


def noise_warning(noise_multiplier: float, denominator: float, size: int, rounds: int) -> str | None:
    """A line where, over all ``rounds``, the noise outweighs anything the clipped updates can do: the noise added to the model
    after T rounds has norm about sqrt(T) z C sqrt(d) / m (T independent draws of std z C / m on each of d coordinates), while T
    clipped means move it by at most T C; the first exceeds the second where z sqrt(d) / m > sqrt(T). None otherwise."""
    ratio = noise_multiplier * math.sqrt(size) / denominator
    if not ratio > math.sqrt(rounds):
        return None
    return (
        f"privacy: the noise will outweigh the updates: its norm on the mean, z C sqrt(d) / m = {ratio:.3g} C (z {noise_multiplier:g}, "
        f"d {size:,} parameters, m {denominator:g} clients a round), exceeds sqrt(rounds) C = {math.sqrt(rounds):.3g} C, so after {rounds} rounds "
        "the noise added is larger than anything the clipped updates can move the model by: the model will be mostly noise; sample more "
        "clients a round (federation.num_clients, federation.fraction) or lower privacy.noise_multiplier"
    )


def warn_if_noisy(algorithm: Algorithm, privacy: PrivacyConfig, num_clients: int, fraction: float, sampler: str, rounds: int) -> None:
    """:func:`noise_warning` for the model of ``algorithm`` (d: the floating-point entries of its first broadcast), as a warning
    (the server side calls it once, after the model is built)."""
    if privacy.dp == "none" or privacy.dp == "sample" or rounds == 0:  # 'sample': no noise on the mean
        return
    import warnings

    from fedprior.algorithms.base import RoundInfo
    from fedprior.algorithms.pieces.differential_privacy import ClientLevelDp
    from fedprior.privacy.config import noise_denominator

    denominator = noise_denominator(sampler, num_clients, fraction)
    dp = ClientLevelDp(
        "server" if privacy.dp == "server" else "client",
        privacy.noise_multiplier,
        privacy.clip_norm,
        denominator,
        adaptive=privacy.clipping == "adaptive",
        count_stddev=privacy.count_stddev,
    )
    info = RoundInfo(seed=0, stage=algorithm.stages[0].name if algorithm.stages else "federated", round=0)
    size = sum(v.numel() for v in algorithm.broadcast(algorithm.init(info), info).arrays.values() if v.is_floating_point())
    line = noise_warning(dp.update_noise_multiplier, denominator, size, rounds)
    if line is not None:
        warnings.warn(line, stacklevel=2)
