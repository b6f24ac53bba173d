"""``privacy.dp = 'sample'``: record-level DP, each sampled client trains with DP-SGD and keeps its own accountant.

The clients of FedAvg's family (fedavg and its server optimizers fedavgm, fedadagrad, fedadam, fedyogi: McMahan et al.,
AISTATS 2017, Algorithm 1's ClientUpdate) run local SGD with cross-entropy on their labelled images, a loss that is a
mean over examples; under ``'sample'`` that local SGD is DP-SGD (Abadi et al., CCS 2016, Algorithm 1, with Opacus:
:mod:`fedprior.privacy.dp_sgd`) with the same learning rate, decay, momentum and weight decay, so each client's
reply is differentially private with respect to its own examples. The server side is the algorithm's own
(the example-weighted mean, a server optimizer, a robust rule): post-processing of those replies.

Refused, each in one line before any data loads (:func:`check_record_level`): another algorithm (its local loss is not
FedAvg's mean cross-entropy: FedProx's proximal term and MOON's contrastive term are not in Opacus's per-example
gradients, SCAFFOLD corrects the noised step, the semi- and self-supervised methods train on unlabelled views), a
model Opacus cannot take per-example gradients of (BatchNorm: ``convnet``, ``resnet18``; its ModuleValidator
says), ``model = 'linear'`` (FedAvg's batched heads on features), ``run.precision = 'bf16'`` and ``run.compile``.

Each client's accountant is its persistent client state (:data:`HISTORY`: Opacus's history rows sigma, q, steps), so
the steps of every round it takes part in compose, and a checkpoint and its resume carry it. A client reports its
epsilon at ``privacy.delta`` in its reply (``dp_sgd_epsilon``); the server keeps every client's last report in its State
(:data:`EPSILONS`, one float per client, 0 for one never sampled) and reports after each round ``dp_epsilon``, the worst
client's, and ``dp_epsilon_median``, the median over the clients that have trained so far (one never sampled has spent nothing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.supervised import GlobalModel, model_task, round_lr
from fedprior.algorithms.pieces.hyperparameters import LocalSgd
from fedprior.algorithms.pieces.tensors import model_arrays
from fedprior.errors import ConfigError
from fedprior.privacy.config import PrivacyConfig
from fedprior.privacy.dp_sgd import DpSgd, check_model, epsilon, import_opacus, train_private
from fedprior.seeding import derived_seed

RECORD_LEVEL_ALGORITHMS = ("fedavg", "fedavgm", "fedadagrad", "fedadam", "fedyogi")
"""The algorithms whose clients run FedAvg's local SGD on labelled images: what ``privacy.dp = 'sample'`` accepts."""
HISTORY = "dp_sgd.history"
"""Client State key: the client's accountant history (float64, rows sigma, q, steps)."""
EPSILONS = "dp_sgd.epsilon"
"""Server State key: each client's epsilon at delta after the rounds it took part in (float64, one per client)."""
METRIC = "dp_sgd_epsilon"
"""Reply metric: the client's epsilon at delta after this round's steps."""
STAND_IN = Task(num_classes=10, input_shape=(3, 32, 32), class_names=tuple(str(c) for c in range(10)), num_clients=1)
"""A task to build the model on before the data loads (its layers, what Opacus validates, do not depend on the shape)."""


def check_record_level(privacy: PrivacyConfig, algorithm: str, hyperparameters: dict[str, Any], precision: str, compile: bool) -> None:
    """What ``privacy.dp = 'sample'`` refuses (the module docstring), one ConfigError line each, before any data loads."""
    if privacy.dp != "sample":
        return
    if algorithm not in RECORD_LEVEL_ALGORITHMS:
        raise ConfigError(
            f"privacy.dp: 'sample' runs DP-SGD in place of FedAvg's local SGD on labelled images; algorithm '{algorithm}' trains its clients "
            f"otherwise (a loss that is no mean over examples, or no labels); accepted: {', '.join(RECORD_LEVEL_ALGORITHMS)}"
        )
    model = hyperparameters.get("model", LocalSgd.model)
    if model == "linear":
        raise ConfigError(
            "privacy.dp: 'sample' trains an image model with DP-SGD; algorithm.model = 'linear' (batched heads on features) is not one; accepted: 'cnn'"
        )
    if precision != "fp32":
        raise ConfigError(f"run.precision: privacy.dp = 'sample' runs Opacus's DP-SGD in fp32 only; accepted: fp32 (got {precision!r})")
    if compile:
        raise ConfigError("run.compile: privacy.dp = 'sample' trains through Opacus's per-example gradient hooks, which are not compiled; accepted: false")
    import_opacus()
    from fedprior.models import build_model

    check_model(build_model(model, STAND_IN), model)
    try:  # one step at q = 1: the accountant must give a finite epsilon (a multiplier that underflows does not)
        worst = epsilon(torch.tensor([[privacy.noise_multiplier, 1.0, 1.0]], dtype=torch.float64), privacy.delta)
    except (ArithmeticError, ValueError):
        worst = float("inf")
    if not worst < float("inf"):
        raise ConfigError(
            f"privacy.noise_multiplier: {privacy.noise_multiplier:g} gives Opacus's RDP accountant no finite epsilon for one DP-SGD step; raise it"
        )


