"""FedDyn (Acar et al., "Federated Learning Based on Dynamic Regularization", ICLR 2021, Algorithm 1).

Client k, from the server model theta^{t-1}, with its own gradient state g_k (zero at first):

    minimize  L_k(theta) - <g_k, theta> + (alpha / 2) ||theta - theta^{t-1}||^2     (Algorithm 1: the device's model)
    then      g_k <- g_k - alpha (theta_k^t - theta^{t-1})                         (its gradient state)

and the server, over the sampled set P_t of the m clients,

    h^t     = h^{t-1} - alpha (1/m) sum_{k in P_t} (theta_k^t - theta^{t-1})        (server state h)
    theta^t = (1/|P_t|) sum_{k in P_t} theta_k^t - (1/alpha) h^t                   (server model)

over the parameters; BatchNorm statistics are averaged. alpha = 0.01 as FedBM sets it
("0.01 in FedDyn as suggested in the official implementation", Sec. IV-B). The FedETF
code FedBM follows adds the norm ||theta - theta^{t-1}|| instead of its half square: the
paper's square is used here. g_k is client state; h is server state.

Equations (Acar et al., ICLR 2021, Algorithm 1), and where each is computed: the client's dynamically
regularized objective, :func:`dynamic_loss` (minimized by
:meth:`~fedprior.algorithms.engines.body_training.LocalTraining.fit`); the update of its gradient state g_k,
``client_update`` inside :func:`feddyn`; the server's h and its corrected average, :func:`server_update`.
Where it departs from the paper: the local argmin is approximated by ``local_epochs`` of the shared
optimizer, and the entries that are not parameters (BatchNorm statistics) get the example-weighted mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.engines.supervised import model_task
from fedprior.algorithms.pieces.hyperparameters import BodyTraining
from fedprior.algorithms.pieces.local_training import cross_entropy_loss
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, device_of, model_arrays, to_device, weighted_mean, with_prefix

GRAD, H = "grad.", "h."
Alpha = Annotated[float, Field(gt=0, description="FedDyn's alpha (FedBM: 0.01)")]


def dynamic_loss(global_params: dict[str, torch.Tensor], grad: dict[str, torch.Tensor], alpha: float):
    """L_k(theta) - <g_k, theta> + (alpha/2) ||theta - theta^{t-1}||^2 (Algorithm 1: the device's model) as a local loss."""

    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        linear: torch.Tensor | float = 0.0
        proximal: torch.Tensor | float = 0.0
        for name, p in model.named_parameters():
            linear = linear + (grad[name].to(p.device) * p).sum()
            proximal = proximal + ((p - global_params[name].to(p.device)) ** 2).sum()
        return cross_entropy_loss(model, x, y) - linear + 0.5 * alpha * proximal

    return loss


def server_update(
    state: State, models: Sequence[dict[str, torch.Tensor]], params: list[str], alpha: float, num_clients: int, weights: Sequence[float]
) -> State:
    """Lines 9-10 on the parameters; the other entries (BatchNorm statistics) get the example-weighted mean."""
    new = dict(state)
    mean = weighted_mean(list(models), weights)
    for name in mean:
        new[MODEL + name] = mean[name]
    for name in params:
        theta = state[MODEL + name]
        plain = torch.stack([m[name] for m in models]).mean(0)
        new[H + name] = state[H + name] - alpha / num_clients * torch.stack([m[name] - theta for m in models]).sum(0)
        new[MODEL + name] = plain - new[H + name] / alpha
    return new


@trains_body
def feddyn(task: Task, runtime: Runtime, *, body: BodyTraining, alpha: Alpha = 0.01) -> Algorithm:
    """FedDyn: each client's loss is linearly corrected and proximally tied to the server model (Acar et al., 2021)."""
    model, training = body.model, local_training(body, runtime)
    net = training.global_model(model_task(task, model))
    params = [name for name, _ in net.build().named_parameters()]

    def init(info: RoundInfo) -> State:
        state = net.init(info)
        return {**state, **{H + n: torch.zeros_like(state[MODEL + n]) for n in params}}

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        # theta^{t-1} and g_k on the run's device once per update (the loss reads them every step); g_k stays there
        theta = to_device(with_prefix(message.arrays, MODEL), training.device)
        grad = to_device(with_prefix(state, GRAD), training.device) or {n: torch.zeros_like(theta[n]) for n in params}
        local = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        metrics = training.fit(local, data, info, loss_fn=dynamic_loss(theta, grad, alpha))
        trained = dict(local.named_parameters())
        new_grad = {n: grad[n] - alpha * (trained[n].detach() - theta[n]) for n in params}
        return Reply(model_arrays(local, resident=True), int(data["x"].shape[0]), metrics), add_prefix(new_grad, GRAD)

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        models = [with_prefix(r.arrays, MODEL) for r in replies]
        state = to_device(state, device_of(models[0]))  # theta and h go where the replies are (the run's device, or the host)
        return server_update(state, models, params, alpha, task.num_clients, [r.num_examples for r in replies])

    return net.algorithm(
        "feddyn",
        client_update,
        init=init,
        aggregate=aggregate,
        evaluate=lambda state, data: training.evaluate(net.receive(state, "evaluate"), data),
        thread_safe_updates=True,
    )
