"""FedAsync (Xie, Koyejo and Gupta, 2019): each arriving client model is mixed into the global one, weighted by its staleness.

Xie, Koyejo and Gupta, "Asynchronous Federated Optimization", 2019, Algorithm 1: the server's
x_t = (1 - alpha_t) x_{t-1} + alpha_t x_new with alpha_t = alpha s(t - tau), on each update as it arrives: FedBuff's clock
(:mod:`~fedprior.algorithms.pieces.async_schedule`) with a buffer of one (K = 1), and ``ServerRule('mixing')``
(:mod:`~fedprior.algorithms.engines.asynchronous`). Its workers minimize the regularized
g_{x_t}(x; z) = f(x; z) + (rho / 2) ||x - x_t||^2 from the model they downloaded: FedProx's proximal term
(:func:`~fedprior.algorithms.fedprox.proximal_loss`) on FedAvg's local SGD; rho = 0 is FedAvg's client.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.asynchronous import ServerRule, asynchronous_algorithm, clock_durations
from fedprior.algorithms.engines.supervised import GlobalModel, local_sgd_update, model_task
from fedprior.algorithms.fedbuff import image_model
from fedprior.algorithms.fedprox import proximal_loss
from fedprior.algorithms.pieces.async_schedule import Schedule
from fedprior.algorithms.pieces.hyperparameters import Concurrency, LocalSgd, Staleness, StalenessA, StalenessB, with_fields

Alpha = Annotated[float, Field(gt=0, le=1, description="alpha: the mixing weight of a fresh client model, alpha_t = alpha s(t - tau) (FedAsync, Algorithm 1)")]
Rho = Annotated[
    float, Field(ge=0, description="rho of the workers' regularized objective f + (rho/2)||x - x_t||^2 (FedAsync, Algorithm 1); 0 = FedAvg's local SGD")
]


@runtime_options("precision", "compile")
@with_fields("sgd", LocalSgd)
def fedasync(
    task: Task,
    runtime: Runtime,
    *,
    sgd: LocalSgd,
    concurrency: Concurrency = 20,
    alpha: Alpha = 0.6,
    staleness: Staleness = "polynomial",
    staleness_a: StalenessA = 0.5,
    staleness_b: StalenessB = 4.0,
    rho: Rho = 0.0,
) -> Algorithm:
    """FedAsync: each client model mixed in as it arrives, x_t = (1 - alpha s(t - tau)) x_{t-1} + alpha s(t - tau) x_new.

    Xie, Koyejo and Gupta, "Asynchronous Federated Optimization", 2019, Algorithm 1, with its staleness functions
    s (constant, polynomial (t - tau + 1)^(-a), hinge): FedBuff's clock with a buffer of one update, C clients in flight.
    Each arrival is one round of the run. The durations are ``runtime.client_duration`` (a system model), else 1.0.
    """
    image_model(sgd, "fedasync")
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device, precision=runtime.precision, compile=runtime.compile)
    schedule = Schedule(1, concurrency, task.num_clients, clock_durations(runtime, net))
    rule = ServerRule("mixing", staleness, staleness_a, staleness_b, alpha=alpha)
    update = local_sgd_update(net, runtime, sgd, make_loss=(lambda g, _: proximal_loss(g, rho)) if rho > 0 else None)
    return asynchronous_algorithm("fedasync", net, update, schedule, rule)
