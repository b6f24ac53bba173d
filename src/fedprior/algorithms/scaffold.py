"""SCAFFOLD (Karimireddy et al., 2020): local steps corrected by control variates; c_i is per-client state.

Equations (Karimireddy et al., ICML 2020, Algorithm 1), and where each is computed:

- line 10, the corrected local step y <- y - eta_l (g_i(y) - c_i + c): ``correct_gradients`` inside
  :func:`scaffold`, run after each backward pass by :func:`~fedprior.algorithms.pieces.local_training.train_epochs`;
- line 12 (option II), the new control variate c_i+, and line 13, the upload (dy, dc): ``client_update`` inside :func:`scaffold`;
- lines 16-17, the server's steps on x and c: ``aggregate`` inside :func:`scaffold` (the unweighted mean of
  the models: :func:`~fedprior.algorithms.pieces.tensors.weighted_mean`).

``server_optimizer`` puts FedAvgM, FedAdagrad, FedAdam or FedYogi (Reddi et al., ICLR 2021, Algorithm 2) on the
server: it steps x by Delta = x + mean_S(dy) - x (line 16 with eta_g = 1), c is updated as line 17 says
(:func:`~fedprior.algorithms.pieces.server_optimizers.with_server_optimizer`).

Where it departs from the paper: an optional per-round lr decay (:func:`~fedprior.algorithms.engines.supervised.round_lr`)
and weight decay; integer buffers (BatchNorm's ``num_batches_tracked``) take the first reply's value, not a mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import torch
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task, runtime_options
from fedprior.algorithms.engines.supervised import GlobalModel, model_task, round_lr, sgd
from fedprior.algorithms.pieces.hyperparameters import LocalSgd, with_fields, with_shared
from fedprior.algorithms.pieces.local_training import train_epochs
from fedprior.algorithms.pieces.server_optimizers import SERVER_OPTIMIZATION, checked_server_optimizer, with_server_optimizer
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, device_of, model_arrays, to_device, weighted_mean, with_prefix
from fedprior.errors import ConfigError

CONTROL = "control."
GlobalLr = Annotated[float, Field(gt=0, description="server step size eta_g on the mean model change")]


@runtime_options("precision")
@with_shared(SERVER_OPTIMIZATION)
@with_fields("settings", LocalSgd, ("model", "lr", "weight_decay", "lr_decay"))
def scaffold(task: Task, runtime: Runtime, *, settings: LocalSgd, global_lr: GlobalLr = 1.0, **server: Any) -> Algorithm:
    """SCAFFOLD with option II control variates (Karimireddy et al., ICML 2020, Algorithm 1).

    Client i, from the global model x with server control c and its own c_i:
    K local steps y <- y - lr (g_i(y) - c_i + c); then
    c_i+ = c_i - c + (x - y) / (K lr)                          (Algorithm 1, line 12, option II),
    and it uploads dy = y - x, dc = c_i+ - c_i. The server, over the sampled set S of N clients:
    x <- x + eta_g mean_S(dy),  c <- c + (|S| / N) mean_S(dc)   (lines 16-17).
    Plain SGD (no momentum), as in the paper's analysis. c and c_i start at zero.
    ``server`` (:func:`~fedprior.algorithms.pieces.server_optimizers.server_optimization`): a server optimizer in
    place of the step eta_g on x (then ``global_lr`` stays 1; ``server_lr`` is its step size).
    """
    optimizer = checked_server_optimizer(**server)
    if optimizer.rule != "none" and global_lr != 1.0:
        raise ConfigError(
            f"algorithm.global_lr: is plain SCAFFOLD's server step; with algorithm.server_optimizer = {optimizer.rule!r} "
            "the server's step size is algorithm.server_lr; accepted for global_lr: 1.0"
        )
    net = GlobalModel(model_task(task, settings.model), device=runtime.device, precision=runtime.precision)
    param_names = [name for name, _ in net.build().named_parameters()]
    num_clients = task.num_clients

    def zeros_like_params(arrays: State) -> State:
        return {name: torch.zeros_like(arrays[MODEL + name]) for name in param_names}

    def init(info: RoundInfo) -> State:
        state = net.init(info)
        return {**state, **add_prefix(zeros_like_params(state), CONTROL)}

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        return Broadcast(arrays=dict(state))

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        x = to_device(message.arrays, runtime.device)
        c = with_prefix(x, CONTROL)
        c_i = to_device(with_prefix(state, CONTROL), runtime.device) or zeros_like_params(x)
        local = net.receive(x)  # on an accelerator the resident model, the broadcast copied in
        params = dict(local.named_parameters())

        correction = {n: c[n] - c_i[n] for n in param_names}  # the same every step: computed once

        def correct_gradients() -> None:
            for name, p in params.items():
                assert p.grad is not None  # called after backward: every parameter of the model has a gradient
                p.grad.add_(correction[name])

        step_lr = round_lr(settings.lr, settings.lr_decay, info.round)
        metrics = train_epochs(
            local,
            data["x"].to(runtime.device),
            data["y"].to(runtime.device),
            epochs=runtime.local_epochs,
            batch_size=runtime.batch_size,
            optimizer=sgd(local, step_lr, 0.0, settings.weight_decay),
            generator=info.generator(),
            after_backward=correct_gradients,
            precision=runtime.precision,
        )
        steps = metrics["steps"]
        new_c_i = {n: c_i[n] - c[n] + (x[MODEL + n] - params[n].detach()) / (steps * step_lr) for n in param_names}
        delta_c = {n: new_c_i[n] - c_i[n] for n in param_names}
        # the reply (y, dc) and c_i+ stay on the run's device: the server averages there, the next round reads c_i+ there
        reply = Reply({**model_arrays(local, resident=True), **add_prefix(delta_c, "delta_control.")}, int(data["x"].shape[0]), metrics)
        return reply, add_prefix(new_c_i, CONTROL)

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        state = to_device(state, device_of(replies[0].arrays))  # x and c go where the replies are (the run's device, or the host)
        new = dict(state)
        # Algorithm 1, line 16: x + eta_g * (1/|S|) sum(y_i - x), an unweighted mean; integer buffers (BatchNorm's
        # num_batches_tracked) are not averaged: they take the first reply's value (tensors.weighted_mean)
        mean_y = weighted_mean([with_prefix(r.arrays, MODEL) for r in replies], [1.0] * len(replies))
        for name, value in mean_y.items():
            old = state[MODEL + name]
            new[MODEL + name] = old + global_lr * (value - old) if value.is_floating_point() else value
        for name in param_names:
            total_dc = torch.stack([r.arrays["delta_control." + name] for r in replies]).sum(0)
            new[CONTROL + name] = state[CONTROL + name] + total_dc / num_clients
        return new

    algorithm = net.algorithm("scaffold", client_update, init=init, broadcast=broadcast, aggregate=aggregate, thread_safe_updates=True)
    return with_server_optimizer(algorithm, optimizer, [MODEL + name for name in param_names])
