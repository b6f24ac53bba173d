"""Client sampling: which clients a round trains (``federation.sampler``), reproducible from the run seed.

A sampler is any object with one method, ``select(draw) -> client ids`` (:class:`ClientSampler`);
:class:`Draw` gives it the round (seed, stage, round), how many clients to choose, the
clients' sizes, the round's own random stream (:meth:`Draw.rng`: one per stage and round,
shared by every algorithm, so comparisons are paired) and, for samplers that rank clients,
:attr:`Draw.losses`, the global model's loss on the clients it names (the round loop asks the
client pool, in this process or on Flower's nodes, and records what was asked). The shipped
samplers:

- ``uniform`` (default without DP): ``count`` clients uniformly without replacement (:func:`sample_clients`);
- ``poisson`` (default with ``privacy.dp`` on): each client joins the round independently with probability
  q = ``federation.fraction`` (:class:`Poisson`; DP-FedAvg's sampling, McMahan et al., "Learning Differentially
  Private Recurrent Language Models", ICLR 2018, Algorithm 1), so a round trains a variable number of clients, 0 included;
- ``size-weighted``: ``count`` clients without replacement, each draw with probability
  proportional to the clients' training examples (numpy's sequential weighted draw);
- ``power-of-choice``: Cho, Wang and Joshi, "Client Selection in Federated Learning:
  Convergence Analysis and Power-of-Choice Selection Strategies" (AISTATS 2022), Sec. 4,
  the strategy pi_pow-d (:class:`PowerOfChoice`).

Register a sampler of your own with :func:`register_sampler` (``fedprior.register_sampler``) in a
module named by ``--import`` or ``run.imports``; ``federation.sampler = NAME`` then uses it. It must
draw its randomness from ``draw.rng()`` (or another stream of the run seed), so the same config and
seed choose the same clients in every runtime and after a resume.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fedprior.errors import ConfigError, FedpriorError, UserCodeError
from fedprior.seeding import numpy_rng


def clients_per_round(num_clients: int, fraction: float) -> int:
    """max(1, round(fraction * num_clients)), the number of clients sampled each round."""
    return max(1, min(num_clients, int(round(fraction * num_clients))))


def sample_clients(seed: int, stage: str, round_: int, num_clients: int, fraction: float) -> list[int]:
    """The sorted ids of the clients sampled, without replacement, in ``round_`` of ``stage``."""
    return Uniform().select(Draw(seed, stage, round_, num_clients, clients_per_round(num_clients, fraction)))


@dataclass(frozen=True)
class Draw:
    """What a sampler is given to choose one round's clients."""

    seed: int
    stage: str
    round: int
    num_clients: int
    count: int
    """How many clients to choose (``clients_per_round`` of the stage's fraction); for a sampler whose count varies
    (:func:`variable_count`), the expected count rounded, as it is for every other use of m (workers, the dry-run)."""
    sizes: tuple[int, ...] = ()
    """Each client's training examples, by client id (empty where the caller did not give them)."""
    losses: Callable[[list[int]], dict[int, float]] | None = None
    """The current global model's loss on each named client's data (those that could not answer are left out)."""
    fraction: float = 0.0
    """The stage's ``federation.fraction``: q, the probability each client joins, for a sampler whose count varies."""

    def rng(self) -> np.random.Generator:
        """The round's sampling stream (one per stage and round of the run seed)."""
        return numpy_rng(self.seed, "sampling", self.stage, self.round)

    def size_weights(self, sampler: str) -> np.ndarray:
        """The clients' shares of the training examples, p_k = n_k / sum n; a ConfigError where they are not known."""
        if len(self.sizes) != self.num_clients or sum(self.sizes) <= 0:
            raise ConfigError(f"federation.sampler = '{sampler}': needs the clients' sizes, which this runtime did not give")
        sizes = np.asarray(self.sizes, dtype=np.float64)
        return sizes / sizes.sum()


class ClientSampler(Protocol):
    """Chooses a round's clients: distinct ids in ``range(draw.num_clients)``, ``draw.count`` of them (any number, 0 included,
    for a sampler with a true attribute ``variable_count``: :func:`variable_count`)."""

    def select(self, draw: Draw) -> Sequence[int]: ...


