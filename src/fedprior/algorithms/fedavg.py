"""FedAvg (McMahan et al., 2017): local SGD on labelled data, example-weighted model averaging."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, ClientUpdate, Reply, State, Task
from fedprior.algorithms.hyperparameters import HeadInitField, Lr, LrDecay, ModelName, Momentum, WeightDecay
from fedprior.algorithms.linear_heads import Sgd, check_features
from fedprior.algorithms.local_training import LossFn, cross_entropy_loss, train_epochs
from fedprior.algorithms.precision import Precision
from fedprior.algorithms.supervised import GlobalModel, model_task, round_lr, sgd
from fedprior.algorithms.supervised_heads import supervised_head_algorithm
from fedprior.algorithms.tensors import model_arrays
from fedprior.errors import ConfigError


def fedavg(
    task: Task,
    *,
    local_epochs: int,
    batch_size: int,
    model: ModelName = "cnn",
    lr: Lr = 0.05,
    momentum: Momentum = 0.0,
    weight_decay: WeightDecay = 0.0,
    lr_decay: LrDecay = 1.0,
    init: HeadInitField = "random",
    device: torch.device = torch.device("cpu"),
    precision: Precision = "fp32",
) -> Algorithm:
    """FedAvg: each sampled client runs local_epochs of SGD, the server takes the example-weighted mean.

    McMahan et al., "Communication-Efficient Learning of Deep Networks from
    Decentralized Data", AISTATS 2017, Algorithm 1: w_{t+1} = sum_k (n_k / n) w^k_{t+1}.
    With model='linear' (a head on frozen features, FST-CBDG's supervised baseline) the
    sampled clients train together as batched tensors; ``init`` applies to it only.
    """
    if model == "linear":
        check_features(task, "algorithm.model")
        if lr_decay != 1.0:
            raise ConfigError("algorithm.lr_decay: applies to image models only (model = 'cnn', 'convnet' or 'resnet18')")
        if precision != "fp32":
            raise ConfigError("run.precision: model = 'linear' trains batched heads on features in fp32 only; accepted: fp32 (bf16 with an image model)")
        return supervised_head_algorithm(
            "fedavg",
            task,
            init=init,
            local_epochs=local_epochs,
            batch_size=batch_size,
            sgd=Sgd(lr, momentum, weight_decay),
            device=device,
        )
    if init != "random":
        raise ConfigError("algorithm.init: 'text' applies to model = 'linear' only")
    net = GlobalModel(model_task(task, model), device=device, precision=precision)
    return net.algorithm("fedavg", local_sgd_update(net, local_epochs, batch_size, lr, momentum, weight_decay, lr_decay=lr_decay))


def local_sgd_update(
    net: GlobalModel,
    local_epochs: int,
    batch_size: int,
    lr: float,
    momentum: float,
    weight_decay: float,
    make_loss: Callable[[nn.Module, State], LossFn] | None = None,
    lr_decay: float = 1.0,
) -> ClientUpdate:
    """The FedAvg client: SGD from the received model; ``make_loss(global_model, client_state)`` may change the local loss.

    The client state comes back unchanged (a method that keeps one wraps this update, as MOON does).
    """

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        local = net.load(message.arrays)
        loss_fn = make_loss(net.load(message.arrays), state) if make_loss else cross_entropy_loss
        x, y = data["x"].to(net.device), data["y"].to(net.device)  # once per update
        metrics = train_epochs(
            local,
            x,
            y,
            epochs=local_epochs,
            batch_size=batch_size,
            optimizer=sgd(local, round_lr(lr, lr_decay, info.round), momentum, weight_decay),
            generator=info.generator(),
            loss_fn=loss_fn,
            precision=net.precision,
        )
        return Reply(model_arrays(local), num_examples=int(data["x"].shape[0]), metrics=metrics), state

    return client_update
