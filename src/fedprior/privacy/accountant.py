"""Privacy accounting of DP-FedAvg with dp-accounting's RDP accountant (Google's ``dp_accounting`` package).

One round of DP-FedAvg (McMahan et al., "Learning Differentially Private Recurrent Language Models", ICLR 2018,
Algorithm 1) is a subsampled Gaussian mechanism on the clients: m of the N clients are sampled, each one's update
is clipped to C, and noise of std z C is added to their sum. T rounds compose it T times; the RDP accountant
(Mironov, "Renyi Differential Privacy", 2017; Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled
Gaussian Mechanism", 2019) turns that into epsilon at a given delta. Two accountings, ``privacy.accountant``:

- ``'poisson'`` (the default; DP-FedAvg's, Opacus's and TensorFlow Federated's): each client joins a round
  independently with probability q = m / N, under add-or-remove-one-client neighbouring. fedprior samples
  exactly m clients without replacement (``runtime/sampling.py``), so this is the usual approximation, not
  fedprior's sampling;
- ``'without-replacement'``: fedprior's sampling itself, m of N uniformly without replacement, for which
  dp-accounting's accountant takes replace-one-client neighbouring (Wang, Balle, Kasiviswanathan, "Subsampled
  Renyi Differential Privacy and Analytical Moments Accountant", AISTATS 2019, Theorem 27). Replacing one
  client moves the sum of clipped updates by up to 2C, so the Gaussian's noise multiplier is z / 2 there.

With adaptive clipping the clip-norm estimate is a second release; Andrew et al. (2021, Theorem 1) make both
together one Gaussian mechanism of multiplier z (``ClientLevelDp.update_noise_multiplier``), accounted as z.
Training metrics that clients send in the clear (their training loss, the bits of client-side adaptive
clipping before the server noises their count) are outside the accounting, as in Flower.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

Accounting = Literal["poisson", "without-replacement"]

ORDERS = (*range(2, 64), 128, 256, 512, 1024)
"""The RDP orders: integers (dp-accounting's default fractional orders below 2 do not converge for q = 0.1 and warn)."""


def dp_event(noise_multiplier: float, num_clients: int, sampled: int, rounds: int, accounting: Accounting):
    """dp-accounting's event of ``rounds`` rounds of DP-FedAvg, m = ``sampled`` of N = ``num_clients`` clients per round."""
    import dp_accounting

    if accounting == "poisson":
        one = dp_accounting.PoissonSampledDpEvent(sampled / num_clients, dp_accounting.GaussianDpEvent(noise_multiplier))
    else:
        one = dp_accounting.SampledWithoutReplacementDpEvent(num_clients, sampled, dp_accounting.GaussianDpEvent(noise_multiplier / 2))
    return dp_accounting.SelfComposedDpEvent(one, rounds)


def rdp_accountant(accounting: Accounting):
    """An empty RDP accountant with the neighbouring relation ``accounting`` assumes."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    relation = dp_accounting.NeighboringRelation
    return RdpAccountant(ORDERS, relation.ADD_OR_REMOVE_ONE if accounting == "poisson" else relation.REPLACE_ONE)


@functools.lru_cache(maxsize=4096)
def epsilon(noise_multiplier: float, num_clients: int, sampled: int, rounds: int, delta: float, accounting: Accounting = "poisson") -> float:
    """Epsilon at ``delta`` after ``rounds`` rounds (0 after none); inf where RDP gives no bound."""
    if rounds == 0:
        return 0.0
    accountant = rdp_accountant(accounting)
    accountant.compose(dp_event(noise_multiplier, num_clients, sampled, rounds, accounting))
    return float(accountant.get_epsilon(delta))


def check_accountable(noise_multiplier: float, num_clients: int, sampled: int, rounds: int, delta: float, accounting: Accounting) -> float:
    """Epsilon after all ``rounds``; a ConfigError naming the field where the accountant cannot account the run."""
    from fedprior.errors import ConfigError

    accountant = rdp_accountant(accounting)
    event = dp_event(noise_multiplier, num_clients, sampled, max(rounds, 1), accounting)
    if not accountant.supports(event):
        raise ConfigError(f"privacy.accountant: dp-accounting's RDP accountant cannot account '{accounting}' sampling of {sampled} of {num_clients} clients")
    value = epsilon(noise_multiplier, num_clients, sampled, rounds, delta, accounting)
    if not math.isfinite(value):
        raise ConfigError(
            f"privacy.noise_multiplier: with {noise_multiplier:g}, {sampled} of {num_clients} clients per round and {rounds} rounds the RDP accountant "
            f"gives no finite epsilon at delta {delta:g}; raise privacy.noise_multiplier or lower federation.rounds"
        )
    return value
