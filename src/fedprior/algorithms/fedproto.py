"""FedProto (Tan et al., "FedProto: Federated Prototype Learning across Heterogeneous Clients", AAAI 2022).

Clients never share their models, only class prototypes (Algorithm 1). Each client
keeps its own model (client state; it starts from the run's initial model, which
every client can rebuild from the seed) and minimizes

    L = CE(f(x), y) + lambda * || phi(x) - C_bar_y ||^2        (Eq. 7 with L_R of Eq. 8; the distance as a mean-squared error)

where C_bar_y is the global prototype of class y (a class without one adds no term);
after training it sends C_k, the mean representation of each class it holds, with its
count. The server's global prototype of class k is the count-weighted mean of the
clients' C_k (Eq. 6), kept for classes no client of the round holds. Inference is by
the nearest global prototype (Sec. 4: Inference). lambda = 0.1 as the FedETF code FedBM's
tables come from (MSE over the feature dimensions). The global test metrics average the
personalized models of the latest round's clients (:mod:`fedprior.algorithms.pieces.personal`):
to be tested, those clients also upload their models, whose bytes the round loop counts.

Equations (Tan et al., AAAI 2022, arXiv 2105.00243), and where each is computed: a client's local
prototypes C_i^(j) (Eq. 3), :func:`~fedprior.algorithms.pieces.class_balance.class_means`; the local loss
CE + lambda * L_R (Eqs. 7-8), ``loss_fn`` inside :func:`fedproto` with
:func:`prototype_loss`; the server's count-weighted global prototypes (Eq. 6 without its
extra 1/|N_j| factor: the weights |D_ij|/N_j already sum to 1), :func:`aggregate_prototypes`;
inference by the nearest global prototype (Eq. 4), :func:`nearest_prototype_logits`.
Where it departs from the paper: the distance is a mean-squared error over the feature dimensions
(the FedETF code's), and the round's clients upload their models to be tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.engines.supervised import model_task
from fedprior.algorithms.pieces.class_balance import class_means
from fedprior.algorithms.pieces.hyperparameters import BodyTraining
from fedprior.algorithms.pieces.local_training import classification_metrics
from fedprior.algorithms.pieces.metrics import logit_metrics
from fedprior.algorithms.pieces.personal import EVAL, client_arrays, eval_entries, mean_metrics, personal_evaluation, without_eval
from fedprior.algorithms.pieces.tensors import add_prefix, device_of, model_arrays
from fedprior.models.split import split

PROTOS, PRESENT = "prototypes", "prototype_present"
Lambda = Annotated[float, Field(ge=0, description="weight lambda of the prototype distance (FedETF code: 0.1, as MSE)")]


class _MeanSquaredDifference(torch.autograd.Function):
    """sum(diff^2) / count, with the gradient ``F.mse_loss`` (mean) gives its input on ``count`` elements: float(2 / count) * diff * grad."""

    @staticmethod
    def forward(ctx, diff: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(diff, count)
        return (diff * diff).sum() / count

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        diff, count = ctx.saved_tensors
        norm = (count.double().reciprocal() * 2).to(diff.dtype)  # 2 / count in float64 (times 2 is exact), then rounded, as mse_loss's backward
        return norm * diff * grad, None


def prototype_loss(features: torch.Tensor, y: torch.Tensor, prototypes: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Mean squared error between features and their class's global prototype, over the rows whose class has one (0 if none has).

    Without a host sync: no row is selected and nothing is read back. A row whose class has no prototype gets its own
    (detached) features as target, so it adds 0 to the sum and 0 to the gradient, and the sum is divided by the number of the
    other rows' elements (a device tensor). The gradient is that of ``F.mse_loss(features[keep], prototypes[y[keep]])`` to the
    bit (:class:`_MeanSquaredDifference`); so is the value when every row or no row has a prototype; when only some have, the
    value differs in the last bits (the sum runs over the whole batch, in another order).
    """
    keep = present[y].unsqueeze(1)
    features = features.float()  # as mse_loss under autocast
    target = torch.where(keep, prototypes[y].float(), features.detach())
    count = (keep.sum() * features.shape[1]).clamp_min(1).to(features.dtype)
    return _MeanSquaredDifference.apply(features - target, count)


