"""Server optimizers on the pseudo-gradient: FedAvgM, FedAdagrad, FedAdam, FedYogi, over any algorithm's aggregation.

Reddi et al., "Adaptive Federated Optimization", ICLR 2021, Algorithm 2: the server takes the round's
aggregate x_avg as a step, Delta_t = x_avg - x_t (the mean of the client deltas x_i - x_t), and moves
with an optimizer of its own:

- m_t = beta1 m_{t-1} + (1 - beta1) Delta_t;
- FedAdagrad: v_t = v_{t-1} + Delta_t^2;
- FedYogi:    v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2);
- FedAdam:    v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2;
- x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)                  (:func:`adaptive_step`).

FedAvgM (Hsu et al., "Measuring the Effects of Non-Identical Data Distribution for Federated Visual
Classification", 2019): v_t = beta v_{t-1} + Delta_t; x_{t+1} = x_t + eta v_t (:func:`momentum_step`;
Flower's FedAvgM, whose pseudo-gradient x_t - x_avg has the other sign).

:func:`with_server_optimizer` puts one of them behind any :class:`~fedprior.algorithms.base.Algorithm` whose
``aggregate`` returns the next global model: the clients and the aggregation are the algorithm's own (FedAvg's
example-weighted mean, FedProx's, SCAFFOLD's), and only the step from x_t to x_{t+1} changes. m and v live in the
server State (``server_optimizer.m.<name>``, ``server_optimizer.v.<name>``), so checkpoints, resume and Flower carry
them; they are never broadcast.

Choices, as Flower's strategies (``flwr.serverapp.strategy``) make them: m and v start at zero (Algorithm 2 asks
v_{-1} >= tau^2); Delta_t is the algorithm's own aggregate minus x_t (FedAvg's is example-weighted, Algorithm 2's an
unweighted mean). Unlike Flower's FedAdam, no bias correction (Algorithm 2 has none). The optimizer steps the
model's parameters only; buffers (BatchNorm's running statistics, integer counters) take the aggregate's value as
it is, a plain average (Flower steps every array, buffers included).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, Reply, RoundInfo, State
from fedprior.algorithms.pieces.hyperparameters import parameters
from fedprior.errors import ConfigError

PREFIX = "server_optimizer."

Rule = Literal["none", "avgm", "adagrad", "adam", "yogi"]
ServerOptimizerName = Annotated[
    Rule,
    Field(
        description="the server's step on Delta = aggregate - x (Reddi et al. 2021, Algorithm 2): 'none' (the algorithm's own aggregate), "
        "'avgm' (FedAvgM: server_lr, server_momentum), 'adagrad' (server_lr, beta1, tau), 'adam' or 'yogi' (server_lr, beta1, beta2, tau)"
    ),
]
RULE_DEFAULTS: dict[str, dict[str, float]] = {
    "none": {},
    "avgm": {"server_lr": 1.0, "server_momentum": 0.9},
    "adagrad": {"server_lr": 0.01, "beta1": 0.0, "tau": 1e-3},
    "adam": {"server_lr": 0.01, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3},
    "yogi": {"server_lr": 0.01, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3},
}
"""Each rule's hyperparameters (config fields ``algorithm.<field>``) with their defaults, declared once: the algorithms fedavgm,
fedadagrad, fedadam and fedyogi take them, and so does ``algorithm.server_optimizer`` of fedprox and scaffold for each field
left unset, and :class:`ServerOptimizer` for each left None.

