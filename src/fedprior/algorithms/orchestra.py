"""Orchestra (Lubana et al., ICML 2022): unsupervised FL by globally consistent clustering; a baseline of the MFCL paper's Tables 2-3.

The facts below follow the authors' code (github.com/akhilmathurs/orchestra: models.py
``orchestra``, client.py, myfedavg.py), where the paper leaves them open.

Network: an online ResNet-18 with a projection head (here Table 6's head, as every
baseline of fedprior's MFCL tables), a target copy updated by exponential moving average
(tau = 0.996, before each step), a rotation-prediction layer (the degeneracy
regularizer) and G global centroids (unit rows). Everything is federated by FedAvg,
weighted by client size.

Client, each round: for every mini-batch of two views x1, x2 (and x3 = x1 rotated by a
random multiple of 90 degrees),

    z2 = normalize(online(x2)),  t1 = normalize(target(x1)),  C = global centroids (fixed)
    L_cluster = -mean_i sum_g softmax(t1 C^T / T)_ig log softmax(z2 C^T / T)_ig
    L_deg     = cross-entropy(rotation_layer(online projection of x3), rotation)
    L = L_cluster + L_deg                                           (T = 0.1)

and the target projections t1 fill a memory of the last ``memory`` rows. After training,
local clustering: ``local_clusters`` centroids from random memory rows, refined five
times by Sinkhorn-Knopp equal-size assignment (epsilon 1/25, 10 iterations) and
normalized means; the client sends them with its model.

Server: FedAvg of the models, then global clustering: the G centroids are trained for
``global_iterations`` SGD steps (lr 0.01, momentum 0.9, weight decay 1e-4, renormalized
after each) to make softmax(Z C^T / T) match the Sinkhorn-Knopp assignment of the union Z
of the local centroids (loss: minus their mean cosine similarity).

The first round (stage ``setup``) only initializes the centroids: clients send local
centroids of their target projections without training, the server clusters them.
Client optimizer: SGD, lr 0.003, momentum 0.9, weight decay 1e-4 (the code's). Views:
SimCLR's recipe, as for the other baselines (Orchestra's own adds blur and solarization).
Scored, like MFCL, by linear evaluation.

Equations (Lubana et al., ICML 2022; here from its authors' code), and where each is computed: the
cluster loss and the rotation (degeneracy) loss, ``loss`` in ``client_update`` inside :func:`orchestra` (the
rotations: :func:`rotate`); the target network's moving average, :meth:`OrchestraNet.update_target`; the
client's equal-size local clustering, :func:`local_clustering`; the server's global clustering,
:func:`global_clustering`; Sinkhorn-Knopp, :func:`~fedprior.algorithms.pieces.contrastive.sinkhorn`; FedAvg
(the MFCL paper's Eq. 1), :meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`; linear evaluation,
:func:`~fedprior.algorithms.engines.self_supervised.linear_evaluate`.
Where it departs from Orchestra: Table 6's projection head and SimCLR's views (no blur, no solarization).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, Stage, State, Task
from fedprior.algorithms.engines.self_supervised import evaluation_inputs, linear_evaluate, two_view_epochs, unit_images
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.pieces.contrastive import sinkhorn
from fedprior.algorithms.pieces.hyperparameters import ProjectionDim, SelfSupervisedFields, Width, with_fields
from fedprior.algorithms.pieces.tensors import MODEL, model_arrays
from fedprior.errors import ConfigError
from fedprior.models.contrastive_net import ContrastiveNet

LOCAL = "local_centroids"
CENTROIDS = MODEL + "centroids.weight"

GlobalClusters = Annotated[int, Field(ge=2, description="number G of global centroids (Orchestra's code: 128)")]
LocalClusters = Annotated[int, Field(ge=1, description="local centroids each client sends (Orchestra's code: 16)")]
Memory = Annotated[int, Field(ge=1, description="target projections a client keeps for local clustering (Orchestra's code: 128)")]
OrchestraTemperature = Annotated[float, Field(gt=0, description="temperature T of the cluster assignments (Orchestra's code: 0.1)")]
Ema = Annotated[float, Field(ge=0, lt=1, description="EMA rate of the target network (Orchestra's code: 0.996)")]
SgdLr = Annotated[float, Field(gt=0, description="client SGD learning rate (Orchestra's code: 0.003, momentum 0.9, weight decay 1e-4)")]
GlobalIterations = Annotated[int, Field(ge=1, description="SGD steps of the server's global clustering (Orchestra's code: 500)")]


class OrchestraNet(nn.Module):
    """Online and target ContrastiveNets, the rotation (degeneracy) layer and the global centroids."""

    def __init__(self, online: ContrastiveNet, target: ContrastiveNet, global_clusters: int) -> None:
        super().__init__()
        self.online, self.target = online, target
        self.target.load_state_dict(online.state_dict())
        for p in self.target.parameters():
            p.requires_grad_(False)
        dim = online.projector.out_dim
        self.rotation = nn.Linear(dim, 4)
        self.centroids = nn.Linear(dim, global_clusters, bias=False)
        with torch.no_grad():
            self.centroids.weight.copy_(F.normalize(self.centroids.weight, dim=1))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.online.embed(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.online(x)

    @torch.no_grad()
    def update_target(self, ema: float) -> None:
        for t, o in zip(self.target.parameters(), self.online.parameters(), strict=True):
            t.mul_(ema).add_(o, alpha=1 - ema)


def rotate(images: torch.Tensor, quarter_turns: torch.Tensor) -> torch.Tensor:
    """Each image turned by its own multiple of 90 degrees (square images): every turn of the whole batch, each image's
    picked by ``torch.where`` (no boolean-mask selection, whose size a GPU must report to the host)."""
    turns = quarter_turns.view(-1, *([1] * (images.dim() - 1)))
    out = images
    for k in range(1, 4):
        out = torch.where(turns == k, torch.rot90(images, k, dims=(2, 3)), out)
    return out


@torch.no_grad()
def local_clustering(memory: torch.Tensor, clusters: int, generator: torch.Generator, iterations: int = 5) -> torch.Tensor:
    """Orchestra's client clustering: equal-size (Sinkhorn-Knopp) k-means on the unit-norm memory rows."""
    replace = memory.shape[0] < clusters
    start = torch.randint(memory.shape[0], (clusters,), generator=generator) if replace else torch.randperm(memory.shape[0], generator=generator)[:clusters]
    centroids = memory[start].clone()
    for _ in range(iterations):
        choice = sinkhorn(memory @ centroids.T, 1 / 25, 10).argmax(1)
        for c in range(clusters):
            members = memory[choice == c]
            if members.shape[0] == 0:
                members = memory[torch.randint(memory.shape[0], (1,), generator=generator)]
            centroids[c] = F.normalize(members.mean(0), dim=0)
    return centroids


