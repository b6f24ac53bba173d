"""The semi-supervised split: a class-balanced labeled set and the unlabeled rest, each partitioned on its own.

the FedDB paper ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning"), Sec. 5.1 ("Datasets"): "a balanced labeled dataset is separated from the
original training dataset, with the residual data designated as the unlabeled dataset.
[...] To enrich the unlabeled dataset, we add the samples from the labeled dataset to the
unlabeled dataset after discarding their labels." The authors' code partitions the
labeled and the unlabeled set separately, each with its own Dirichlet draw
(``split_dataset`` called once for each set in its ``src/main.py``; docs/feddb.md).
"""

from __future__ import annotations

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.base import Partition, Partitioner
from fedprior.seeding import derived_seed, numpy_rng


def split_set(role: str, partitioner: Partitioner, labels: np.ndarray) -> list[np.ndarray]:
    """``partitioner.split(labels)`` for the ``role`` ('labeled' or 'unlabeled') set; a refusal names the set and its size."""
    try:
        return partitioner.split(labels)
    except ConfigError as error:
        raise ConfigError(f"the {role} set ({labels.size} samples): {error}") from None


class LabeledSplitPartitioner:
    """Draw ``num_labeled`` class-balanced samples as the labeled set; partition labeled and unlabeled sets separately.

    Parameters
    ----------
    num_labeled:
        Size of the labeled set over all clients (``partition.num_labeled``), drawn
        class-balanced: ``num_labeled // K`` samples of each of the ``K`` classes present,
        and the remainder (if ``K`` does not divide it) one more each for randomly chosen
        classes. FedDB: 4000 (CIFAR-10, SVHN non-IID), 1000 (SVHN IID), 10000 (CIFAR-100).
    labeled, unlabeled:
        The partitioners of the labeled and of the unlabeled set; they must have the same
        number of clients. Give them different seeds (``with_dirichlet`` does) so that
        their draws are independent, as in FedDB.
    seed:
        Seed of the ``("partition", "labeled-split")`` stream that picks the labeled samples.
    add_labeled_to_unlabeled:
        FedDB's choice (the default): each client's unlabeled pool also holds its own
        labeled samples, with the labels dropped. When False the two roles are disjoint.
    num_unlabeled:
        Keep only this many of the samples that are not labeled, drawn uniformly at random
        (stream ``("partition", "unlabeled-subset")``) before they are partitioned
        (``partition.num_unlabeled``); 0 keeps them all (the paper). A budget knob for small
        machines: the rest of the training set is then held by no client.

    ``partition(labels)`` returns a :class:`~fedprior.partition.base.Partition` with roles
    ``"labeled"`` and ``"unlabeled"``, each one sorted ``int64`` array of positions into
    ``labels`` per client. Every sample is in exactly one client's pools (with ``num_unlabeled``:
    every labeled and every kept sample).
    """

    def __init__(
        self, num_labeled: int, labeled: Partitioner, unlabeled: Partitioner, seed: int = 0, add_labeled_to_unlabeled: bool = True, num_unlabeled: int = 0
    ) -> None:
        if isinstance(num_labeled, bool) or not isinstance(num_labeled, int) or num_labeled < 1:
            raise ConfigError(f"partition.num_labeled: must be a positive integer, got {num_labeled!r}")
        if isinstance(num_unlabeled, bool) or not isinstance(num_unlabeled, int) or num_unlabeled < 0:
            raise ConfigError(f"partition.num_unlabeled: must be a non-negative integer, got {num_unlabeled!r}")
        if labeled.num_clients != unlabeled.num_clients:
            raise ConfigError(
                f"federation.num_clients: the labeled partitioner has {labeled.num_clients} clients but the "
                f"unlabeled one has {unlabeled.num_clients}; they must be the same"
            )
        self.num_labeled = num_labeled
        self.labeled = labeled
        self.unlabeled = unlabeled
        self.seed = seed
        self.add_labeled_to_unlabeled = bool(add_labeled_to_unlabeled)
        self.num_unlabeled = num_unlabeled
        self.num_clients = labeled.num_clients

    @classmethod
    def with_dirichlet(
        cls,
        num_clients: int,
        num_labeled: int,
        alpha: float,
        seed: int = 0,
        *,
        min_labeled: int = 0,
        min_unlabeled: int = 0,
        balance: bool = False,
        add_labeled_to_unlabeled: bool = True,
    ) -> LabeledSplitPartitioner:
        """FedDB's setting: both sets partitioned by independent Dirichlet draws.

        The two draws use seeds derived from ``seed`` for the roles "labeled" and
        "unlabeled"; ``min_labeled`` and ``min_unlabeled`` are the ``min_size`` of each
        (``balance=True``, the authors' code, asks for at least one sample in each).
        """
        from fedprior.partition.dirichlet import DirichletPartitioner

        def dirichlet(role: str, size: int) -> DirichletPartitioner:
            return DirichletPartitioner(num_clients, alpha, derived_seed(seed, "partition", role), min_size=size, balance=balance)

        return cls(
            num_labeled, dirichlet("labeled", min_labeled), dirichlet("unlabeled", min_unlabeled), seed=seed, add_labeled_to_unlabeled=add_labeled_to_unlabeled
        )

    def labeled_indices(self, labels: np.ndarray) -> np.ndarray:
        """The sorted positions of the class-balanced labeled set."""
        labels = np.asarray(labels)
        classes, sizes = np.unique(labels, return_counts=True)
        if self.num_labeled >= labels.size:
            raise ConfigError(
                f"partition.num_labeled: {self.num_labeled} labeled samples leave none of the {labels.size} training samples unlabeled; use fewer"
            )
        rng = numpy_rng(self.seed, "partition", "labeled-split")
        per_class = np.full(classes.size, self.num_labeled // classes.size, dtype=np.int64)
        per_class[rng.choice(classes.size, self.num_labeled % classes.size, replace=False)] += 1
        short = np.flatnonzero(per_class > sizes)
        if short.size:
            k = short[0]
            raise ConfigError(
                f"partition.num_labeled: {self.num_labeled} class-balanced labeled samples need {per_class[k]} of "
                f"class {classes[k]}, which has only {sizes[k]}; use at most {int(sizes.min()) * classes.size}"
            )
        chosen = [rng.permutation(np.flatnonzero(labels == c))[:count] for c, count in zip(classes, per_class, strict=True)]
        return np.sort(np.concatenate(chosen)).astype(np.int64)

    def partition(self, labels: np.ndarray) -> Partition:
        labels = np.asarray(labels)
        labeled_pool = self.labeled_indices(labels)
        mask = np.ones(labels.size, dtype=bool)
        mask[labeled_pool] = False
        unlabeled_pool = np.flatnonzero(mask).astype(np.int64)
        if self.num_unlabeled:
            if self.num_unlabeled > unlabeled_pool.size:
                raise ConfigError(
                    f"partition.num_unlabeled: {self.num_unlabeled} unlabeled samples asked but only "
                    f"{unlabeled_pool.size} are not labeled; use at most {unlabeled_pool.size} (or 0 for all)"
                )
            rng = numpy_rng(self.seed, "partition", "unlabeled-subset")
            unlabeled_pool = np.sort(rng.choice(unlabeled_pool, self.num_unlabeled, replace=False)).astype(np.int64)
        labeled = [labeled_pool[part] for part in split_set("labeled", self.labeled, labels[labeled_pool])]
        unlabeled = [unlabeled_pool[part] for part in split_set("unlabeled", self.unlabeled, labels[unlabeled_pool])]
        if self.add_labeled_to_unlabeled:
            unlabeled = [np.union1d(u, lab).astype(np.int64) for u, lab in zip(unlabeled, labeled, strict=True)]
        return Partition({"labeled": tuple(labeled), "unlabeled": tuple(unlabeled)})
