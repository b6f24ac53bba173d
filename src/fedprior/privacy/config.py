"""The ``[privacy]`` config section: client-level differential privacy (DP-FedAvg) and its accounting.

Off by default (``dp = 'none'``). Its fields are checked here, with those of ``[federation]`` they depend on
(:func:`check_privacy`), before any data loads; what each does is in
:mod:`fedprior.algorithms.pieces.differential_privacy` and :mod:`fedprior.privacy.accountant`, and in
docs/privacy-robustness.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from fedprior.errors import ConfigError
from fedprior.validation import ConfigSection

if TYPE_CHECKING:
    from fedprior.privacy.accountant import Accounting


class PrivacyConfig(ConfigSection):
    dp: Literal["none", "server", "client", "sample"] = "none"
    """Client-level differential privacy, DP-FedAvg (McMahan et al. 2018, Algorithm 1): 'none'; 'server': the server clips each client's update w_k - w to clip_norm, averages them with equal weights over the m clients sampled per round and adds Gaussian noise of std noise_multiplier * clip_norm / m to every coordinate; 'client': each client clips its own update, the server adds the noise. For algorithms whose clients reply with their model and whose server reads only their mean (fedavg, fedprox, moon, fedntd, and the server optimizers fedavgm, fedadagrad, fedadam, fedyogi, which step on the noised mean). 'sample': record-level DP, each client trains with DP-SGD (Abadi et al. 2016, Algorithm 1, with Opacus: each example's gradient clipped to clip_norm, Gaussian noise of std noise_multiplier * clip_norm on the sum of a Poisson-sampled lot) and keeps its own accountant; the worst client's epsilon is reported (fedavg, fedavgm, fedadagrad, fedadam, fedyogi on model 'cnn'; the opacus extra)."""
    noise_multiplier: float = Field(1.0, gt=0)
    """z: the noise std over the clip norm (the sensitivity of the sum of clipped updates; with dp = 'sample', of a lot's clipped per-example gradients)."""
    clip_norm: float = Field(1.0, gt=0)
    """C: the L2 norm each client's update is clipped to (with clipping = 'adaptive', its value in round 1; with dp = 'sample', each example's gradient)."""
    clipping: Literal["fixed", "adaptive"] = "fixed"
    """'fixed' C, or 'adaptive': C follows the target_quantile of the update norms, estimated with noise from the fraction of unclipped updates (Andrew et al. 2021, Algorithm 1)."""
    target_quantile: float = Field(0.5, ge=0, le=1)
    """gamma: the fraction of updates adaptive clipping aims to leave unclipped."""
    clip_lr: float = Field(0.2, gt=0)
    """eta_C: the step of adaptive clipping's geometric update C <- C exp(-eta_C (b - gamma)), b the noised fraction of unclipped updates."""
    count_stddev: float | None = Field(None, gt=0)
    """sigma_b: the std of the noise on the centred count of unclipped updates (adaptive clipping); unset: the expected clients a round / 20 (Andrew et al. 2021's m / 20). noise_multiplier must stay below 2 sigma_b."""
    delta: float = Field(1e-5, gt=0, lt=1)
    """The delta at which the accountant reports epsilon; must be below 1 / federation.num_clients (keep it well below)."""
    accountant: Literal["pld", "rdp"] = "pld"
    """How epsilon is computed (dp-accounting): 'pld' (privacy-loss distribution, tight) or 'rdp' (Renyi DP, a looser upper bound). The sampling model is the one federation.sampler runs: 'poisson' (add-or-remove-one-client) or 'uniform' (fixed size m without replacement, replace-one-client)."""
    overnorm: Literal["clip", "drop"] = "clip"
    """With dp = 'client', what the server does with a reply whose update is above clip_norm beyond float tolerance (a client that did not clip): 'clip' it to clip_norm, or 'drop' it from the round's sum; counted each round as dp_overnorm_replies (fedprior.algorithms.pieces.clip_check)."""
    max_epsilon: float | None = Field(None, gt=0)
    """A privacy budget: the run ends cleanly before the round whose release would take epsilon (at delta) above it; unset: no budget."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_accountant(cls, data: Any) -> Any:
        """``accountant = 'poisson'`` or ``'without-replacement'`` (the values before the sampling followed ``federation.sampler``):
        meaningless with DP off (every run directory written then holds 'poisson'), so read as the default; refused with DP on."""
        if isinstance(data, dict) and data.get("accountant") in LEGACY:
            if data.get("dp", "none") == "none":
                return {k: v for k, v in data.items() if k != "accountant"}
            raise ConfigError(
                f"privacy.accountant: {data['accountant']!r} named a sampling model, which now follows federation.sampler "
                "('poisson': add-or-remove, 'uniform': fixed size, replace-one); the accountant is the method: 'pld' (tight, the default) or 'rdp'"
            )
        return data


LEGACY = ("poisson", "without-replacement")
"""``accountant``'s values before it named the method: they named the sampling model, which now follows ``federation.sampler``."""
ADAPTIVE_FIELDS = ("target_quantile", "clip_lr", "count_stddev")
DEFAULTS = {name: field.default for name, field in PrivacyConfig.model_fields.items()}


def sampled_clients(num_clients: int, fraction: float) -> int:
    """m, the clients sampled per round (``runtime.sampling.clients_per_round``, without importing the runtime)."""
    return max(1, min(num_clients, int(round(fraction * num_clients))))


