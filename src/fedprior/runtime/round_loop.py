"""The round loop's settings, as one typed value built once from the config and passed whole.

Every runtime drives the same loop (:func:`fedprior.runtime.simulation.run_rounds`): the
in-process simulator, Flower's simulation engine and a Flower ServerApp, and the
supervised baselines an FST-CBDG report trains beside its run. Each used to receive these
settings as a list of keyword arguments re-typed at the call site, and a field a call site
forgot (``run.non_finite`` on Flower, ``run.workers`` in the FST-CBDG report) silently took
its default. Passing one :class:`RoundLoop` instead, built from the config by
:meth:`fedprior.experiments.build.Experiment.round_loop`, leaves nothing to forget.

Model selection (``run.model_selection``) is not here: it is the algorithm's ``validate``
(``fedprior.experiments.client_side.with_validation``), so every runtime that builds the
experiment from its config has it; ``test_metrics`` says which evaluations also score the
test set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedprior.algorithms.base import State
from fedprior.runtime.client_store import DEFAULT_MEMORY_MB
from fedprior.runtime.divergence import NonFinite
from fedprior.runtime.sampling import ClientSampler, Uniform
from fedprior.runtime.system_model import SystemModel
from fedprior.runtime.threads import ThreadPolicy


@dataclass(frozen=True)
class RoundLoop:
    """How the round loop runs: what it samples and trains, how often it evaluates, how it meets faults.

    The defaults are those of a bare library call; a run takes every field from its config.
    """

    seed: int
    """``run.seed``: every random stream of the run (sampling, client training) is derived from it."""
    rounds: int
    """``federation.rounds``: rounds of each stage that does not fix its own."""
    fraction: float
    """``federation.fraction``: the share of clients sampled each round."""
    vectorize: bool = True
    """``run.vectorize``: train the sampled clients together where the algorithm can."""
    evaluate_every: int = 1
    """``federation.evaluate_every``: evaluate every k rounds and after each stage's last."""
    test_metrics: str = "every-evaluation"
    """``run.test_metrics``: 'selectable' scores the test set only where it can be reported (``simulation.reportable``)."""
    non_finite: NonFinite = "stop"
    """``run.non_finite``: what a client update holding NaN/inf does (``divergence.py``)."""
    wait_for_clients: float = 0.0
    """``federation.wait_for_clients``: seconds a round no client could be reached is retried."""
    retry_every: float = 5.0
    """Seconds between two attempts at such a round."""
    threads: ThreadPolicy | None = None
    """Torch threads for training and for evaluation (None: leave them as they are)."""
    workers: int = 1
    """``run.workers``: processes training a round's clients (in-process runtime only)."""
    concurrent_clients: int = 1
    """``run.concurrent_clients``: client updates run at once in each of those processes, in threads (``concurrent.py``)."""
    device: str = "cpu"
    """The run's resolved device (where the algorithm trains; workers rebuild it there)."""
    start_method: str | None = None
    """``run.start_method`` resolved: how worker processes start (``spawn`` where CUDA is used; None: the platform's default)."""
    checkpoint_every: int = 1
    """``run.checkpoint_every``: write the checkpoint every k rounds (counted over all stages), after the last round, and when the loop stops on an error or a signal."""
    sampler: ClientSampler = field(default_factory=Uniform)
    """``federation.sampler``: chooses each round's clients (``sampling.py``)."""
    client_state_memory: int = int(DEFAULT_MEMORY_MB * 2**20)
    """``run.client_state_memory_mb`` in bytes: the clients' states are held in memory up to this size in all, on disk beyond
    (``client_store.py``; the numbers do not depend on it)."""
    client_sizes: tuple[int, ...] = ()
    """Each client's training examples, by id, for the samplers that weigh clients by them (empty: not known)."""
    before_round: Callable[[State], dict[str, Any] | None] | None = None
    """Asked with the server state before each round that samples clients: None to run it, or what the round's record says
    where the run must end before it (a privacy budget, ``privacy.max_epsilon``: ``fedprior.privacy.budget``). The run then
    ends cleanly there (``simulation.run_rounds``); the algorithm stays pure."""
    malicious_clients: frozenset[int] = frozenset()
    """The clients the run's simulated attack makes malicious (``runtime/attacks.py``): recorded each round, never acted on here."""
    system: SystemModel | None = None
    """``[system]``: simulated device speeds, availability, a deadline, stragglers and over-selection (``system_round.py``);
    None (the section off): every client takes no time and the rounds run as without it."""
    local_epochs: int = 1
    """``federation.local_epochs``: a client's full local work (the system model's work and step budgets)."""
    batch_size: int = 32
    """``federation.batch_size``: the mini-batch of a step (the system model's step budgets)."""