def global_clustering(centroids: torch.Tensor, local: torch.Tensor, temperature: float, iterations: int) -> torch.Tensor:
    """Orchestra's server clustering: fit the G centroids to the Sinkhorn-Knopp assignment of the local centroids."""
    weight = centroids.detach().clone().requires_grad_(True)
    optimizer = torch.optim.SGD([weight], lr=0.01, momentum=0.9, weight_decay=1e-4)
    z = F.normalize(local, dim=1)
    for _ in range(iterations):
        codes = sinkhorn(local @ weight.detach().T, 1 / 25, 100)
        probs = F.softmax(z @ weight.T / temperature, dim=1)
        loss = -F.cosine_similarity(codes, probs, dim=-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            weight.copy_(F.normalize(weight, dim=1))
    return weight.detach()


@with_fields("protocol", SelfSupervisedFields)
def orchestra(
    task: Task,
    runtime: Runtime,
    *,
    width: Width = 64,
    projection_dim: ProjectionDim = 128,
    global_clusters: GlobalClusters = 128,
    local_clusters: LocalClusters = 16,
    memory: Memory = 128,
    temperature: OrchestraTemperature = 0.1,
    ema: Ema = 0.996,
    lr: SgdLr = 0.003,
    global_iterations: GlobalIterations = 500,
    protocol: SelfSupervisedFields,
) -> Algorithm:
    """Orchestra: clients learn to match global cluster assignments of their views, the server clusters their local centroids.

    Lubana et al., "Orchestra: Unsupervised Federated Learning via Globally Consistent
    Clustering", ICML 2022; the module docstring gives the losses and both clusterings.
    """
    if len(task.input_shape) != 3 or task.input_shape[1] != task.input_shape[2]:
        raise ConfigError(f"algorithm.name: orchestra trains on square images (C, H, H); the data gives {task.input_shape}")
    channels = task.input_shape[0]
    net = GlobalModel(
        lambda: OrchestraNet(ContrastiveNet(channels, width, projection_dim), ContrastiveNet(channels, width, projection_dim), global_clusters),
        device=runtime.device,
    )
    to_unit = unit_images(task)

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        model = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        model.train()
        images = to_unit(data["x"].to(runtime.device))
        g = info.generator()
        if info.stage == "setup":  # no training: centroids of the target projections of up to `memory` images
            with torch.no_grad():
                rows = torch.randperm(images.shape[0], generator=g)[:memory]
                targets = F.normalize(model.target(images[rows]), dim=1)
            return Reply({LOCAL: local_clustering(targets, local_clusters, g)}, int(images.shape[0])), state  # on the run's device
        bank: list[torch.Tensor] = []
        # every step's rotations, drawn before the first (the draws, in order, of one call per step) and copied at once
        n = images.shape[0]
        sizes = [min(runtime.batch_size, n - start) for _ in range(runtime.local_epochs) for start in range(0, n, runtime.batch_size)]
        turns = info.generator("rotation")
        drawn = [torch.randint(0, 4, (size,), generator=turns) for size in sizes]
        quarters = iter(torch.cat(drawn).to(runtime.device).split(sizes) if drawn else ())

        def loss(m: nn.Module, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
            assert isinstance(m, OrchestraNet)  # two_view_epochs passes the model it trains
            centroids = m.centroids.weight.detach()
            z2 = F.normalize(m.online(view2), dim=1)
            with torch.no_grad():
                m.update_target(ema)
                t1 = F.normalize(m.target(view1), dim=1)
                bank.append(t1)  # stays on the device: no copy to the host per step
            target = F.softmax(t1 @ centroids.T / temperature, dim=1)
            clustering = -(target * F.log_softmax(z2 @ centroids.T / temperature, dim=1)).sum(1).mean()
            quarter = next(quarters)
            assert quarter.shape[0] == view1.shape[0], "one draw per step of two_view_epochs"
            rotation = F.cross_entropy(m.rotation(m.online(rotate(view1, quarter))), quarter)
            return clustering + rotation

        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        metrics = two_view_epochs(
            model,
            images,
            epochs=runtime.local_epochs,
            batch_size=runtime.batch_size,
            optimizer=optimizer,
            generator=g,
            loss_fn=loss,
            min_scale=protocol.min_scale,
        )
        recent = torch.cat(bank)[-memory:]
        reply = {**model_arrays(model, resident=True), LOCAL: local_clustering(recent, local_clusters, g)}  # on the run's device
        return Reply(reply, int(images.shape[0]), metrics), state

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        new = state if info.stage == "setup" else net.average(state, replies, info)
        local = torch.cat([r.arrays[LOCAL] for r in replies])
        return {**new, CENTROIDS: global_clustering(new[CENTROIDS].to(runtime.device), local.to(runtime.device), temperature, global_iterations)}

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        model = net.receive(state, "evaluate")
        features = model if protocol.eval_features == "projection" else model.embed
        return linear_evaluate(features, model, data, task, runtime.device, protocol.linear_eval)

    return net.algorithm(
        "orchestra",
        client_update,
        inputs=("x",),
        aggregate=aggregate,
        evaluate=evaluate,
        stages=(Stage("setup", rounds=1, evaluate=False), Stage("federated")),
        evaluation_inputs=evaluation_inputs(protocol.linear_eval),
    )
