"""A round under the system model: who takes part, how much work each does, whose reply counts, and how long it took.

The round loop (``simulation.run_rounds``) calls :func:`plan_round` after sampling and :func:`settle_round` after the
replies came, where the run has a system model (:class:`~fedprior.runtime.system_model.SystemModel`, ``[system]``);
without one neither runs and the round is as it always was.

- **Availability.** A sampled client that is not available in the round (``system.availability``) fails it ('unavailable'):
  it receives nothing and trains nothing. Bonawitz et al. ("Towards Federated Learning at Scale: System Design", MLSys 2019,
  Sec. 2.2) let only devices that check in (eligible: idle, charging, unmetered network) be selected; drawing the round's
  clients from the available ones would ask every one of the N clients about its availability each round, so here the
  selection is the run's usual draw and an unavailable client counts as one of the devices that drop out after selection,
  which over-selection is there to absorb.
- **Deadline** (``system.deadline``, D). Client k's duration d_k = download / b_k + work_k s_k + upload / b_k
  (``SystemModel.client_duration``; work = training examples x local epochs). Without partial work, a reply with d_k > D is
  discarded ('deadline'; the client trained, its reply came too late; its own state keeps what it did).
- **Partial work** (``system.partial_work``), decided before training, with the upload estimated as the broadcast's size
  (what a client that sends its model back uploads; the recorded d_k uses the real upload). Rule 'fedprox': a client whose
  full update would miss D runs the k mini-batch steps that fit, the largest k with download + examples(k) s_k + upload <= D
  (examples(k): the examples those steps visit); none fit: dropped ('deadline') without training; FedProx's variable local
  work (Li et al., MLSys 2020, Sec. 3: gamma-inexact solutions). Rule 'fl-bench': such a client runs E_k of the E epochs,
  E_k drawn once per client uniformly from [straggler_min_epochs, E) (FL-bench, KarhouTam/FL-bench, src/server/fedavg.py:
  ``random.choices(range(straggler_min_local_epoch, local_epoch))``), and its reply is waited for, late or not.
- **Over-selection** (``system.over_selection``, x): the loop samples ceil(m (1 + x)); of the replies that arrive by the
  deadline, the m first (by d_k, then client id) are kept and the rest discarded (``over_selected_dropped``, not counted as
  failed: the round had its m replies); Bonawitz et al. 2019
  (Sec. 2.2: the server ignores devices that do not report in time; its operational profile selects 130% of the target
  count, x = 0.3, to absorb drop-outs).
- **Time.** The round ends when the server stops waiting: when the m-th kept reply arrives under over-selection, else
  when the last kept reply arrives, but at D where a reply was dropped for the deadline (the server waited until then).
  A round with no reply takes D, or 0 without a deadline. ``simulated_time`` is the sum over the run's rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fedprior.algorithms.base import Algorithm, Reply
from fedprior.errors import ConfigError
from fedprior.runtime.system_model import SystemModel, local_work
from fedprior.seeding import numpy_rng


@dataclass(frozen=True)
class RoundPlan:
    """What :func:`plan_round` decided before the clients train."""

    train: list[int]
    """The clients that train (available, and with some work that fits where partial work is on)."""
    work: dict[int, float]
    """Each of them: the examples its update visits (training examples x local epochs, fewer with partial work)."""
    budgets: dict[int, int] = field(default_factory=dict)
    """Clients that do partial work: their mini-batch step budget (``ClientInfo.local_steps``)."""
    failures: dict[int, str] = field(default_factory=dict)
    """Clients that fail before training: 'unavailable', or no step fits before the deadline."""
    unavailable: list[int] = field(default_factory=list)
    too_slow: list[int] = field(default_factory=list)
    """Clients dropped before training: not one mini-batch step fits before the deadline ('fedprox' rule)."""
    waited_for: frozenset[int] = frozenset()
    """Stragglers whose reply is kept whenever it comes ('fl-bench' rule)."""


def steps_per_epoch(examples: int, batch_size: int) -> int:
    return math.ceil(int(examples) / int(batch_size))


def examples_of_steps(steps: int, examples: int, batch_size: int) -> int:
    """The examples the first ``steps`` mini-batch steps visit: full epochs of ``examples``, then full batches (an epoch's first
    steps are full batches; only its last may be smaller)."""
    per_epoch = steps_per_epoch(examples, batch_size)
    if per_epoch == 0:
        return 0
    return (steps // per_epoch) * examples + (steps % per_epoch) * batch_size


def steps_that_fit(seconds: float, seconds_per_example: float, examples: int, epochs: int, batch_size: int) -> int:
    """The most mini-batch steps (at most ``epochs`` epochs of them) whose examples take at most ``seconds``."""
    per_epoch = steps_per_epoch(examples, batch_size)
    if seconds <= 0 or per_epoch == 0:
        return 0
    budget = seconds / seconds_per_example  # examples that fit
    full_epochs = min(epochs, int(budget // examples))
    if full_epochs == epochs:
        return epochs * per_epoch
    rest = int((budget - full_epochs * examples) // batch_size)
    return full_epochs * per_epoch + min(per_epoch - 1, rest)


def plan_round(model: SystemModel, sampled: list[int], step: int, broadcast_bytes: int, sizes: tuple[int, ...], epochs: int, batch_size: int) -> RoundPlan:
    """Before the clients train: who is available, and each one's work (and step budget with partial work)."""
    c = model.config
    train: list[int] = []
    work: dict[int, float] = {}
    budgets: dict[int, int] = {}
    failures: dict[int, str] = {}
    unavailable: list[int] = []
    too_slow: list[int] = []
    waited: set[int] = set()
    for client in sampled:
        if not model.available(client, step):
            unavailable.append(client)
            failures[client] = f"unavailable in round {step} (system.availability = {c.availability!r})"
            continue
        examples = int(sizes[client]) if sizes else 0
        full = local_work(examples, epochs)
        if c.partial_work and c.deadline is not None:
            estimate = model.client_duration(client, step, full, broadcast_bytes, broadcast_bytes)
            if estimate > c.deadline:
                if c.straggler_rule == "fedprox":
                    left = c.deadline - model.communication_seconds(client, broadcast_bytes, broadcast_bytes)
                    steps = steps_that_fit(left, model.seconds_per_example(client), examples, epochs, batch_size)
                    if steps == 0:
                        too_slow.append(client)
                        failures[client] = f"deadline: no local step fits in system.deadline = {c.deadline:g} s (its full update takes {estimate:.4g} s)"
                        continue
                else:  # fl-bench: E_k of [min, E) epochs, drawn once per client
                    epochs_k = int(numpy_rng(model.seed, "system", "straggler-epochs", client).integers(c.straggler_min_epochs, epochs))
                    steps = epochs_k * steps_per_epoch(examples, batch_size)
                    waited.add(client)
                budgets[client] = steps
                full = float(examples_of_steps(steps, examples, batch_size))
        train.append(client)
        work[client] = full
    return RoundPlan(train, work, budgets, failures, unavailable, too_slow, frozenset(waited))


