"""FixMatch within FedAvg, and FedAvg on the labeled data alone: FedDB's first two baselines (the FedDB
paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 5.1).

- ``fixmatch``: FixMatch (Sohn et al., NeurIPS 2020) on every client, FedAvg on the
  server: hard pseudo-labels of the weak view where the confidence reaches tau, the
  cross-entropy of the strong view against them (Eq. 3-6 of the FedDB paper). With
  ``dpl = true`` it is "FixMatch-FedDPL": the pseudo-labels come from the debiased
  prediction (Eq. 14, Algorithm 1) - the one switch of the paper's X-FedDPL rows.
- ``fedavg-labeled``: FedAvg (McMahan et al., 2017) "applied in a constrained scenario
  where each client utilizes only the small labeled dataset" (the FedDB paper, Sec. 5.1). Its
  clients are never given the unlabeled images; the optimizer, the network and the
  full-batch local steps are FedDB's, so the comparison is paired.

Both are :mod:`fedprior.algorithms.engines.semi_supervised` with its default steps. With
``labeled_batch_size`` > 0 both train with FixMatch's own mini-batches instead of the paper's E
full-batch steps a round (Sohn et al. 2020, Algorithm 1 and Sec. 4: B labeled and mu B unlabeled
images a step, pseudo-labeled per step; ``fedavg-labeled``: the B labeled images alone), for
``local_steps`` steps a round: the recipe of the FedDB tables' central capability and budget
controls (:meth:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised._train_minibatches`).

Equations (the FedDB paper), and where each is computed: Eq. 3-4, the pseudo-labels,
:func:`~fedprior.algorithms.pieces.pseudo_labels.hard_labels`; Eq. 14 (``dpl``),
:func:`~fedprior.algorithms.pieces.pseudo_labels.debias`; Eq. 2-6, the local loss, and Eq. 7,
the average: :class:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised`.
"""

from __future__ import annotations

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.semi_supervised import semi_supervised_algorithm
from fedprior.algorithms.pieces.hyperparameters import SUPERVISED, Dpl, LabeledBatchSize, LocalSteps, SemiSupervisedFields, UnlabeledRatio, with_fields


@runtime_options("precision", "compile")
@with_fields("shared", SemiSupervisedFields)
def fixmatch(
    task: Task,
    runtime: Runtime,
    *,
    dpl: Dpl = False,
    labeled_batch_size: LabeledBatchSize = 0,
    unlabeled_ratio: UnlabeledRatio = 7,
    local_steps: LocalSteps = 0,
    shared: SemiSupervisedFields,
) -> Algorithm:
    """FixMatch within FedAvg (Sohn et al. 2020); dpl = true gives FixMatch-FedDPL (the FedDB paper, Sec. 5.1)."""
    minibatches = {"labeled_batch_size": labeled_batch_size, "unlabeled_ratio": unlabeled_ratio, "local_steps": local_steps}
    return semi_supervised_algorithm("fixmatch", task, shared, runtime, dpl=dpl, minibatches=minibatches)


@runtime_options("precision", "compile")
@with_fields("shared", SemiSupervisedFields, SUPERVISED)
def fedavg_labeled(
    task: Task, runtime: Runtime, *, labeled_batch_size: LabeledBatchSize = 0, local_steps: LocalSteps = 0, shared: SemiSupervisedFields
) -> Algorithm:
    """FedAvg on each client's labeled data only (McMahan et al. 2017; FedDB's supervised baseline)."""
    minibatches = {"labeled_batch_size": labeled_batch_size, "local_steps": local_steps}
    return semi_supervised_algorithm("fedavg-labeled", task, shared, runtime, use_unlabeled=False, minibatches=minibatches)
