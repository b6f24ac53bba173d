"""Privacy accounting of DP-FedAvg for the client sampling that runs, with dp-accounting (Google's ``dp_accounting``).

One round of DP-FedAvg (McMahan et al., "Learning Differentially Private Recurrent Language Models", ICLR 2018,
Algorithm 1) is a subsampled Gaussian mechanism on the clients: each sampled client's update is clipped to C and
noise of std z C is added to their sum. T rounds compose it T times. The sampling model is the one the round loop
runs (``federation.sampler``), never chosen apart from it (:func:`sampling_of`):

- ``'poisson'`` (the sampler ``poisson``): each client joins a round independently with probability q; neighbouring
  federations differ by adding or removing one client ('add-or-remove'), which moves the sum by at most C;
- ``'fixed-size'`` (the sampler ``uniform``): exactly m of the N clients, uniformly without replacement; there the
  neighbouring relation is replacing one client ('replace-one'), which moves the sum by up to 2C. For PLD the pair
  (1 - q) N(0, z^2) + q N(2, z^2) against N(0, z^2), q = m / N, in both directions, dominates fixed-size sampling
  without replacement under replace-one (Zhu, Dong, Wang, "Optimal Accounting of Differential Privacy via
  Characteristic Function", AISTATS 2022: the dominating pair of subsampling without replacement under replace-one,
  for the Gaussian of sensitivity 2); for RDP, dp-accounting's
  ``SampledWithoutReplacementDpEvent`` (Wang, Balle, Kasiviswanathan, "Subsampled Renyi Differential Privacy and
  Analytical Moments Accountant", AISTATS 2019, Theorem 27) of a Gaussian of multiplier z / 2.

Samplers that depend on the data or on the clients' losses (size-weighted, power-of-choice, a registered one) are
covered by no subsampling bound: :func:`sampling_of` refuses them.

Two methods, ``privacy.accountant``: ``'pld'`` (the default: the privacy-loss distribution, tight up to its
discretisation, which rounds pessimistically: Koskela, Jalko, Honkela, "Computing Tight Differential Privacy
Guarantees Using FFT", AISTATS 2020; dp-accounting's ``privacy_loss_distribution.from_gaussian_mechanism``) and
``'rdp'`` (Renyi DP: Mironov, "Renyi Differential Privacy", 2017; Mironov, Talwar, Zhang, "Renyi Differential
Privacy of the Sampled Gaussian Mechanism", 2019; an upper bound, looser than PLD).

With adaptive clipping the clip-norm estimate is a second release; with the count centred, Andrew et al. (2021,
Theorem 1) make both together one Gaussian mechanism of multiplier z (``ClientLevelDp.update_noise_multiplier``),
accounted as z, under add-or-remove and, with sensitivities 2C and 1, under replace-one. Training metrics that
clients send in the clear (their training loss) are outside the accounting, as in Flower.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal

from fedprior.errors import ConfigError

Method = Literal["pld", "rdp"]
Sampling = Literal["poisson", "fixed-size"]
RELATIONS: dict[Sampling, str] = {"poisson": "add-or-remove", "fixed-size": "replace-one"}
SAMPLING_OF_SAMPLER: dict[str, Sampling] = {"poisson": "poisson", "uniform": "fixed-size"}
"""The samplers a subsampling bound covers, and the sampling model each one runs."""

ORDERS = (*range(2, 64), 128, 256, 512, 1024)
"""The RDP orders: integers (dp-accounting's default fractional orders below 2 do not converge for q = 0.1 and warn)."""
PLD_INTERVAL = 1e-3
"""The PLD's discretisation of the privacy loss: the presets' epsilon agrees with a ten times finer grid to 1e-5 (tests/privacy), at a tenth of its cost."""
MIN_NOISE_MULTIPLIER = 0.1
"""Below this z the PLD's grid (the privacy loss range over PLD_INTERVAL, growing as 1 / z^2) takes gigabytes and minutes; such a z
gives an epsilon in the hundreds a round anyway."""


def sampling_of(sampler: str) -> Sampling:
    """The sampling model the sampler ``federation.sampler = sampler`` runs; one ConfigError line for a sampler no bound covers."""
    if sampler not in SAMPLING_OF_SAMPLER:
        raise ConfigError(
            f"federation.sampler: '{sampler}' cannot run with privacy.dp on: its choice depends on the clients' data or losses, and no "
            "subsampling bound covers such a selection, so no epsilon would hold; use 'poisson' (add-or-remove, the default under DP) "
            "or 'uniform' (fixed size, replace-one)"
        )
    return SAMPLING_OF_SAMPLER[sampler]


@dataclass(frozen=True)
class Accounting:
    """How a run's DP-FedAvg releases are accounted: z, the sampling model and its rate, the method, delta."""

    noise_multiplier: float
    """z of the combined mechanism (noise std over the sensitivity of the sum under add-or-remove)."""
    num_clients: int
    sampling: Sampling
    rate: float
    """q: Poisson's probability, or m / N for fixed-size sampling."""
    sampled: int
    """m, the clients a fixed-size round samples (for Poisson the expected count rounded, unused)."""
    method: Method
    delta: float

    @property
    def relation(self) -> str:
        """The neighbouring relation the epsilon is for: 'add-or-remove' (Poisson) or 'replace-one' (fixed-size)."""
        return RELATIONS[self.sampling]

    def epsilon(self, releases: int) -> float:
        """Epsilon at ``delta`` after ``releases`` noised rounds (0 after none); inf where the method gives no bound."""
        if releases == 0:
            return 0.0
        if self.method == "pld":
            return pld_epsilon(self.noise_multiplier, self.rate, 1 if self.sampling == "poisson" else 2, releases, self.delta)
        return rdp_epsilon(self.noise_multiplier, self.num_clients, self.sampled, self.rate, self.sampling, releases, self.delta)

    def describe(self) -> dict[str, Any]:
        """What each epsilon is (``dp_accounting`` in the summary and ``--json``)."""
        return {
            "method": self.method,
            "relation": self.relation,
            "sampling": self.sampling,
            "sampling_rate": self.rate,
            "noise_multiplier": self.noise_multiplier,
            "delta": self.delta,
        }

    def label(self) -> str:
        """One phrase: 'pld, add-or-remove, poisson q = 0.1' (method, neighbouring relation, sampling)."""
        return f"{self.method}, {self.relation}, {self.sampling} q = {self.rate:g}"


class _Composed:
    """One PLD composed with itself ``rounds`` times, kept so the next round composes once more (each round's epsilon stays cheap)."""

    def __init__(self, base) -> None:
        self.base, self.rounds, self.pld = base, 1, base

    def at(self, rounds: int):
        if rounds == self.rounds + 1:
            self.pld, self.rounds = self.pld.compose(self.base), rounds
        elif rounds != self.rounds:
            self.pld, self.rounds = self.base.self_compose(rounds), rounds
        return self.pld


@functools.lru_cache(maxsize=16)
def _pld_of(noise_multiplier: float, rate: float, sensitivity: int) -> _Composed:
    from dp_accounting.pld import privacy_loss_distribution

    base = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier, sensitivity=sensitivity, sampling_prob=rate, value_discretization_interval=PLD_INTERVAL
    )
    return _Composed(base)