- FedAvgM: server lr 1 and momentum 0.9 (Hsu et al., 2019; Flower's default momentum 0 would be FedAvg itself).
- Server lr 0.01 for the three adaptive rules: m and v start at zero, so their first step moves every weight by about
  server_lr at once; Flower's 0.1 (FedAdam, FedAdagrad) diverges on the small CNN here (docs/server-optimizers.md),
  0.01 is Flower's FedYogi default.
- beta1 = 0 for FedAdagrad: Algorithm 2 of Reddi et al. ("Adaptive Federated Optimization", ICLR 2021) gives all three
  adaptive rules the first moment m_t = beta1 m_{t-1} + (1 - beta1) Delta_t; at beta1 = 0 FedAdagrad steps by Delta_t
  itself, Adagrad's own step and Flower's FedAdagrad. FedAdam and FedYogi: beta1 0.9, beta2 0.99. tau 1e-3 (Flower's).
"""


def described_defaults(field: str) -> str:
    """The defaults of ``field`` rule by rule, for a field's description: 'avgm 1, adagrad 0.01, ...'."""
    return ", ".join(f"{rule} {values[field]:g}" for rule, values in RULE_DEFAULTS.items() if field in values)


ServerLr = Annotated[float, Field(gt=0, description="server learning rate eta: x + eta v (FedAvgM), x + eta m / (sqrt(v) + tau) (Algorithm 2)")]
ServerMomentum = Annotated[float, Field(ge=0, lt=1, description="FedAvgM's server momentum beta: v = beta v + Delta, x = x + server_lr v")]
Beta1 = Annotated[float, Field(ge=0, lt=1, description="decay beta1 of the first moment m = beta1 m + (1 - beta1) Delta (Algorithm 2)")]
Beta2 = Annotated[float, Field(ge=0, lt=1, description="decay beta2 of the second moment v of FedAdam and FedYogi (Algorithm 2)")]
TAU_MIN = 1e-38
"""The smallest tau: the step computes in float32, where a tau under about 1e-45 is 0 (0 / 0 where v = 0); 1e-38 is
float32's smallest normal number, rounded."""
Tau = Annotated[float, Field(ge=TAU_MIN, description="adaptivity tau in x + eta m / (sqrt(v) + tau) (Algorithm 2); at least 1e-38 (float32)")]
UNSET = "unset: the rule's own"
OptionalServerLr = Annotated[
    float | None,
    Field(
        gt=0,
        description=f"server learning rate eta: x + eta v (FedAvgM), x + eta m / (sqrt(v) + tau) (Algorithm 2); {UNSET}, {described_defaults('server_lr')}",
    ),
]
OptionalServerMomentum = Annotated[
    float | None,
    Field(ge=0, lt=1, description=f"FedAvgM's server momentum beta: v = beta v + Delta, x = x + server_lr v; {UNSET}, {described_defaults('server_momentum')}"),
]
OptionalBeta1 = Annotated[
    float | None,
    Field(ge=0, lt=1, description=f"decay beta1 of the first moment m = beta1 m + (1 - beta1) Delta (Algorithm 2); {UNSET}, {described_defaults('beta1')}"),
]
OptionalBeta2 = Annotated[
    float | None,
    Field(ge=0, lt=1, description=f"decay beta2 of the second moment v of FedAdam and FedYogi (Algorithm 2); {UNSET}, {described_defaults('beta2')}"),
]
OptionalTau = Annotated[
    float | None,
    Field(
        ge=TAU_MIN, description=f"adaptivity tau in x + eta m / (sqrt(v) + tau) (Algorithm 2); at least 1e-38 (float32); {UNSET}, {described_defaults('tau')}"
    ),
]


def server_step(*, server_lr: ServerLr, server_momentum: ServerMomentum, beta1: Beta1, beta2: Beta2, tau: Tau) -> None:
    """The hyperparameters of a server step, typed; each algorithm of ``fedopt.py`` takes its rule's with :data:`RULE_DEFAULTS`'s defaults."""


def server_optimization(
    *,
    server_optimizer: ServerOptimizerName = "none",
    server_lr: OptionalServerLr = None,
    server_momentum: OptionalServerMomentum = None,
    beta1: OptionalBeta1 = None,
    beta2: OptionalBeta2 = None,
    tau: OptionalTau = None,
) -> None:
    """The option of an algorithm that takes a server optimizer (``algorithm.server_optimizer`` on fedprox, scaffold): the rule,
    and its hyperparameters, each unset by default, which means the rule's own (:data:`RULE_DEFAULTS`)."""


SERVER_OPTIMIZATION = parameters(server_optimization)
"""The parameters of the option, for ``with_shared``."""


def momentum_step(x: torch.Tensor, delta: torch.Tensor, v: torch.Tensor, *, lr: float, momentum: float) -> tuple[torch.Tensor, torch.Tensor]:
    """FedAvgM (Hsu et al. 2019): v_t = momentum v_{t-1} + Delta_t; x_{t+1} = x_t + lr v_t. Returns (x_{t+1}, v_t)."""
    v = momentum * v + delta
    return x + lr * v, v


def second_moment(rule: str, v: torch.Tensor, delta: torch.Tensor, beta2: float) -> torch.Tensor:
    """v_t of FedAdagrad, FedYogi or FedAdam (Reddi et al., ICLR 2021, Algorithm 2)."""
    squared = delta * delta
    if rule == "adagrad":
        return v + squared
    if rule == "yogi":
        return v - (1 - beta2) * squared * torch.sign(v - squared)
    if rule == "adam":
        return beta2 * v + (1 - beta2) * squared
    raise ValueError(f"no second moment for server optimizer {rule!r}")


def adaptive_step(
    rule: str, x: torch.Tensor, delta: torch.Tensor, m: torch.Tensor, v: torch.Tensor, *, lr: float, beta1: float, beta2: float, tau: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of Algorithm 2 (Reddi et al., ICLR 2021): m_t, v_t, then x_{t+1} = x_t + lr m_t / (sqrt(v_t) + tau). Returns (x, m, v)."""
    m = beta1 * m + (1 - beta1) * delta
    v = second_moment(rule, v, delta, beta2)
    return x + lr * m / (v.sqrt() + tau), m, v


USED = {
    "none": (),
    "avgm": ("lr", "momentum"),
    "adagrad": ("lr", "beta1", "tau"),
    "adam": ("lr", "beta1", "beta2", "tau"),
    "yogi": ("lr", "beta1", "beta2", "tau"),
}
"""The hyperparameters each rule reads (FedAdagrad has no beta2)."""

FIELDS = {"lr": "server_lr", "momentum": "server_momentum", "beta1": "beta1", "beta2": "beta2", "tau": "tau"}
"""Each hyperparameter's config field (``algorithm.<field>``)."""


@dataclass(frozen=True)
class ServerOptimizer:
    """A server optimizer: its rule and the hyperparameters the rule reads (:data:`USED`); one left None takes the rule's
    default (:data:`RULE_DEFAULTS`); those the rule does not read stay None."""

    rule: Rule = "none"
    lr: float | None = None
    momentum: float | None = None
    beta1: float | None = None
    beta2: float | None = None
    tau: float | None = None

    def __post_init__(self) -> None:
        if self.rule not in USED:
            raise ValueError(f"server optimizer {self.rule!r}: accepted: {', '.join(map(repr, USED))}")
        for attr in USED[self.rule]:
            if getattr(self, attr) is None:
                object.__setattr__(self, attr, RULE_DEFAULTS[self.rule][FIELDS[attr]])

    def value(self, attr: str) -> float:
        """A hyperparameter the rule reads (set in ``__post_init__``)."""
        value = getattr(self, attr)
        assert value is not None, f"{attr} is not read by {self.rule!r}"
        return value

    @property
    def slots(self) -> tuple[str, ...]:
        """The names of its per-parameter state: FedAvgM's momentum v, or the moments m and v."""
        return {"none": (), "avgm": ("v",)}.get(self.rule, ("m", "v"))

    def step(self, x: torch.Tensor, delta: torch.Tensor, slots: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """x_{t+1} and the new slots from x_t, Delta_t and the slots of round t - 1."""
        if self.rule == "none":
            return x + delta, {}
        if self.rule == "avgm":
            x, v = momentum_step(x, delta, slots["v"], lr=self.value("lr"), momentum=self.value("momentum"))
            return x, {"v": v}
        lr, beta1, tau = self.value("lr"), self.value("beta1"), self.value("tau")
        beta2 = 0.0 if self.rule == "adagrad" else self.value("beta2")  # FedAdagrad's v reads no beta2
        x, m, v = adaptive_step(self.rule, x, delta, slots["m"], slots["v"], lr=lr, beta1=beta1, beta2=beta2, tau=tau)
        return x, {"m": m, "v": v}


WRITTEN_BEFORE = {"server_momentum": 0.0, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3}
"""The option's fixed defaults before each rule had its own: a run's config.toml holds every field,
so one written then names them all; where the rule does not read a field, that value is taken as unset, not refused."""


def checked_server_optimizer(
    *, server_optimizer: Rule, server_lr: float | None, server_momentum: float | None, beta1: float | None, beta2: float | None, tau: float | None
) -> ServerOptimizer:
    """The ServerOptimizer of the option's config fields (:data:`SERVER_OPTIMIZATION`), each unset field taking the rule's default
    (:data:`RULE_DEFAULTS`); ConfigError for a field set that the rule does not read (but at its value in :data:`WRITTEN_BEFORE`)."""
    given = {"lr": server_lr, "momentum": server_momentum, "beta1": beta1, "beta2": beta2, "tau": tau}
    unused = [attr for attr, value in given.items() if value is not None and attr not in USED[server_optimizer] and value != WRITTEN_BEFORE.get(FIELDS[attr])]
    if unused:
        readers = [rule for rule, used in USED.items() if unused[0] in used]
        raise ConfigError(
            f"algorithm.{FIELDS[unused[0]]}: applies with algorithm.server_optimizer = {' or '.join(repr(r) for r in readers)}, "
            f"not with {server_optimizer!r}; leave it unset or choose a server optimizer that reads it"
        )
    return ServerOptimizer(server_optimizer, **{attr: value for attr, value in given.items() if attr in USED[server_optimizer]})


def slot_key(slot: str, name: str) -> str:
    """The State key of a parameter's slot: ``server_optimizer.m.model.conv.weight``."""
    return f"{PREFIX}{slot}.{name}"


def without_slots(state: State) -> State:
    """The algorithm's own State: the server optimizer's tensors left out."""
    return {k: v for k, v in state.items() if not k.startswith(PREFIX)}


def with_server_optimizer(algorithm: Algorithm, optimizer: ServerOptimizer, parameters: Collection[str]) -> Algorithm:
    """``algorithm`` whose aggregate steps ``parameters`` (State keys) by ``optimizer`` on Delta_t = aggregate - x_t.

    The clients, the broadcast and the evaluation are ``algorithm``'s; its ``aggregate`` still computes the
    new model and the rest of the server state (SCAFFOLD's control variates), from its own State (without the
    optimizer's slots). Of that result, each of ``parameters`` becomes x_t + the optimizer's step on
    Delta_t = result - x_t (Reddi et al., ICLR 2021, Algorithm 2); every other tensor is kept as the aggregate
    gives it. With ``optimizer.rule == 'none'`` it is ``algorithm`` itself.
    """
    if optimizer.rule == "none":
        return algorithm
    names = tuple(parameters)

    def init(info: RoundInfo) -> State:
        state = algorithm.init(info)
        return {**state, **{slot_key(s, n): torch.zeros_like(state[n]) for s in optimizer.slots for n in names}}

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        return algorithm.broadcast(without_slots(state), info)

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        out = dict(algorithm.aggregate(without_slots(state), replies, info))
        for name in names:
            new = out[name]
            x = state[name].to(new.device)  # where the aggregate is (the run's device, or the host)
            slots = {s: state[slot_key(s, name)].to(new.device) for s in optimizer.slots}
            out[name], slots = optimizer.step(x, new - x, slots)
            out.update({slot_key(s, name): value for s, value in slots.items()})
        return out

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        return algorithm.evaluate(without_slots(state), data)

    validate = algorithm.validate
    return algorithm.with_(
        init=init,
        broadcast=broadcast,
        aggregate=aggregate,
        evaluate=evaluate,
        validate=None if validate is None else (lambda state: validate(without_slots(state))),
        mean_aggregate=algorithm.mean_aggregate,  # a step from x_t to the algorithm's aggregate: a function of the mean if that is
    )
