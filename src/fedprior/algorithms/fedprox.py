"""FedProx (Li et al., 2020): FedAvg with a proximal term that keeps local models near the global one.

Equations (Li et al., MLSys 2020): Eq. 2, the proximal local objective, :func:`proximal_loss`; the
client loop and the average are FedAvg's (:func:`~fedprior.algorithms.engines.supervised.local_sgd_update`,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`). ``server_optimizer`` puts FedAvgM, FedAdagrad,
FedAdam or FedYogi (Reddi et al., ICLR 2021, Algorithm 2) on the server: :func:`~fedprior.algorithms.pieces.server_optimizers.with_server_optimizer`.
"""

from __future__ import annotations

from typing import Annotated, Any

import torch
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.supervised import GlobalModel, local_sgd_update, model_task
from fedprior.algorithms.pieces.hyperparameters import LocalSgd, with_fields, with_shared
from fedprior.algorithms.pieces.local_training import LossFn, cross_entropy_loss
from fedprior.algorithms.pieces.robust_aggregation import ROBUST_AGGREGATION, checked_robust_aggregation, with_robust_aggregation
from fedprior.algorithms.pieces.robust_aggregation_fields import NAMES as ROBUST_NAMES
from fedprior.algorithms.pieces.server_optimizers import SERVER_OPTIMIZATION, checked_server_optimizer, with_server_optimizer

Mu = Annotated[float, Field(ge=0, description="weight mu of the proximal term (mu/2)||w - w_global||^2")]


def proximal_loss(global_model: nn.Module, mu: float) -> LossFn:
    """h_k(w; w^t) = F_k(w) + (mu/2) ||w - w^t||^2 (Li et al., MLSys 2020, Eq. 2)."""
    anchors = [p.detach().clone() for p in global_model.parameters()]

    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        drift = sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchors, strict=True))
        return cross_entropy_loss(model, x, y) + 0.5 * mu * drift

    return loss


@runtime_options("precision", "compile")
@with_shared((*SERVER_OPTIMIZATION, *ROBUST_AGGREGATION))
@with_fields("sgd", LocalSgd)
def fedprox(task: Task, runtime: Runtime, *, sgd: LocalSgd, mu: Mu = 0.01, **server: Any) -> Algorithm:
    """FedProx: FedAvg whose clients minimize CE + (mu/2)||w - w_global||^2 (Li et al., 2020, Eq. 2).

    ``server`` (:func:`~fedprior.algorithms.pieces.server_optimizers.server_optimization`): the server's step
    on the averaged model, FedAvg's (``server_optimizer = 'none'``) or FedAvgM's, FedAdagrad's, FedAdam's, FedYogi's;
    and the rule that replaces the average (:func:`~fedprior.algorithms.pieces.robust_aggregation_fields.robust_aggregation`), before the server's step.
    """
    rule = checked_robust_aggregation(**{k: server.pop(k) for k in ROBUST_NAMES})
    optimizer = checked_server_optimizer(**server)
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device, precision=runtime.precision, compile=runtime.compile)
    update = local_sgd_update(net, runtime, sgd, make_loss=lambda g, _: proximal_loss(g, mu))
    return with_server_optimizer(
        with_robust_aggregation(net.algorithm("fedprox", update, thread_safe_updates=True, local_step_budget=True), rule), optimizer, net.parameter_names()
    )
