"""FedAvg (McMahan et al., 2017): local SGD on labelled data, example-weighted model averaging.

Algorithm 1 of McMahan et al. (2017): the client's local SGD,
:func:`~fedprior.algorithms.engines.supervised.local_sgd_update`; the server's example-weighted mean,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`; on a linear head,
:func:`~fedprior.algorithms.engines.supervised_heads.supervised_head_algorithm`.
"""

from __future__ import annotations

from typing import Any

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.linear_heads import check_features
from fedprior.algorithms.engines.supervised import GlobalModel, local_sgd_update, model_task
from fedprior.algorithms.engines.supervised_heads import supervised_head_algorithm
from fedprior.algorithms.pieces.hyperparameters import HeadInitField, LocalSgd, with_fields, with_shared
from fedprior.algorithms.pieces.robust_aggregation import ROBUST_AGGREGATION, checked_robust_aggregation, with_robust_aggregation
from fedprior.errors import ConfigError


@runtime_options("precision", "compile")
@with_shared(ROBUST_AGGREGATION)
@with_fields("sgd", LocalSgd)
def fedavg(task: Task, runtime: Runtime, *, sgd: LocalSgd, init: HeadInitField = "random", **robust: Any) -> Algorithm:
    """FedAvg: each sampled client runs local_epochs of SGD, the server takes the example-weighted mean.

    McMahan et al., "Communication-Efficient Learning of Deep Networks from
    Decentralized Data", AISTATS 2017, Algorithm 1: w_{t+1} = sum_k (n_k / n) w^k_{t+1}.
    With model='linear' (a head on frozen features, FST-CBDG's supervised baseline) the
    sampled clients train together as batched tensors; ``init`` applies to it only.
    ``robust`` (:func:`~fedprior.algorithms.pieces.robust_aggregation_fields.robust_aggregation`): the rule that replaces
    the mean, the mean itself (``aggregation_rule = 'mean'``), the coordinate-wise median or trimmed mean, Krum or Multi-Krum.
    """
    rule = checked_robust_aggregation(**robust)
    if sgd.model == "linear":  # its fields first, then the task: a config is checked without data (registry.check_without_data)
        if sgd.lr_decay != 1.0:
            raise ConfigError("algorithm.lr_decay: applies to image models only (model = 'cnn', 'convnet', 'resnet18' or 'resnet18-imagenet')")
        if runtime.precision != "fp32":
            raise ConfigError("run.precision: model = 'linear' trains batched heads on features in fp32 only; accepted: fp32 (bf16 with an image model)")
        if runtime.compile:
            raise ConfigError(
                "run.compile: model = 'linear' trains batched heads on features, which are not compiled; accepted: false (true with an image model)"
            )
        check_features(task, "algorithm.model")
        heads = supervised_head_algorithm("fedavg", task, runtime, sgd, init=init)
        return with_robust_aggregation(heads, rule)
    if init != "random":
        raise ConfigError("algorithm.init: 'text' applies to model = 'linear' only")
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device, precision=runtime.precision, compile=runtime.compile)
    update = local_sgd_update(net, runtime, sgd)
    return with_robust_aggregation(net.algorithm("fedavg", update, thread_safe_updates=True, local_step_budget=True), rule)
