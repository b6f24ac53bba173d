"""FedAvgM, FedAdagrad, FedAdam and FedYogi: FedAvg's clients under a server optimizer (Reddi et al., ICLR 2021).

Reddi et al., "Adaptive Federated Optimization", ICLR 2021, Algorithm 2 (FedAdagrad, FedAdam, FedYogi) and
Hsu et al., 2019 (FedAvgM): the clients run FedAvg's local SGD (:func:`~fedprior.algorithms.fedavg.fedavg`),
the server treats Delta_t = (example-weighted mean of the client models) - x_t as a pseudo-gradient and steps
with :func:`~fedprior.algorithms.pieces.server_optimizers.momentum_step` or
:func:`~fedprior.algorithms.pieces.server_optimizers.adaptive_step`
(:func:`~fedprior.algorithms.pieces.server_optimizers.with_server_optimizer`). FedProx and SCAFFOLD take the
same server optimizers as ``algorithm.server_optimizer``.

Defaults: Flower's strategies (``flwr.serverapp.strategy``, flwr 1.41): FedAdam eta 0.1, FedYogi eta 0.01,
FedAdagrad eta 0.1 with beta1 = 0 (no first-moment decay), beta1 0.9, beta2 0.99, tau 1e-3; FedAvgM server lr
1 and momentum 0.9 (Hsu et al.'s; Flower's default momentum 0 would be FedAvg).
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

from fedprior.algorithms.base import Algorithm, Task
from fedprior.algorithms.engines.linear_heads import BIAS, WEIGHT
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.hyperparameters import parameters, with_shared
from fedprior.algorithms.pieces.server_optimizers import ServerOptimizer, server_step, with_server_optimizer

FEDAVG = tuple(p for p in inspect.signature(fedavg, eval_str=True).parameters.values() if p.kind is p.KEYWORD_ONLY)
"""FedAvg's keyword parameters: every algorithm here takes them, with FedAvg's defaults."""

MOMENTUM = parameters(server_step, ("server_lr", "server_momentum"))
ADAGRAD = parameters(server_step, ("server_lr", "beta1", "tau"))
ADAPTIVE = parameters(server_step, ("server_lr", "beta1", "beta2", "tau"))


def model_parameters(task: Task, model: str) -> tuple[str, ...]:
    """The State keys of the parameters of FedAvg's ``model`` (the linear head's weight and bias, or the network's)."""
    if model == "linear":
        return (WEIGHT, BIAS)
    from fedprior.models import build_model

    return GlobalModel(lambda: build_model(model, task)).parameter_names()


def fedavg_under(name: str, optimizer: ServerOptimizer, task: Task, hyperparameters: dict[str, Any]) -> Algorithm:
    """FedAvg with ``hyperparameters`` (those of its signature), its server step replaced by ``optimizer``."""
    clients = fedavg(task, **hyperparameters)
    return with_server_optimizer(clients, optimizer, model_parameters(task, hyperparameters["model"])).with_(name=name)


def split(hyperparameters: dict[str, Any], server: tuple[inspect.Parameter, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(FedAvg's hyperparameters, the server optimizer's) of a factory's keyword arguments."""
    names = {p.name for p in server}
    return {k: v for k, v in hyperparameters.items() if k not in names}, {k: v for k, v in hyperparameters.items() if k in names}


@with_shared((*FEDAVG, *MOMENTUM), server_momentum=0.9)
def fedavgm(task: Task, **hyperparameters: Any) -> Algorithm:
    """FedAvgM: FedAvg with server momentum, v = beta v + Delta, x = x + server_lr v (Hsu et al., 2019).

    Hsu, Qi and Brown, "Measuring the Effects of Non-Identical Data Distribution for Federated Visual
    Classification", 2019: FedAvg's clients; the server keeps a momentum v of the mean update Delta_t.
    """
    clients, server = split(hyperparameters, MOMENTUM)
    return fedavg_under("fedavgm", ServerOptimizer("avgm", lr=server["server_lr"], momentum=server["server_momentum"]), task, clients)


@with_shared((*FEDAVG, *ADAGRAD), server_lr=0.1, beta1=0.0)
def fedadagrad(task: Task, **hyperparameters: Any) -> Algorithm:
    """FedAdagrad: FedAvg's clients, an Adagrad server step, v = v + Delta^2 (Reddi et al., ICLR 2021, Algorithm 2)."""
    clients, server = split(hyperparameters, ADAGRAD)
    return fedavg_under("fedadagrad", ServerOptimizer("adagrad", lr=server["server_lr"], beta1=server["beta1"], tau=server["tau"]), task, clients)


def adaptive(rule: Literal["adam", "yogi"], server: dict[str, Any]) -> ServerOptimizer:
    """FedAdam's or FedYogi's server optimizer from the factory's server hyperparameters."""
    return ServerOptimizer(rule, lr=server["server_lr"], beta1=server["beta1"], beta2=server["beta2"], tau=server["tau"])


@with_shared((*FEDAVG, *ADAPTIVE), server_lr=0.1)
def fedadam(task: Task, **hyperparameters: Any) -> Algorithm:
    """FedAdam: FedAvg's clients, an Adam server step without bias correction (Reddi et al., ICLR 2021, Algorithm 2)."""
    clients, server = split(hyperparameters, ADAPTIVE)
    return fedavg_under("fedadam", adaptive("adam", server), task, clients)


@with_shared((*FEDAVG, *ADAPTIVE), server_lr=0.01)
def fedyogi(task: Task, **hyperparameters: Any) -> Algorithm:
    """FedYogi: FedAvg's clients, a Yogi server step, v = v - (1 - beta2) Delta^2 sign(v - Delta^2) (Reddi et al., ICLR 2021, Algorithm 2)."""
    clients, server = split(hyperparameters, ADAPTIVE)
    return fedavg_under("fedyogi", adaptive("yogi", server), task, clients)