def aggregate_prototypes(
    old: torch.Tensor, old_present: torch.Tensor, means: Sequence[torch.Tensor], counts: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 6: per class, the count-weighted mean of the clients' prototypes; classes nobody holds keep the old one."""
    weights = torch.stack(list(counts))  # (clients, K)
    totals = weights.sum(0)
    mean = (torch.stack(list(means)) * weights.unsqueeze(-1)).sum(0) / totals.clamp_min(1).unsqueeze(1)
    held = totals > 0
    return torch.where(held.unsqueeze(1), mean, old), old_present | held


NO_PROTOTYPE = -1e6
"""The logit of a class without a global prototype (finite, so the test loss stays a number)."""


def nearest_prototype_logits(features: torch.Tensor, prototypes: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """-||z - C_k||^2 as logits; a class without a prototype gets :data:`NO_PROTOTYPE`."""
    distances = torch.cdist(features, prototypes.to(features.device)) ** 2
    return (-distances).masked_fill(~present.to(features.device).unsqueeze(0), NO_PROTOTYPE)


@trains_body
def fedproto(task: Task, runtime: Runtime, *, body: BodyTraining, proto_weight: Lambda = 0.1) -> Algorithm:
    """FedProto: personal models, shared class prototypes; CE + lambda ||phi(x) - C_y||^2 (Tan et al., 2022)."""
    model, training = body.model, local_training(body, runtime)
    device = training.device
    net = training.global_model(model_task(task, model))
    dim = split(net.build()).feature_dim

    def init(info: RoundInfo) -> State:
        return {**net.init(info), PROTOS: torch.zeros(task.num_classes, dim), PRESENT: torch.zeros(task.num_classes, dtype=torch.bool)}

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        return Broadcast({PROTOS: state[PROTOS], PRESENT: state[PRESENT]})

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        # the client's own model (the run's initial one at first), copied into the resident model on an accelerator
        local = net.receive(state if state else net.init(info))
        prototypes, present = message.arrays[PROTOS].to(device), message.arrays[PRESENT].to(device)

        def loss_fn(m, x, y):
            z = m.embed(x)
            return F.cross_entropy(m.head(z), y) + proto_weight * prototype_loss(z, y, prototypes, present)

        metrics = training.fit(local, data, info, loss_fn=loss_fn)
        means, counts = class_means(local, data["x"].to(device), data["y"].to(device), task.num_classes)
        mine = model_arrays(local, resident=True)  # the reply and the client's model on the run's device
        arrays = {"class_means": means, "class_counts": counts, **add_prefix(mine, f"{EVAL}{info.client_id}.")}
        return Reply(arrays, int(data["x"].shape[0]), metrics), mine

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        means, counts = [r.arrays["class_means"] for r in replies], [r.arrays["class_counts"] for r in replies]
        where = device_of(replies[0].arrays)  # the server's prototypes go where the replies are
        protos, present = aggregate_prototypes(state[PROTOS].to(where), state[PRESENT].to(where), means, counts)
        return {**without_eval(state), PROTOS: protos, PRESENT: present, **eval_entries(replies)}

    @torch.no_grad()
    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        x, y = data["x"].to(device), data["y"].to(device)
        if not bool(state[PRESENT].any()):  # nothing learned yet: the initial model's own head
            return classification_metrics(net.receive(without_eval(state), "evaluate"), x, y, precision=training.precision)

        return mean_metrics(personal_evaluation(state, lambda arrays: personal_metrics(state, arrays, x, y)))

    def personal_metrics(state: State, arrays: State, x: torch.Tensor, y: torch.Tensor) -> dict[str, float | list[float]]:
        """A client's own model (``arrays``) classifying by the nearest of the server's prototypes."""
        personal = net.receive(arrays, "evaluate").eval()
        features = torch.cat([split(personal).embed(x[s : s + 2048]) for s in range(0, x.shape[0], 2048)])
        return logit_metrics(nearest_prototype_logits(features, state[PROTOS], state[PRESENT]), y)

    @torch.no_grad()
    def evaluate_client(state: State, client: int, data: ClientData) -> dict[str, float | list[float]]:
        return personal_metrics(state, client_arrays(state, client), data["x"].to(device), data["y"].to(device))

    return Algorithm(
        name="fedproto",
        inputs=("x", "y"),
        init=init,
        broadcast=broadcast,
        client_update=client_update,
        aggregate=aggregate,
        evaluate=evaluate,
        evaluate_client=evaluate_client,
    )
