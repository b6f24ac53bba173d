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

import dataclasses

from fedprior.algorithms.base import Algorithm, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.hyperparameters import LocalSgd, with_fields


@with_fields("sgd", LocalSgd, model="convnet", lr=0.01, momentum=0.9, weight_decay=5e-4, lr_decay=0.99)
def central(task: Task, runtime: Runtime, *, sgd: LocalSgd) -> Algorithm:
    """Central Learning: the network trained with cross-entropy on all the training data in one place."""
    algorithm = fedavg(task, runtime, **dataclasses.asdict(sgd))
    return algorithm.with_(name="central")
