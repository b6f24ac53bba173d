"""MOON (Li, He and Song, CVPR 2021): model-contrastive federated learning, a supervised upper reference of the MFCL paper's Tables 2-3.

Equations (Li, He and Song, CVPR 2021): Eq. 2, the model-contrastive loss, :func:`model_contrastive_loss`;
Eq. 3, the local objective, :func:`moon_loss`; the client loop and the average are FedAvg's
(:func:`~fedprior.algorithms.engines.supervised.local_sgd_update`,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`).
"""

from __future__ import annotations

from typing import Annotated, Any

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, Runtime, State, Task, runtime_options
from fedprior.algorithms.engines.supervised import GlobalModel, local_sgd_update, model_task
from fedprior.algorithms.pieces.hyperparameters import LocalSgd, with_fields, with_shared
from fedprior.algorithms.pieces.local_training import LossFn, cross_entropy_loss
from fedprior.algorithms.pieces.robust_aggregation import ROBUST_AGGREGATION, checked_robust_aggregation, with_robust_aggregation
from fedprior.errors import ConfigError
from fedprior.models.split import split

MoonMu = Annotated[float, Field(ge=0, description="weight mu of the model-contrastive loss (MOON: 5 on CIFAR-10, 1 on CIFAR-100)")]
MoonTemperature = Annotated[float, Field(gt=0, description="temperature tau of the model-contrastive loss (MOON: 0.5)")]


def model_contrastive_loss(z: torch.Tensor, z_global: torch.Tensor, z_previous: torch.Tensor, tau: float) -> torch.Tensor:
    """l_con = -log [ exp(sim(z, z_glob)/tau) / (exp(sim(z, z_glob)/tau) + exp(sim(z, z_prev)/tau)) ] (MOON, Eq. 2), batch mean."""
    positive = F.cosine_similarity(z, z_global, dim=1) / tau
    negative = F.cosine_similarity(z, z_previous, dim=1) / tau
    return F.cross_entropy(torch.stack([positive, negative], dim=1), torch.zeros(z.shape[0], dtype=torch.long, device=z.device))


def moon_loss(global_model: nn.Module, previous_model: nn.Module, mu: float, tau: float) -> LossFn:
    """Local objective CE + mu l_con (MOON, Eq. 3); representations are the networks' ``embed`` features."""
    for frozen in (global_model, previous_model):
        frozen.eval()
        for p in frozen.parameters():
            p.requires_grad_(False)

    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = split(model).embed(x)
        with torch.no_grad():
            z_global, z_previous = split(global_model).embed(x), split(previous_model).embed(x)
        return cross_entropy_loss(model, x, y) + mu * model_contrastive_loss(z, z_global, z_previous, tau)

    return loss


@runtime_options("precision", "compile")
@with_shared(ROBUST_AGGREGATION)
@with_fields("sgd", LocalSgd, ("model", "lr", "momentum", "weight_decay"))
def moon(task: Task, runtime: Runtime, *, sgd: LocalSgd, mu: MoonMu = 5.0, temperature: MoonTemperature = 0.5, **robust: Any) -> Algorithm:
    """MOON: FedAvg whose clients add a contrastive term pulling their representation to the global model's, away from their previous one.

    FedAvg's client loop (:func:`~fedprior.algorithms.engines.supervised.local_sgd_update`) with the loss
    :func:`moon_loss` (Eq. 3), wrapped to keep the client state.

    Li, He and Song, "Model-Contrastive Federated Learning", CVPR 2021, Eq. 2-3: for each
    input, z (local model), z_glob (received global model, frozen) and z_prev (this
    client's model at the end of its last round, frozen; the global model the first
    time) give l_con, added with weight mu to the cross-entropy. The client keeps its
    last local model as client state. Representation: the network's ``embed`` features
    (the CNN's hidden layer, ResNet-18's pooled features); MOON's extra projection head
    is left out. Supervised: clients use their labels (an upper reference in the MFCL paper).
    The three networks and the client's data live on ``device``, each a resident model there (the local, the global and the
    previous one: :meth:`~fedprior.algorithms.engines.supervised.GlobalModel.receive`), and so do the replies and the client state.
    """
    rule = checked_robust_aggregation(**robust)  # the rule replacing FedAvg's mean (robust_aggregation.py)
    if sgd.model == "linear":
        raise ConfigError("algorithm.model: moon contrasts the representations of a network; use 'cnn' or 'resnet18'")
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device, precision=runtime.precision, compile=runtime.compile)

    def loss(global_model: nn.Module, state: State) -> LossFn:
        # z_prev: the client's last local model (copied into the resident "previous" model on an accelerator), the global one the first time
        return moon_loss(global_model, net.receive(state, "previous") if state else global_model, mu, temperature)

    fedavg_update = local_sgd_update(net, runtime, sgd, make_loss=loss)

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        reply, _ = fedavg_update(message, state, data, info)
        return reply, {k: v.clone() for k, v in reply.arrays.items()}  # the client keeps its model for the next z_prev

    return with_robust_aggregation(net.algorithm("moon", client_update, thread_safe_updates=True, local_step_budget=True), rule)