def noise_denominator(sampler: str, num_clients: int, fraction: float) -> float:
    """The fixed denominator of DP-FedAvg's noised mean (McMahan et al. 2018, Sec. 2): the expected count qN under Poisson
    sampling (not rounded), m under fixed-size sampling."""
    return fraction * num_clients if sampler == "poisson" else float(sampled_clients(num_clients, fraction))


def accounting(privacy: PrivacyConfig, sampler: str, num_clients: int, fraction: float) -> Accounting:
    """The run's :class:`~fedprior.privacy.accountant.Accounting`: z, the sampling model of ``sampler`` (a ConfigError line for a
    sampler no bound covers), its rate (q = fraction for Poisson, m / N for fixed size), the method and delta."""
    from fedprior.privacy.accountant import Accounting, sampling_of

    sampling = sampling_of(sampler)
    m = sampled_clients(num_clients, fraction)
    rate = fraction if sampling == "poisson" else m / num_clients
    return Accounting(privacy.noise_multiplier, num_clients, sampling, rate, m, privacy.accountant, privacy.delta)


def check_privacy(privacy: PrivacyConfig, num_clients: int, fraction: float, rounds: int, sampler: str = "poisson") -> float | None:
    """ConfigError naming the field for settings that cannot run or cannot be accounted; the epsilon after ``rounds`` (None with dp off or 'sample').

    A field set away from its default that the chosen mode does not read is refused, as the server
    optimizer's are (a noise multiplier with ``dp = 'none'``, a target quantile with fixed clipping).
    ``sampler``: ``federation.sampler`` as run, which decides the sampling model of the accounting.
    """
    set_fields = [name for name in DEFAULTS if name != "dp" and getattr(privacy, name) != DEFAULTS[name]]
    if privacy.dp == "none":
        if set_fields:
            raise ConfigError(f"privacy.{set_fields[0]}: applies with privacy.dp = 'server' or 'client', not 'none'; leave it at its default or turn DP on")
        return None
    if privacy.dp == "sample":  # record-level DP-SGD (fedprior.privacy.record_level): the client-level fields do not apply
        unused = [name for name in ("clipping", *ADAPTIVE_FIELDS, "accountant") if name in set_fields]
        if unused:
            raise ConfigError(f"privacy.{unused[0]}: applies with privacy.dp = 'server' or 'client', not 'sample'; leave it at its default")
        return None  # each client's epsilon depends on its example count, known once the data is split
    if privacy.clipping == "fixed":
        unused = [name for name in ADAPTIVE_FIELDS if name in set_fields]
        if unused:
            raise ConfigError(f"privacy.{unused[0]}: applies with privacy.clipping = 'adaptive', not 'fixed'; leave it at its default or clip adaptively")
    if privacy.dp != "client" and "overnorm" in set_fields:
        raise ConfigError(
            "privacy.overnorm: applies with privacy.dp = 'client' (the server's check of the clients' clipping); with 'server' the server clips every update itself"
        )
    if not privacy.delta < 1 / num_clients:
        raise ConfigError(
            f"privacy.delta: {privacy.delta:g} is not below 1 / federation.num_clients = {1 / num_clients:g} ({num_clients} clients): "
            "a mechanism that publishes one client's whole update outright meets such a delta; keep it well below, e.g. 1e-5"
        )
    accounted = accounting(privacy, sampler, num_clients, fraction)  # first: refuses a sampler no bound covers
    denominator = noise_denominator(sampler, num_clients, fraction)
    if privacy.clipping == "adaptive":
        sigma_b = denominator / 20 if privacy.count_stddev is None else privacy.count_stddev
        if not privacy.noise_multiplier < 2 * sigma_b:
            unset = " (unset: the expected clients a round / 20)" if privacy.count_stddev is None else ""
            raise ConfigError(
                f"privacy.noise_multiplier: {privacy.noise_multiplier:g} must be below 2 * privacy.count_stddev = {2 * sigma_b:g}{unset} with adaptive "
                "clipping (the count's noise would use up the whole budget; Andrew et al. 2021, Theorem 1); raise privacy.count_stddev or lower the multiplier"
            )
        check_clip_step(privacy.clip_lr, sigma_b / denominator)
    from fedprior.privacy.accountant import check_accountable

    return check_accountable(accounted, rounds)


MAX_LOG_STEP = 700.0
"""The largest |log| of adaptive clipping's one-round factor exp(-eta_C (b - gamma)) that stays a float (exp overflows past 709)."""


def check_clip_step(clip_lr: float, fraction_std: float) -> None:
    """Adaptive clipping's step C <- C exp(-eta_C (b - gamma)) must stay a float for any noised fraction b within ten standard
    deviations (``fraction_std`` = sigma_b / the denominator) of [0, 1]: eta_C (1 + 10 sd) <= 700, before any round runs."""
    reach = clip_lr * (1 + 10 * fraction_std)
    if not reach <= MAX_LOG_STEP:
        raise ConfigError(
            f"privacy.clip_lr: {clip_lr:g} makes adaptive clipping's step exp(-clip_lr (b - target_quantile)) overflow a float "
            f"(|exponent| up to {reach:g} > {MAX_LOG_STEP:g}); keep clip_lr at most {MAX_LOG_STEP / (1 + 10 * fraction_std):g} (Andrew et al. 2021 use 0.2)"
        )
