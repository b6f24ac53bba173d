"""FedAvgM, FedAdagrad, FedAdam and FedYogi: FedAvg's clients under a server optimizer (Reddi et al., ICLR 2021).

Reddi et al., "Adaptive Federated Optimization", ICLR 2021, Algorithm 2 (FedAdagrad, FedAdam, FedYogi) and
Hsu et al., 2019 (FedAvgM): the clients run FedAvg's local SGD (:func:`~fedprior.algorithms.fedavg.fedavg`),
the server treats Delta_t = (example-weighted mean of the client models) - x_t as a pseudo-gradient and steps
with :func:`~fedprior.algorithms.pieces.server_optimizers.momentum_step` or
:func:`~fedprior.algorithms.pieces.server_optimizers.adaptive_step`
(:func:`~fedprior.algorithms.pieces.server_optimizers.with_server_optimizer`). FedProx and SCAFFOLD take the
same server optimizers as ``algorithm.server_optimizer``.

Defaults: one set per rule, declared once in
:data:`~fedprior.algorithms.pieces.server_optimizers.RULE_DEFAULTS` and shared with ``algorithm.server_optimizer``:
server lr 0.01 for FedAdagrad, FedAdam and FedYogi (Flower's 0.1 for FedAdam and FedAdagrad diverges on the small CNN),
beta1 0.9 and beta2 0.99 (FedAdagrad: beta1 0, no momentum), tau 1e-3; FedAvgM server lr 1 and momentum 0.9 (Hsu et al.'s).
"""

from __future__ import annotations

import inspect
from typing import Any

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.linear_heads import BIAS, WEIGHT
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.hyperparameters import parameters, with_shared
from fedprior.algorithms.pieces.server_optimizers import FIELDS, RULE_DEFAULTS, Rule, ServerOptimizer, server_step, with_server_optimizer

FEDAVG = tuple(p for p in inspect.signature(fedavg, eval_str=True).parameters.values() if p.kind is p.KEYWORD_ONLY)
"""FedAvg's keyword parameters: every algorithm here takes them, with FedAvg's defaults."""

MOMENTUM, ADAGRAD, ADAM, YOGI = (
    tuple(p.replace(default=RULE_DEFAULTS[rule][p.name]) for p in parameters(server_step, tuple(RULE_DEFAULTS[rule])))
    for rule in ("avgm", "adagrad", "adam", "yogi")
)
"""Each rule's hyperparameters with its defaults (:data:`~fedprior.algorithms.pieces.server_optimizers.RULE_DEFAULTS`)."""


def model_parameters(task: Task, model: str) -> tuple[str, ...]:
    """The State keys of the parameters of FedAvg's ``model`` (the linear head's weight and bias, or the network's)."""
    if model == "linear":
        return (WEIGHT, BIAS)
    from fedprior.models import build_model

    return GlobalModel(lambda: build_model(model, task)).parameter_names()


def fedavg_under(name: str, rule: Rule, task: Task, runtime: Runtime, hyperparameters: dict[str, Any]) -> Algorithm:
    """FedAvg with ``hyperparameters`` (those of its signature), its server step replaced by ``rule``'s with its own (the rest)."""
    server = RULE_DEFAULTS[rule]
    clients = {k: v for k, v in hyperparameters.items() if k not in server}
    optimizer = ServerOptimizer(rule, **{attr: hyperparameters[field] for attr, field in FIELDS.items() if field in server})
    clients_algorithm = fedavg(task, runtime, **clients)
    return with_server_optimizer(clients_algorithm, optimizer, model_parameters(task, clients["model"])).with_(name=name)


@runtime_options("precision", "compile")
@with_shared((*FEDAVG, *MOMENTUM))
def fedavgm(task: Task, runtime: Runtime, **hyperparameters: Any) -> Algorithm:
    """FedAvgM: FedAvg with server momentum, v = beta v + Delta, x = x + server_lr v (Hsu et al., 2019).

    Hsu, Qi and Brown, "Measuring the Effects of Non-Identical Data Distribution for Federated Visual
    Classification", 2019: FedAvg's clients; the server keeps a momentum v of the mean update Delta_t.
    """
    return fedavg_under("fedavgm", "avgm", task, runtime, hyperparameters)


@runtime_options("precision", "compile")
@with_shared((*FEDAVG, *ADAGRAD))
def fedadagrad(task: Task, runtime: Runtime, **hyperparameters: Any) -> Algorithm:
    """FedAdagrad: FedAvg's clients, an Adagrad server step, v = v + Delta^2 (Reddi et al., ICLR 2021, Algorithm 2)."""
    return fedavg_under("fedadagrad", "adagrad", task, runtime, hyperparameters)


@runtime_options("precision", "compile")
@with_shared((*FEDAVG, *ADAM))
def fedadam(task: Task, runtime: Runtime, **hyperparameters: Any) -> Algorithm:
    """FedAdam: FedAvg's clients, an Adam server step without bias correction (Reddi et al., ICLR 2021, Algorithm 2)."""
    return fedavg_under("fedadam", "adam", task, runtime, hyperparameters)


@runtime_options("precision", "compile")
@with_shared((*FEDAVG, *YOGI))
def fedyogi(task: Task, runtime: Runtime, **hyperparameters: Any) -> Algorithm:
    """FedYogi: FedAvg's clients, a Yogi server step, v = v - (1 - beta2) Delta^2 sign(v - Delta^2) (Reddi et al., ICLR 2021, Algorithm 2)."""
    return fedavg_under("fedyogi", "yogi", task, runtime, hyperparameters)
