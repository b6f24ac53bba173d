"""Central Learning: the same network trained on the pooled training data, FedBM's upper reference (Tables I-V of
the FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning").

A centralized baseline (``AlgorithmSpec(centralized=True)``): the runtime gives it one
client holding every training image, so ``federation.rounds x federation.local_epochs``
is its number of epochs, and its "round" is FedAvg's local SGD with the optimizer
settings of FedBM's code (SGD, lr 0.01, momentum 0.9, weight decay 5e-4, lr x 0.99 per round).

No paper equation: Central Learning is the control that pools the data. What it computes, and where:
cross-entropy SGD on one client holding every training image, :func:`~fedprior.algorithms.engines.supervised.local_sgd_update`
(through :func:`~fedprior.algorithms.fedavg.fedavg`), the lr decayed per round by
:func:`~fedprior.algorithms.engines.supervised.round_lr`; its test metrics,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.evaluate`.
"""

from __future__ import annotations

from fedprior.algorithms.base import Algorithm, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.hyperparameters import Lr, LrDecay, ModelName, Momentum, WeightDecay


def central(
    task: Task,
    runtime: Runtime,
    *,
    model: ModelName = "convnet",
    lr: Lr = 0.01,
    momentum: Momentum = 0.9,
    weight_decay: WeightDecay = 5e-4,
    lr_decay: LrDecay = 0.99,
) -> Algorithm:
    """Central Learning: the network trained with cross-entropy on all the training data in one place."""
    algorithm = fedavg(task, runtime, model=model, lr=lr, momentum=momentum, weight_decay=weight_decay, lr_decay=lr_decay)
    return algorithm.with_(name="central")
