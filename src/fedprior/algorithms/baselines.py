"""FST-CBDG's non-federated baselines on frozen features: CLIP zero-shot and the centralized linear probe.

The FST-CBDG paper is Yan & Guo, "Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model". Its equations, and where each is computed: Eq. 2, CLIP's zero-shot prediction, is the
head W = T, b = 0 of :func:`~fedprior.algorithms.engines.linear_heads.text_head` scored by
:func:`~fedprior.algorithms.engines.linear_heads.head_accuracy` (:func:`zero_shot`). The linear probe has no
equation in the paper: cross-entropy SGD of a linear head on the labelled features of the whole training pool,
:class:`~fedprior.algorithms.engines.supervised_heads.CrossEntropyObjective` in
:func:`~fedprior.algorithms.engines.supervised_heads.supervised_head_algorithm` (:func:`linear_probe`).
"""

from __future__ import annotations

from fedprior.algorithms.base import Algorithm, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.linear_heads import BIAS, WEIGHT, check_features, head_evaluation, text_head
from fedprior.algorithms.engines.supervised_heads import HEAD_SGD, supervised_head_algorithm
from fedprior.algorithms.pieces.hyperparameters import HeadInitField, LocalSgd, with_fields


def zero_shot(task: Task, runtime: Runtime) -> Algorithm:
    """CLIP-ZS: the text-feature head W = T, b = 0, evaluated without any training (the FST-CBDG paper, Sec. 4.1, Eq. 2)."""
    check_features(task)
    text_head(task)

    def init(info: RoundInfo) -> State:
        weight, bias = text_head(task)
        return {WEIGHT: weight, BIAS: bias}

    return Algorithm.evaluation_only("zero-shot", init, head_evaluation(runtime.device))


@with_fields("sgd", LocalSgd, HEAD_SGD, lr=0.01, momentum=0.9, weight_decay=1e-5)
def linear_probe(task: Task, runtime: Runtime, *, init: HeadInitField = "random", sgd: LocalSgd) -> Algorithm:
    """CLIP-FC-Centralized: a linear head trained with labels on all the training data (the FST-CBDG paper, Sec. 4.1).

    Centralized: the runtime gives it one client holding the whole training pool, so
    federation.rounds x federation.local_epochs is its number of epochs.
    """
    return supervised_head_algorithm("linear-probe", task, runtime, sgd, init=init)