def variable_count(sampler: object) -> bool:
    """Whether ``sampler`` chooses a varying number of clients a round (its ``variable_count`` attribute; False where it has none)."""
    return bool(getattr(sampler, "variable_count", False))


class Uniform:
    """``draw.count`` clients uniformly without replacement: the numbers of every run before samplers existed."""

    def select(self, draw: Draw) -> list[int]:
        if draw.count == draw.num_clients:
            return list(range(draw.num_clients))
        return sorted(int(c) for c in draw.rng().choice(draw.num_clients, size=draw.count, replace=False))


class Poisson:
    """Poisson sampling: each client joins the round independently with probability q = ``draw.fraction``, one uniform
    draw per client from the round's stream (DP-FedAvg, McMahan et al. 2018, Algorithm 1: "C_t <- (sample users with
    probability q)"). The count varies round to round, with mean qN; a round may sample no client."""

    variable_count = True

    def select(self, draw: Draw) -> list[int]:
        joins = draw.rng().random(draw.num_clients) < draw.fraction
        return [int(c) for c in np.flatnonzero(joins)]


def weighted_without_replacement(draw: Draw, size: int, sampler: str, rng: np.random.Generator | None = None) -> list[int]:
    """``size`` distinct clients from the round's stream (``rng``, default ``draw.rng()``), each draw proportional to the data sizes of those left."""
    p = draw.size_weights(sampler)
    holding = int(np.count_nonzero(p))
    if holding < size:
        raise FedpriorError(
            f"federation.sampler = '{sampler}': only {holding} of the {draw.num_clients} clients hold training examples, "
            f"fewer than the {size} a round draws; lower it or use 'uniform'"
        )
    return [int(c) for c in (rng or draw.rng()).choice(draw.num_clients, size=size, replace=False, p=p)]


class SizeWeighted:
    """``draw.count`` clients without replacement, with probability proportional to their training examples."""

    def select(self, draw: Draw) -> list[int]:
        return sorted(weighted_without_replacement(draw, draw.count, "size-weighted"))


@dataclass(frozen=True)
class PowerOfChoice:
    """Power-of-Choice (pi_pow-d): Cho, Wang and Joshi, "Client Selection in Federated Learning: Convergence Analysis
    and Power-of-Choice Selection Strategies" (AISTATS 2022), Sec. 4.

    1. a candidate set A of ``candidates`` = d clients is drawn without replacement, client k with probability
       p_k, its share of the training examples;
    2. the server sends the current global model w^(t) to the candidates, and each computes its local loss
       F_k(w^(t)) (:attr:`Draw.losses`; the runtime's ``global_loss``);
    3. the m = ``draw.count`` candidates with the highest loss train the round, ties broken at random (a
       permutation from the round's stream).

    d = m is size-weighted sampling; d = N (every client a candidate) always takes the m highest losses. A candidate
    that could not answer ranks below every one that did.
    """

    candidates: int

    def select(self, draw: Draw) -> list[int]:
        d, m = self.candidates, draw.count
        check_candidates(d, draw.num_clients, m)
        if draw.losses is None:
            raise FedpriorError("federation.sampler = 'power-of-choice': this runtime cannot ask clients for their loss")
        rng = draw.rng()
        candidates = sorted(weighted_without_replacement(draw, d, "power-of-choice", rng))
        losses = draw.losses(candidates)
        tie_order = rng.permutation(d)  # ties broken at random: the round's stream, after the candidates' draw
        ranked = sorted(range(d), key=lambda i: (candidates[i] not in losses, -losses.get(candidates[i], 0.0), tie_order[i]))
        return sorted(candidates[i] for i in ranked[:m])


SAMPLERS: dict[str, ClientSampler] = {"uniform": Uniform(), "poisson": Poisson(), "size-weighted": SizeWeighted()}
"""Samplers by name (``federation.sampler``); ``power-of-choice`` is built from its config field (:func:`sampler_for`)."""

BUILT = ("uniform", "poisson", "size-weighted", "power-of-choice")


