"""FedNH (Dai et al., "Tackling Data Heterogeneity in Federated Learning with Class Prototypes", AAAI 2023).

The classifier is a set of class prototypes P (K x D, unit rows) spread uniformly at
the start (orthogonal rows, the code's default) and logits are s <h/|h|, P_k> with a
learnable scale s. Clients train the body (and s) with P fixed, then report, per
class they hold, the mean of their features. The server averages the models and
infuses the class semantics into the prototypes with smoothing rho (Sec. 4.2):

    P_k <- normalize( rho P_k + (1 - rho) normalize( mean_c mu_{c,k} ) )

over the clients c that hold class k; a class no sampled client holds keeps its
prototype. rho = 0.9 (FedBM: "as suggested in the original paper"). As the FedETF code
FedBM's tables come from: a client's mu_{c,k} is the mean of its unnormalized features,
the server averages them with equal weights, and s starts at ``scale`` (1.0) and is
averaged like any parameter. P lives in the model state (a buffer), so it is broadcast
with the model and every client uses the same one.

Equations (Dai et al., AAAI 2023), and where each is computed: the uniformly spread initial
prototypes, :func:`orthogonal_prototypes`; the classifier s <h/|h|, P_k>, :class:`CosineHead`; a client's
class means of its features, :func:`~fedprior.algorithms.pieces.class_balance.class_means`; the server's
semantic infusion with smoothing rho (Sec. 4.2), :func:`update_prototypes`; the model average,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`.
Where it departs from the paper: the FedETF code's choices listed above (orthogonal initial prototypes,
unnormalized class means averaged with equal weights, s averaged like any parameter).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.pieces.class_balance import class_means
from fedprior.algorithms.pieces.hyperparameters import BodyTraining
from fedprior.algorithms.pieces.tensors import MODEL, device_of, model_arrays
from fedprior.models.split import split
from fedprior.seeding import torch_generator

PROTOTYPES = MODEL + "head.prototypes"
Rho = Annotated[float, Field(ge=0, le=1, description="prototype smoothing rho (FedBM: 0.9)")]
Scale = Annotated[float, Field(gt=0, description="initial value of the learnable logit scale s (FedETF code: 1.0)")]


class CosineHead(nn.Module):
    """logits = s <h / |h|, P_k>; P a buffer (not trained locally), s a parameter."""

    prototypes: torch.Tensor

    def __init__(self, prototypes: torch.Tensor, scale: float) -> None:
        super().__init__()
        self.register_buffer("prototypes", prototypes.clone())
        self.scale = nn.Parameter(torch.tensor(float(scale)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.scale * F.normalize(h, dim=1) @ self.prototypes.T


def orthogonal_prototypes(num_classes: int, dim: int, seed: int) -> torch.Tensor:
    """(K, D) orthonormal rows (or columns, when K > D) drawn from the stream ("fednh", "prototypes")."""
    weight = torch.empty(num_classes, dim)
    nn.init.orthogonal_(weight, generator=torch_generator(seed, "fednh", "prototypes"))
    return F.normalize(weight, dim=1)


def update_prototypes(prototypes: torch.Tensor, means: Sequence[torch.Tensor], counts: Sequence[torch.Tensor], rho: float) -> torch.Tensor:
    """FedNH's semantic infusion (see the module docstring) from the clients' class means and counts."""
    held = torch.stack([c > 0 for c in counts]).float()  # (clients, K)
    total = (torch.stack(list(means)) * held.unsqueeze(-1)).sum(0)
    present = held.sum(0) > 0
    average = F.normalize(total / held.sum(0).clamp_min(1).unsqueeze(1), dim=1)
    smoothed = F.normalize(rho * prototypes + (1 - rho) * average, dim=1)
    return torch.where(present.unsqueeze(1), smoothed, prototypes)


@trains_body
def fednh(task: Task, runtime: Runtime, *, body: BodyTraining, rho: Rho = 0.9, scale: Scale = 1.0) -> Algorithm:
    """FedNH: uniform class prototypes as the classifier, smoothly infused with the clients' class semantics (Dai et al., 2023)."""
    model, training = body.model, local_training(body, runtime)
    device = training.device
    from fedprior.models import build_model

    build_model(model, task)

    def build() -> nn.Module:
        network = build_model(model, task)
        network.head = CosineHead(torch.zeros(task.num_classes, split(network).feature_dim), scale)
        return network

    def initial(network: nn.Module) -> None:
        head = split(network).head
        assert isinstance(head, CosineHead)  # build() put it there
        head.prototypes.copy_(orthogonal_prototypes(task.num_classes, split(network).feature_dim, 0))

    net = training.global_model(build, initial)

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        local = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        metrics = training.fit(local, data, info)
        means, counts = class_means(local, data["x"].to(device), data["y"].to(device), task.num_classes)
        arrays = {**model_arrays(local, resident=True), "class_means": means, "class_counts": counts}  # on the run's device
        return Reply(arrays, int(data["x"].shape[0]), metrics), state

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        new = net.average(state, replies, info)
        means, counts = [r.arrays["class_means"] for r in replies], [r.arrays["class_counts"] for r in replies]
        new[PROTOTYPES] = update_prototypes(state[PROTOTYPES].to(device_of(replies[0].arrays)), means, counts, rho)  # where the replies are
        return new

    return net.algorithm(
        "fednh",
        client_update,
        aggregate=aggregate,
        evaluate=lambda state, data: training.evaluate(net.receive(state, "evaluate"), data),
        thread_safe_updates=True,
    )
