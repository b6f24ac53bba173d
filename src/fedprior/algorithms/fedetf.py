"""FedETF (Li et al., "No Fear of Classifier Biases: Neural Collapse Inspired Federated Learning with Synthetic and Fixed Classifier", ICCV 2023).

The classifier is a synthetic simplex equiangular tight frame, fixed for every client
(Eq. 1, after Papyan et al.'s neural collapse):

    W = sqrt(K / (K - 1)) P (I_K - (1/K) 1 1^T),   P (d x K) with orthonormal columns,

whose K columns have unit norm and pairwise cosine -1/(K - 1). The backbone's features
go through a projection layer to d dimensions and are L2-normalized
(:class:`~fedprior.models.projected.ProjectedNet`); logits are s h W with a learnable
temperature s (starting at 1.0, averaged like any parameter), trained with the balanced
softmax loss on the client's class counts (Sec. 4.2), and the server averages the
models (FedAvg). d = K, as the authors' code. FedETF's local personalization phase is
not part of the global model FedBM compares. W is rebuilt from a fixed stream on every
client (never sent). ``loss='cross-entropy'`` trains with plain cross-entropy instead of the
balanced softmax (an ablation beside FedBM's Table I: which of the two changes carries FedETF).

Equations (Li et al., ICCV 2023), and where each is computed: the simplex ETF W, :func:`simplex_etf`;
the projection and L2 normalization of the features, :class:`~fedprior.models.projected.ProjectedNet`;
the logits s h W, :class:`EtfHead`; the balanced softmax loss (Sec. 4.2), :func:`etf_loss` (the loss itself:
:func:`~fedprior.algorithms.pieces.class_balance.balanced_softmax_loss`); the server's average,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`.
Where it departs from the paper: no local personalization phase; d = K as the authors' code.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.pieces.class_balance import balanced_softmax_loss, class_counts
from fedprior.algorithms.pieces.hyperparameters import BodyTraining
from fedprior.algorithms.pieces.tensors import model_arrays
from fedprior.errors import ConfigError
from fedprior.models.projected import ProjectedNet
from fedprior.seeding import torch_generator

EtfLoss = Annotated[
    Literal["balanced-softmax", "cross-entropy"],
    Field(description="'balanced-softmax' (Sec. 4.2: CE(logits + log n_client)) or plain 'cross-entropy' (an ablation)"),
]
EtfDim = Annotated[int, Field(ge=0, description="dimension d of the ETF space (0: the number of classes, as the code)")]


def simplex_etf(num_classes: int, dim: int, seed: int = 0) -> torch.Tensor:
    """(d, K): sqrt(K/(K-1)) P (I - 11^T / K), P from the QR of a random (d, K) matrix (stream ("fedetf", "etf"))."""
    if dim < num_classes:
        raise ConfigError(f"algorithm.etf_dim: a {num_classes}-class simplex ETF needs d >= {num_classes} here, got {dim}")
    random = torch.rand(dim, num_classes, generator=torch_generator(seed, "fedetf", "etf"), dtype=torch.float64)
    p, _ = torch.linalg.qr(random)
    centring = torch.eye(num_classes, dtype=torch.float64) - torch.full((num_classes, num_classes), 1.0 / num_classes, dtype=torch.float64)
    return (math.sqrt(num_classes / (num_classes - 1)) * p @ centring).float()


def etf_loss(logits: torch.Tensor, y: torch.Tensor, counts: torch.Tensor, kind: str = "balanced-softmax") -> torch.Tensor:
    """FedETF's training loss on the ETF logits: the balanced softmax on the client's class ``counts``, or plain cross-entropy."""
    if kind == "cross-entropy":
        return F.cross_entropy(logits, y)
    return balanced_softmax_loss(logits, y, counts)


class EtfHead(nn.Module):
    """logits = s h W: W a non-persistent buffer (fixed, rebuilt everywhere), s a learnable temperature."""

    etf: torch.Tensor

    def __init__(self, etf: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("etf", etf, persistent=False)
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.scale * h @ self.etf


@trains_body
def fedetf(task: Task, runtime: Runtime, *, body: BodyTraining, etf_dim: EtfDim = 0, loss: EtfLoss = "balanced-softmax") -> Algorithm:
    """FedETF: a fixed simplex-ETF classifier on projected, normalized features; balanced softmax loss (Li et al., 2023)."""
    model, training = body.model, local_training(body, runtime)
    from fedprior.models import build_model

    build_model(model, task)
    etf = simplex_etf(task.num_classes, etf_dim or task.num_classes)
    net = training.global_model(lambda: ProjectedNet(build_model(model, task), etf.shape[0], EtfHead(etf)))

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        local = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        counts = class_counts(data["y"], task.num_classes)
        metrics = training.fit(local, data, info, loss_fn=lambda m, x, y: etf_loss(m(x), y, counts, loss))
        return Reply(model_arrays(local, resident=True), int(data["x"].shape[0]), metrics), state  # on the run's device

    return net.algorithm(
        "fedetf", client_update, evaluate=lambda state, data: training.evaluate(net.receive(state, "evaluate"), data), thread_safe_updates=True
    )
