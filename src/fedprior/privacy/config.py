"""The ``[privacy]`` config section: client-level differential privacy (DP-FedAvg) and its accounting.

Off by default (``dp = 'none'``). Its fields are checked here, with those of ``[federation]`` they depend on
(:func:`check_privacy`), before any data loads; what each does is in
:mod:`fedprior.algorithms.pieces.differential_privacy` and :mod:`fedprior.privacy.accountant`, and in
docs/privacy-robustness.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fedprior.errors import ConfigError
from fedprior.validation import ConfigSection


class PrivacyConfig(ConfigSection):
    dp: Literal["none", "server", "client"] = "none"
    """Client-level differential privacy, DP-FedAvg (McMahan et al. 2018, Algorithm 1): 'none'; 'server': the server clips each client's update w_k - w to clip_norm, averages them with equal weights over the m clients sampled per round and adds Gaussian noise of std noise_multiplier * clip_norm / m to every coordinate; 'client': each client clips its own update, the server adds the noise. For algorithms whose clients reply with their model and whose server reads only their mean (fedavg, fedprox, moon, fedntd, and the server optimizers fedavgm, fedadagrad, fedadam, fedyogi, which step on the noised mean)."""
    noise_multiplier: float = Field(1.0, gt=0)
    """z: the noise std over the clip norm (the sensitivity of the sum of clipped updates)."""
    clip_norm: float = Field(1.0, gt=0)
    """C: the L2 norm each client's update is clipped to (with clipping = 'adaptive', its value in round 1)."""
    clipping: Literal["fixed", "adaptive"] = "fixed"
    """'fixed' C, or 'adaptive': C follows the target_quantile of the update norms, estimated with noise from the fraction of unclipped updates (Andrew et al. 2021, Algorithm 1)."""
    target_quantile: float = Field(0.5, ge=0, le=1)
    """gamma: the fraction of updates adaptive clipping aims to leave unclipped."""
    clip_lr: float = Field(0.2, gt=0)
    """eta_C: the step of adaptive clipping's geometric update C <- C exp(-eta_C (b - gamma)), b the noised fraction of unclipped updates."""
    count_stddev: float | None = Field(None, gt=0)
    """sigma_b: the std of the noise on the count of unclipped updates (adaptive clipping); unset: m / 20 (Andrew et al. 2021). noise_multiplier must stay below 2 sigma_b."""
    delta: float = Field(1e-5, gt=0, lt=1)
    """The delta at which the accountant reports epsilon (keep it well below 1 / federation.num_clients)."""
    accountant: Literal["poisson", "without-replacement"] = "poisson"
    """How the RDP accountant (dp-accounting) models client sampling: 'poisson' (each client joins with probability m / N, add-or-remove-one-client: DP-FedAvg's accounting, an approximation of fedprior's fixed-size sampling) or 'without-replacement' (exactly m of N, fedprior's sampling; replace-one-client neighbouring)."""
    overnorm: Literal["clip", "drop"] = "clip"
    """With dp = 'client', what the server does with a reply whose update is above clip_norm beyond float tolerance (a client that did not clip): 'clip' it to clip_norm, or 'drop' it from the round's sum; counted each round as dp_overnorm_replies (fedprior.algorithms.pieces.clip_check)."""


ADAPTIVE_FIELDS = ("target_quantile", "clip_lr", "count_stddev")
DEFAULTS = {name: field.default for name, field in PrivacyConfig.model_fields.items()}


def sampled_clients(num_clients: int, fraction: float) -> int:
    """m, the clients sampled per round (``runtime.sampling.clients_per_round``, without importing the runtime)."""
    return max(1, min(num_clients, int(round(fraction * num_clients))))


def check_privacy(privacy: PrivacyConfig, num_clients: int, fraction: float, rounds: int) -> float | None:
    """ConfigError naming the field for settings that cannot run or cannot be accounted; the epsilon after ``rounds`` (None with dp off).

    A field set away from its default that the chosen mode does not read is refused, as the server
    optimizer's are (a noise multiplier with ``dp = 'none'``, a target quantile with fixed clipping).
    """
    set_fields = [name for name in DEFAULTS if name != "dp" and getattr(privacy, name) != DEFAULTS[name]]
    if privacy.dp == "none":
        if set_fields:
            raise ConfigError(f"privacy.{set_fields[0]}: applies with privacy.dp = 'server' or 'client', not 'none'; leave it at its default or turn DP on")
        return None
    if privacy.clipping == "fixed":
        unused = [name for name in ADAPTIVE_FIELDS if name in set_fields]
        if unused:
            raise ConfigError(f"privacy.{unused[0]}: applies with privacy.clipping = 'adaptive', not 'fixed'; leave it at its default or clip adaptively")
    if privacy.dp != "client" and "overnorm" in set_fields:
        raise ConfigError(
            "privacy.overnorm: applies with privacy.dp = 'client' (the server's check of the clients' clipping); with 'server' the server clips every update itself"
        )
    m = sampled_clients(num_clients, fraction)
    if privacy.clipping == "adaptive":
        sigma_b = m / 20 if privacy.count_stddev is None else privacy.count_stddev
        if not privacy.noise_multiplier < 2 * sigma_b:
            unset = " (unset: m / 20)" if privacy.count_stddev is None else ""
            raise ConfigError(
                f"privacy.noise_multiplier: {privacy.noise_multiplier:g} must be below 2 * privacy.count_stddev = {2 * sigma_b:g}{unset} with adaptive "
                "clipping (the count's noise would use up the whole budget; Andrew et al. 2021, Theorem 1); raise privacy.count_stddev or lower the multiplier"
            )
    from fedprior.privacy.accountant import check_accountable

    return check_accountable(privacy.noise_multiplier, num_clients, m, rounds, privacy.delta, privacy.accountant)