def register_sampler(name: str, sampler: ClientSampler, *, replace: bool = False) -> ClientSampler:
    """Make ``sampler`` (an object with ``select(draw) -> client ids``) the sampler ``federation.sampler = name``."""
    if not isinstance(name, str) or not name or name in BUILT:
        raise ConfigError(f"sampler name {name!r}: give a new name (the shipped ones are {', '.join(BUILT)})")
    if name in SAMPLERS and not replace:
        raise ConfigError(f"sampler '{name}' is already registered; pass replace=True to replace it")
    if isinstance(sampler, type):  # its select would be called unbound, without the draw, in round 1
        raise ConfigError(f"sampler '{name}': {sampler.__name__} is a class; register an instance of it: register_sampler({name!r}, {sampler.__name__}())")
    if not callable(getattr(sampler, "select", None)):
        raise ConfigError(f"sampler '{name}': needs a method select(draw) -> client ids (fedprior.runtime.sampling.ClientSampler)")
    SAMPLERS[name] = sampler
    return sampler


def sampler_for(name: str, candidates: int | None = None) -> ClientSampler:
    """The sampler ``federation.sampler = name`` names, with ``federation.power_of_choice_candidates``; one ConfigError line otherwise."""
    if name == "power-of-choice":
        if candidates is None:
            raise ConfigError(
                "federation.power_of_choice_candidates: set d, the candidates whose loss is asked each round (m <= d <= N), with sampler 'power-of-choice'"
            )
        return PowerOfChoice(candidates)
    if candidates is not None:
        raise ConfigError(f"federation.power_of_choice_candidates: applies with federation.sampler = 'power-of-choice', not {name!r}; leave it unset")
    if name not in SAMPLERS:
        known = sorted({*SAMPLERS, "power-of-choice"})
        raise ConfigError(f"federation.sampler: unknown sampler {name!r}; accepted: {', '.join(known)} (or register one: fedprior.register_sampler)")
    return SAMPLERS[name]


def check_candidates(candidates: int | None, num_clients: int, count: int) -> None:
    """``federation.power_of_choice_candidates`` against the federation: m <= d <= N, before anything runs."""
    if candidates is not None and not count <= candidates <= num_clients:
        raise ConfigError(
            f"federation.power_of_choice_candidates: d = {candidates} must lie between the clients a round trains "
            f"(m = {count}, federation.fraction x num_clients) and all the clients (N = {num_clients})"
        )


def client_id(value: object) -> int | None:
    """``value`` as a client id where it is an integer (Python's, NumPy's, a torch integer scalar: ``operator.index``), else None (a float, a bool, None)."""
    import operator

    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]  # what it cannot take is the TypeError below
    except TypeError:
        return None


def chosen_clients(sampler: ClientSampler, draw: Draw, name: str = "") -> list[int]:
    """``sampler.select(draw)`` as sorted ids, checked: ``draw.count`` distinct ids of the federation's clients (any number for a
    sampler whose count varies, :func:`variable_count`); a sampler of the user's own that raises is a UserCodeError naming it."""
    name = name or type(sampler).__name__
    try:
        selected = sampler.select(draw)
        picked = list(selected) if selected is not None else [None]
    except FedpriorError:
        raise
    except Exception as error:
        module = type(sampler).__module__
        raise UserCodeError(f"sampler {name} (module {module}): its select raised {type(error).__name__}: {error}") from error
    odd = [c for c in picked if client_id(c) is None]  # 2.9 is no client id: never truncated to 2
    if odd:
        raise FedpriorError(f"sampler {name}: chose {selected!r:.80} in {draw.stage} round {draw.round}; client ids are integers, not {type(odd[0]).__name__}")
    chosen = [int(c) for c in picked]
    varies = variable_count(sampler)
    if len(set(chosen)) != len(chosen) or (not varies and len(chosen) != draw.count) or any(not 0 <= c < draw.num_clients for c in chosen):
        how_many = "" if varies else f"{draw.count} "
        raise FedpriorError(
            f"sampler {name}: chose {chosen[:8]}{' ...' if len(chosen) > 8 else ''} in {draw.stage} round {draw.round}; "
            f"it must choose {how_many}distinct client ids in 0..{draw.num_clients - 1}"
        )
    return sorted(chosen)