def settle_round(
    model: SystemModel, plan: RoundPlan, replies: list[Reply], step: int, broadcast_bytes: int, upload_bytes: dict[int, int], target: int
) -> tuple[list[Reply], dict[int, str], dict[str, Any]]:
    """After the replies came: (the replies kept, the clients dropped for the deadline with why, the round record's system fields).
    Over-selection's late clients are not failures: the record lists them (``over_selected_dropped``).

    ``upload_bytes``: each reply's tensor bytes; ``target``: m, the clients a round keeps under over-selection.
    """
    c = model.config
    deadline = c.deadline
    seconds = {
        r.client_id: model.client_duration(r.client_id, step, plan.work.get(r.client_id, 0.0), broadcast_bytes, upload_bytes[r.client_id]) for r in replies
    }
    late = sorted(k for k, d in seconds.items() if deadline is not None and d > deadline and k not in plan.waited_for)
    arrived = sorted((r for r in replies if r.client_id not in late), key=lambda r: (seconds[r.client_id], r.client_id))
    dropped: dict[int, str] = {k: f"deadline: took {seconds[k]:.4g} s, past system.deadline = {deadline:g} s" for k in late}
    over: list[int] = []
    if c.over_selection > 0 and len(arrived) > target:  # not failures: the round had its m replies (over_selected_dropped)
        over = sorted(r.client_id for r in arrived[target:])
        arrived = arrived[:target]
    if over:
        round_seconds = seconds[arrived[-1].client_id]
    elif late or plan.too_slow:
        round_seconds = float(deadline)  # type: ignore[arg-type]  # late clients exist only with a deadline
        if arrived:
            round_seconds = max(round_seconds, max(seconds[r.client_id] for r in arrived))  # an fl-bench straggler waited for
    elif arrived:
        round_seconds = max(seconds[r.client_id] for r in arrived)
    else:
        round_seconds = float(deadline) if deadline is not None and plan.train else 0.0
    fields: dict[str, Any] = {
        "round_simulated_seconds": float(round_seconds),
        "client_simulated_seconds": {str(k): float(seconds[k]) for k in sorted(seconds)},
    }
    if plan.unavailable:
        fields["unavailable_clients"] = sorted(plan.unavailable)
    if late or plan.too_slow:
        fields["deadline_dropped"] = sorted([*late, *plan.too_slow])
    if plan.budgets:
        fields["partial_work_steps"] = {str(k): int(plan.budgets[k]) for k in sorted(plan.budgets)}
    if over:
        fields["over_selected_dropped"] = over
    return sorted(arrived, key=lambda r: r.client_id), dropped, fields


