"""FedBuff (Nguyen et al., AISTATS 2022): FedAvg's clients, trained asynchronously; the server steps once K updates are buffered.

Nguyen, Malik, Zhan, Yousefpour, Rabbat, Malek and Huba, "Federated Learning with Buffered Asynchronous Aggregation",
AISTATS 2022, Algorithm 1. The clients run FedAvg's local SGD (:func:`~fedprior.algorithms.engines.supervised.local_sgd_update`)
on the model version they downloaded; C of them train at once on the simulated clock
(:mod:`~fedprior.algorithms.pieces.async_schedule`); the server (:mod:`~fedprior.algorithms.engines.asynchronous`,
``ServerRule('buffered')``) applies x <- x + eta_g sum_i c_i s(tau_i) Delta_i once K updates have arrived. One round of
the run is one such step. docs/system-heterogeneity.md describes the clock and its rules.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.asynchronous import ServerRule, asynchronous_algorithm, clock_durations
from fedprior.algorithms.engines.supervised import GlobalModel, local_sgd_update, model_task
from fedprior.algorithms.pieces.async_schedule import Schedule, check_sizes
from fedprior.algorithms.pieces.hyperparameters import Concurrency, LocalSgd, Staleness, StalenessA, StalenessB, with_fields
from fedprior.errors import ConfigError

BufferSize = Annotated[int, Field(ge=1, description="K: client updates the server collects before each model step (FedBuff, Algorithm 1); at most concurrency")]
ServerLr = Annotated[float, Field(gt=0, description="eta_g: the server's learning rate on the buffer's mean update (FedBuff, Algorithm 1)")]
Weighting = Annotated[
    Literal["uniform", "examples"],
    Field(description="c_i of the buffer's mean: 'uniform' 1/K (the paper's Delta-bar / K) or 'examples' n_i / sum n (FedAvg's weights)"),
]


def image_model(sgd: LocalSgd, name: str) -> None:
    """The asynchronous server steps a whole network: ConfigError for ``model = 'linear'`` (batched heads on features)."""
    if sgd.model == "linear":
        raise ConfigError(f"algorithm.model: {name} trains an image model; accepted: cnn, convnet, convnet-small, resnet18, resnet18-imagenet")


@runtime_options("precision", "compile")
@with_fields("sgd", LocalSgd)
def fedbuff(
    task: Task,
    runtime: Runtime,
    *,
    sgd: LocalSgd,
    buffer_size: BufferSize = 10,
    concurrency: Concurrency = 20,
    server_lr: ServerLr = 1.0,
    staleness: Staleness = "polynomial",
    staleness_a: StalenessA = 0.5,
    staleness_b: StalenessB = 4.0,
    weighting: Weighting = "uniform",
) -> Algorithm:
    """FedBuff: C clients train asynchronously on the version they downloaded; the server steps on each K buffered updates.

    Nguyen et al., "Federated Learning with Buffered Asynchronous Aggregation", AISTATS 2022, Algorithm 1:
    x_{v+1} = x_v + eta_g sum_i c_i s(tau_i) Delta_i over the K updates of the buffer, Delta_i the client's change of the
    model it downloaded tau_i versions ago, s(tau) = 1 / sqrt(1 + tau) by default (``staleness = 'polynomial'``, a = 0.5:
    the paper's staleness scaling). With K = C, equal client durations and eta_g = 1 every update is fresh and a step is
    FedAvg's round (``weighting = 'examples'``: its example-weighted mean). The durations are ``runtime.client_duration``
    (a system model), else 1.0 for every client.
    """
    check_sizes(buffer_size, concurrency)
    image_model(sgd, "fedbuff")
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device, precision=runtime.precision, compile=runtime.compile)
    schedule = Schedule(buffer_size, concurrency, task.num_clients, clock_durations(runtime, net))
    rule = ServerRule("buffered", staleness, staleness_a, staleness_b, server_lr=server_lr, weighting=weighting)
    return asynchronous_algorithm("fedbuff", net, local_sgd_update(net, runtime, sgd), schedule, rule)