def noise_generator(info: ClientInfo, device: torch.device) -> torch.Generator:
    """A generator on ``device`` for the client's DP-SGD noise, seeded from the client's stream for the round (``ClientInfo.generator``'s keys)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(derived_seed(info.seed, "client", info.stage, info.round, info.client_id, "dp_sgd", "noise"))
    return generator


def with_record_level_dp(algorithm: Algorithm, privacy: PrivacyConfig, task: Task, hyperparameters: dict[str, Any], runtime: Runtime) -> Algorithm:
    """``algorithm`` whose clients train with DP-SGD under ``privacy`` (the module docstring); itself unless ``privacy.dp = 'sample'``.

    ``hyperparameters``: the run's ``[algorithm]`` fields (FedAvg's local SGD's are read); ``runtime``: its epochs, batch size and device.
    """
    if privacy.dp != "sample":
        return algorithm
    check_record_level(privacy, algorithm.name, hyperparameters, runtime.precision, runtime.compile)
    sgd = LocalSgd(**{f.name: hyperparameters[f.name] for f in dataclasses.fields(LocalSgd) if f.name in hyperparameters})
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device)
    check_model(net.build(), sgd.model)

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        model = net.load(message.arrays)  # a fresh model: Opacus hooks it for this update and unhooks it after
        x, y = data["x"].to(net.device), data["y"].to(net.device)
        dp = DpSgd(privacy.noise_multiplier, privacy.clip_norm, round_lr(sgd.lr, sgd.lr_decay, info.round), sgd.momentum, sgd.weight_decay)
        metrics, history = train_private(
            model,
            x,
            y,
            dp=dp,
            epochs=runtime.local_epochs,
            batch_size=runtime.batch_size,
            history=state.get(HISTORY, torch.zeros((0, 3), dtype=torch.float64)),
            lots_generator=info.generator("dp_sgd", "lots"),
            noise_generator=noise_generator(info, net.device),
        )
        metrics[METRIC] = epsilon(history, privacy.delta)
        return Reply(model_arrays(model, resident=True), num_examples=int(x.shape[0]), metrics=metrics), {**state, HISTORY: history}

    def own(state: State) -> State:
        return {k: v for k, v in state.items() if k != EPSILONS}

    def init(info: RoundInfo) -> State:
        return {**algorithm.init(info), EPSILONS: torch.zeros(task.num_clients, dtype=torch.float64)}

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        epsilons = state[EPSILONS].clone()
        for reply in replies:
            if METRIC in reply.metrics:
                epsilons[reply.client_id] = reply.metrics[METRIC]
        return {**algorithm.aggregate(own(state), replies, info), EPSILONS: epsilons}

    def round_metrics(state: State) -> dict[str, float | str]:
        metrics = algorithm.round_metrics(own(state)) if algorithm.round_metrics is not None else {}
        epsilons = state[EPSILONS]
        trained = epsilons[epsilons > 0]  # the clients whose examples were used so far (the others have spent nothing)
        median = float(torch.quantile(trained, 0.5)) if trained.numel() else 0.0
        return {**metrics, "dp_epsilon": float(epsilons.max()), "dp_epsilon_median": median}

    validate, evaluate_client = algorithm.validate, algorithm.evaluate_client
    return algorithm.with_(
        init=init,
        broadcast=lambda state, info: algorithm.broadcast(own(state), info),
        client_update=client_update,
        client_update_many=None,
        thread_safe_updates=False,
        aggregate=aggregate,
        mean_aggregate=False,  # it reads each reply's epsilon: SecAgg+ cannot run it (fedprior.algorithms.pieces.private_aggregation says why)
        evaluate=lambda state, data: algorithm.evaluate(own(state), data),
        validate=None if validate is None else (lambda state: validate(own(state))),
        evaluate_client=None if evaluate_client is None else (lambda state, client, data: evaluate_client(own(state), client, data)),
        round_metrics=round_metrics,
    )