def over_selected_count(target: int, over_selection: float, num_clients: int) -> int:
    """ceil(m (1 + x)) clients, at most all of them."""
    return min(int(num_clients), math.ceil(target * (1 + over_selection) - 1e-9))


def simulated_time(history: list[dict[str, Any]]) -> float:
    """The simulated seconds the run's rounds so far took (the last record's ``simulated_time``; 0 before any)."""
    for record in reversed(history):
        if "simulated_time" in record:
            return float(record["simulated_time"])
    return 0.0


def check_partial_work(algorithm: Algorithm) -> None:
    """``system.partial_work`` needs client updates that take a step budget (``Algorithm.local_step_budget``); one ConfigError line otherwise."""
    if not algorithm.local_step_budget and any(not stage.server_only for stage in algorithm.stages):
        raise ConfigError(
            f"system.partial_work: algorithm '{algorithm.name}' cannot stop its local work early (Algorithm.local_step_budget); accepted: "
            "fedavg, fedprox and moon on image models (or partial_work = false: a client past the deadline is dropped)"
        )


SYSTEM_COUNTS = (
    ("deadline_dropped", "deadline_dropped_updates"),
    ("over_selected_dropped", "over_selected_updates"),
    ("unavailable_clients", "unavailable_updates"),
    ("partial_work_steps", "partial_work_updates"),
)
"""(a round record's list or mapping of clients, the run summary's count of them over the rounds)."""


def system_summary(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The run summary's system numbers where the run had a system model ({} otherwise): ``simulated_time`` (the run's total),
    ``simulated_times`` (at each evaluated round, as ``evaluated_rounds``) and the counts of :data:`SYSTEM_COUNTS`."""
    timed = [r for r in history if "simulated_time" in r]
    if not timed:
        return {}
    out: dict[str, Any] = {
        "simulated_time": float(timed[-1]["simulated_time"]),
        "simulated_times": [float(r["simulated_time"]) for r in history if "accuracy" in r],
    }
    out.update({total: sum(len(r.get(key, ())) for r in history) for key, total in SYSTEM_COUNTS})
    return out