@functools.lru_cache(maxsize=4096)
def pld_epsilon(noise_multiplier: float, rate: float, sensitivity: int, rounds: int, delta: float) -> float:
    """Epsilon at ``delta`` of ``rounds`` rounds of the subsampled Gaussian (std z, the given sensitivity, sampling
    probability ``rate``) by dp-accounting's privacy-loss distribution; both directions (add and remove), the larger."""
    return float(_pld_of(noise_multiplier, rate, sensitivity).at(rounds).get_epsilon_for_delta(delta))


def dp_event(noise_multiplier: float, num_clients: int, sampled: int, rate: float, sampling: Sampling, rounds: int):
    """dp-accounting's event of ``rounds`` rounds: Poisson with probability ``rate``, or ``sampled`` of ``num_clients`` without replacement."""
    import dp_accounting

    if sampling == "poisson":
        one = dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(noise_multiplier))
    else:
        one = dp_accounting.SampledWithoutReplacementDpEvent(num_clients, sampled, dp_accounting.GaussianDpEvent(noise_multiplier / 2))
    return dp_accounting.SelfComposedDpEvent(one, rounds)


def rdp_accountant(sampling: Sampling):
    """An empty RDP accountant with the neighbouring relation of ``sampling``."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    relation = dp_accounting.NeighboringRelation
    return RdpAccountant(ORDERS, relation.ADD_OR_REMOVE_ONE if sampling == "poisson" else relation.REPLACE_ONE)


@functools.lru_cache(maxsize=4096)
def rdp_epsilon(noise_multiplier: float, num_clients: int, sampled: int, rate: float, sampling: Sampling, rounds: int, delta: float) -> float:
    """Epsilon at ``delta`` after ``rounds`` rounds by dp-accounting's RDP accountant."""
    accountant = rdp_accountant(sampling)
    accountant.compose(dp_event(noise_multiplier, num_clients, sampled, rate, sampling, rounds))
    return float(accountant.get_epsilon(delta))


def check_accountable(accounting: Accounting, rounds: int) -> float:
    """Epsilon after all ``rounds``; a ConfigError naming the field where the accountant cannot account the run."""
    z = accounting.noise_multiplier
    if accounting.method == "pld" and z < MIN_NOISE_MULTIPLIER:
        raise ConfigError(
            f"privacy.noise_multiplier: {z:g} is below {MIN_NOISE_MULTIPLIER:g}, where the PLD accountant's grid takes gigabytes and minutes "
            "(and one round alone spends an epsilon in the hundreds); raise it, or set privacy.accountant = 'rdp'"
        )
    if accounting.method == "rdp":
        event = dp_event(z, accounting.num_clients, accounting.sampled, accounting.rate, accounting.sampling, 1)
        if not rdp_accountant(accounting.sampling).supports(event):
            raise ConfigError(f"privacy.accountant: dp-accounting's RDP accountant cannot account {accounting.label()}")
    try:
        value = accounting.epsilon(rounds)
    except (ArithmeticError, ValueError) as error:  # a z so small that the accountant's arithmetic under- or overflows
        raise ConfigError(
            f"privacy.noise_multiplier: the {accounting.method.upper()} accountant cannot account z = {z:g} ({type(error).__name__}: {error}); raise it"
        ) from error
    if not math.isfinite(value):
        raise ConfigError(
            f"privacy.noise_multiplier: with {z:g}, {accounting.label()} and {rounds} rounds the {accounting.method.upper()} accountant "
            f"gives no finite epsilon at delta {accounting.delta:g}; raise privacy.noise_multiplier or lower federation.rounds"
        )
    return value


def rounds_within(accounting: Accounting, max_epsilon: float, rounds: int) -> int:
    """How many of ``rounds`` releases keep epsilon at or below ``max_epsilon`` (epsilon grows with the rounds: bisection)."""
    low, high = 0, rounds
    while low < high:
        middle = (low + high + 1) // 2
        if accounting.epsilon(middle) <= max_epsilon:
            low = middle
        else:
            high = middle - 1
    return low
