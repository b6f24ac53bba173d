"""Partition schemes: shards, Dirichlet (LDA), class windows, the labeled/unlabeled split, the factory."""

from __future__ import annotations

import numpy as np
import pytest

from fedprior.errors import ConfigError
from fedprior.partition.base import Partition
from fedprior.partition.config import PartitionConfig
from fedprior.partition.dirichlet import DirichletPartitioner
from fedprior.partition.factory import SCHEMES, make_partitioner, scheme_partitioner
from fedprior.partition.iid import IidPartitioner
from fedprior.partition.labeled_split import LabeledSplitPartitioner
from fedprior.partition.quantity import QuantitySkewPartitioner, client_sizes, size_weights
from fedprior.partition.shard import ShardPartitioner
from fedprior.partition.window import ClassWindowPartitioner, window_classes


def balanced_labels(num_classes: int = 10, per_class: int = 60, seed: int = 0) -> np.ndarray:
    """Shuffled labels with ``per_class`` samples of each class."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(num_classes), per_class))


def skewed_labels(seed: int = 1) -> np.ndarray:
    """Shuffled labels of 10 classes of sizes 30, 40, ..., 120 (630 samples)."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(10), 30 + 10 * np.arange(10)))


def counts_of(labels: np.ndarray, parts: list[np.ndarray], num_classes: int = 10) -> np.ndarray:
    return np.array([np.bincount(labels[p], minlength=num_classes) for p in parts])


def assert_well_formed(parts: list[np.ndarray], num_samples: int, num_clients: int, covers: bool = True) -> None:
    """Sorted int64 positions, disjoint across clients, in range; every sample used when ``covers``."""
    assert len(parts) == num_clients
    for part in parts:
        assert part.dtype == np.int64
        assert np.all(np.diff(part) > 0), "positions must be sorted and unique"
        if part.size:
            assert 0 <= part[0] and part[-1] < num_samples
    joined = np.concatenate(parts)
    assert np.unique(joined).size == joined.size, "clients must not share samples"
    if covers:
        assert joined.size == num_samples


SCHEME_CASES = {
    "iid": lambda seed: IidPartitioner(12, seed=seed),
    "shard": lambda seed: ShardPartitioner(12, 3, seed=seed),
    "dirichlet": lambda seed: DirichletPartitioner(12, 0.3, seed=seed),
    "dirichlet-min-size": lambda seed: DirichletPartitioner(12, 0.3, seed=seed, min_size=20),
    "dirichlet-balance": lambda seed: DirichletPartitioner(12, 0.3, seed=seed, balance=True),
    "window": lambda seed: ClassWindowPartitioner(12, 3, seed=seed),
    "quantity-linear": lambda seed: QuantitySkewPartitioner(12, "linear", 5.0, seed=seed),
    "quantity-exponential": lambda seed: QuantitySkewPartitioner(12, "exponential", 20.0, seed=seed),
    "quantity-power-law": lambda seed: QuantitySkewPartitioner(12, "power-law", 20.0, seed=seed),
}


@pytest.mark.parametrize("case", sorted(SCHEME_CASES))
def test_every_scheme_is_disjoint_deterministic_and_seeded(case):
    labels = skewed_labels()
    make = SCHEME_CASES[case]
    parts = make(0).split(labels)
    assert_well_formed(parts, labels.size, 12, covers=case != "window")
    again = make(0).split(labels)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True)), "same seed must give the same partition"
    other = make(1).split(labels)
    assert any(not np.array_equal(a, b) for a, b in zip(parts, other, strict=True)), "another seed must give another partition"


# ---------------------------------------------------------------- shards (the FST-CBDG paper, Sec. 4.1)


def test_shards_follow_the_label_sort_when_they_do_not_straddle_classes():
    # 10 classes x 60, 10 clients x 2 shards: 20 shards of 30, three per class boundary-aligned.
    labels = balanced_labels(10, 60)
    parts = ShardPartitioner(10, 2, seed=3).split(labels)
    counts = counts_of(labels, parts)
    assert (counts.sum(axis=1) == 60).all()
    assert ((counts > 0).sum(axis=1) <= 2).all(), "a client sees at most s classes"
    assert np.isin(counts, [0, 30, 60]).all(), "every shard lies inside one class of the sorted data"
    # Random shard choice: not every client gets two shards of consecutive classes.
    assert len({tuple(np.flatnonzero(row)) for row in counts}) > 3


def test_shard_sizes_differ_by_at_most_one_and_every_sample_is_used():
    labels = np.random.default_rng(0).integers(0, 7, size=1001)
    partitioner = ShardPartitioner(10, 3, seed=0)
    parts = partitioner.split(labels)
    assert_well_formed(parts, 1001, 10)
    sizes = np.array([p.size for p in parts])
    # 30 shards of 33 or 34 samples; a client holds three of them.
    assert sizes.min() >= 99 and sizes.max() <= 102


def test_one_shard_per_client_on_sorted_data_gives_one_class_each():
    labels = balanced_labels(5, 40)
    parts = ShardPartitioner(5, 1, seed=0).split(labels)
    counts = counts_of(labels, parts, 5)
    assert sorted(np.flatnonzero(row)[0] for row in counts) == list(range(5))
    assert (counts.max(axis=1) == 40).all()


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_shard_count_must_be_a_positive_integer(bad):
    with pytest.raises(ConfigError, match=r"partition\.shards.*" + str(bad).replace(".", r"\.")):
        ShardPartitioner(10, bad)


def test_more_shards_than_samples_names_the_field():
    with pytest.raises(ConfigError, match=r"partition\.shards: 10 clients x 5 shards = 50 shards but only 40"):
        ShardPartitioner(10, 5).split(balanced_labels(4, 10))


# ---------------------------------------------------------------- Dirichlet / LDA


def test_dirichlet_concentration_controls_heterogeneity():
    labels = balanced_labels(10, 200)
    classes = {}
    for alpha in (0.05, 100.0):
        counts = counts_of(labels, DirichletPartitioner(20, alpha, seed=0).split(labels))
        classes[alpha] = (counts > 0).sum(axis=1).mean()
        if alpha == 100.0:
            # Near-IID: every client close to the global 1/10 per class, sizes close to 100.
            share = counts / counts.sum(axis=1, keepdims=True)
            assert np.abs(share - 0.1).max() < 0.08
            assert counts.sum(axis=1).min() > 60 and counts.sum(axis=1).max() < 140
    assert classes[0.05] < 3.5 and classes[100.0] == 10


def test_dirichlet_min_size_is_honored():
    labels = balanced_labels(10, 60)
    first_draw = [p.size for p in DirichletPartitioner(20, 0.1, seed=4).split(labels)]
    assert min(first_draw) < 10, "precondition: the first draw leaves a client with fewer than 10 samples"
    parts = DirichletPartitioner(20, 0.1, seed=4, min_size=10).split(labels)
    assert_well_formed(parts, labels.size, 20)
    assert min(p.size for p in parts) >= 10


def test_dirichlet_min_size_that_cannot_be_met_fails_clearly():
    labels = balanced_labels(10, 60)
    with pytest.raises(ConfigError, match=r"partition\.min_size: 20 clients x 31 samples"):
        DirichletPartitioner(20, 0.5, min_size=31).split(labels)
    # Possible in principle (exactly 30 each) but never drawn: a bounded number of tries, then a clear error.
    with pytest.raises(ConfigError, match=r"partition\.min_size: no Dirichlet draw with alpha=0\.01.*in 5 tries"):
        DirichletPartitioner(20, 0.01, min_size=30, max_tries=5).split(labels)


def test_a_capped_draw_that_leaves_a_client_empty_names_balance_and_the_set_not_min_size():
    """FedDB's embedded 250 labels over 100 clients with the code's capped draw (deviation D16): lowering min_size
    cannot help, so the error says what can, and which of the two sets failed."""
    labels = balanced_labels(10, 100)
    partitioner = LabeledSplitPartitioner.with_dirichlet(100, 250, 0.3, balance=True)
    with pytest.raises(ConfigError, match=r"^the labeled set \(250 samples\): partition\.balance: .*set partition\.balance = false") as caught:
        partitioner.partition(labels)
    assert "lower partition.min_size" not in str(caught.value)


def test_dirichlet_balance_variant_stops_giving_to_full_clients():
    labels = skewed_labels()
    num_clients = 15
    parts = DirichletPartitioner(num_clients, 0.1, seed=2, balance=True).split(labels)
    assert_well_formed(parts, labels.size, num_clients)
    counts = counts_of(labels, parts)
    assert counts.sum(axis=1).min() >= 1, "the code's variant redraws until every client has a sample"
    cap = labels.size / num_clients
    held_before = np.cumsum(counts, axis=1) - counts  # samples held before class k is dealt (classes in label order)
    assert (held_before[counts > 0] < cap).all(), "a client at or above n/num_clients must get no more classes"


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf"), "0.1"])
def test_dirichlet_alpha_must_be_positive(bad):
    with pytest.raises(ConfigError, match=r"partition\.alpha: must be a positive finite number, got"):
        DirichletPartitioner(10, bad)


def test_dirichlet_min_size_must_be_non_negative():
    with pytest.raises(ConfigError, match=r"partition\.min_size: .* got -1"):
        DirichletPartitioner(10, 0.5, min_size=-1)


@pytest.mark.parametrize("bad", [0, -3, 2.0])
def test_client_count_must_be_a_positive_integer(bad):
    for make in (IidPartitioner, lambda n: ShardPartitioner(n, 2), lambda n: DirichletPartitioner(n, 0.5), lambda n: ClassWindowPartitioner(n, 2)):
        with pytest.raises(ConfigError, match=r"federation\.num_clients: must be a positive integer, got"):
            make(bad)


@pytest.mark.parametrize("make", [lambda: ShardPartitioner(50, 1), lambda: DirichletPartitioner(50, 0.5), lambda: ClassWindowPartitioner(50, 1)])
def test_more_clients_than_samples_names_the_field(make):
    with pytest.raises(ConfigError, match=r"federation\.num_clients: 50 clients but only 40 training samples"):
        make().split(balanced_labels(4, 10))


# ---------------------------------------------------------------- class windows (the MFCL paper's Tables 1 and 4)


def test_window_clients_hold_exactly_their_classes_in_equal_counts():
    labels = balanced_labels(10, 50)
    parts = ClassWindowPartitioner(10, 3, seed=0).split(labels)
    counts = counts_of(labels, parts)
    for client, row in enumerate(counts):
        expected = {(3 * client + j) % 10 for j in range(3)}
        assert set(np.flatnonzero(row)) == expected
    # Every class has 3 holders: q = floor(50 / 3) = 16 of each class, for every client.
    assert set(counts[counts > 0].tolist()) == {16}
    assert counts.sum() == 10 * 3 * 16  # 20 samples left over, used by nobody


def test_window_count_is_the_largest_that_fits_every_class():
    # 4 classes of sizes 10, 7, 9, 12; 3 clients, window 2: windows {0,1}, {2,3}, {0,1}.
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(4), [10, 7, 9, 12]))
    parts = ClassWindowPartitioner(3, 2, seed=5).split(labels)
    counts = counts_of(labels, parts, 4)
    # Classes 0 and 1 have two holders each: floor(10/2) = 5, floor(7/2) = 3; classes 2, 3 one: 9, 12 -> q = 3.
    np.testing.assert_array_equal(counts, [[3, 3, 0, 0], [0, 0, 3, 3], [3, 3, 0, 0]])
    parts = ClassWindowPartitioner(3, 2, seed=5, samples_per_class=2).split(labels)
    np.testing.assert_array_equal(counts_of(labels, parts, 4), [[2, 2, 0, 0], [0, 0, 2, 2], [2, 2, 0, 0]])
    with pytest.raises(ConfigError, match=r"partition\.samples_per_class: 4 does not fit: class 1 has 7 samples"):
        ClassWindowPartitioner(3, 2, samples_per_class=4).split(labels)


def test_window_seed_changes_which_samples_not_which_classes():
    labels = balanced_labels(10, 50)
    a = counts_of(labels, ClassWindowPartitioner(10, 2, seed=0).split(labels))
    b = counts_of(labels, ClassWindowPartitioner(10, 2, seed=9).split(labels))
    np.testing.assert_array_equal(a, b)


def test_window_formula_wraps_around():
    assert window_classes(0, 4, 10) == [0, 1, 2, 3]
    assert window_classes(2, 4, 10) == [8, 9, 0, 1]
    assert window_classes(9, 10, 10) == list(range(10))


def test_window_errors_name_the_field():
    labels = balanced_labels(10, 5)
    with pytest.raises(ConfigError, match=r"partition\.window: must be a positive integer, got 0"):
        ClassWindowPartitioner(10, 0)
    with pytest.raises(ConfigError, match=r"partition\.window: 11 classes per client but the data has only 10"):
        ClassWindowPartitioner(10, 11).split(labels)
    # 10 clients with window 10: every class has 10 holders but only 5 samples.
    with pytest.raises(ConfigError, match=r"federation\.num_clients: class 0 has 5 samples for 10 clients"):
        ClassWindowPartitioner(10, 10).split(labels)
    with pytest.raises(ConfigError, match=r"partition\.samples_per_class"):
        ClassWindowPartitioner(10, 2, samples_per_class=0)


# ---------------------------------------------------------------- labeled / unlabeled split (the FedDB paper, Sec. 5.1)


def test_labeled_split_is_class_balanced_and_nested():
    labels = skewed_labels()
    splitter = LabeledSplitPartitioner.with_dirichlet(8, 100, alpha=0.3, seed=0)
    partition = splitter.partition(labels)
    assert isinstance(partition, Partition) and set(partition.roles) == {"labeled", "unlabeled"}
    labeled, unlabeled = list(partition.roles["labeled"]), list(partition.roles["unlabeled"])
    assert_well_formed(labeled, labels.size, 8, covers=False)
    assert_well_formed(unlabeled, labels.size, 8)  # labeled samples are back in the unlabeled pools
    all_labeled = np.concatenate(labeled)
    assert all_labeled.size == 100
    np.testing.assert_array_equal(np.bincount(labels[all_labeled], minlength=10), np.full(10, 10))
    for mine, pool in zip(labeled, unlabeled, strict=True):
        assert np.isin(mine, pool).all(), "a client's labeled samples are in its own unlabeled pool"
    assert partition.client_sizes().sum() == labels.size


def test_labeled_split_without_adding_keeps_roles_apart():
    labels = skewed_labels()
    splitter = LabeledSplitPartitioner(105, DirichletPartitioner(6, 0.5, seed=1), IidPartitioner(6, seed=2), seed=3, add_labeled_to_unlabeled=False)
    partition = splitter.partition(labels)
    labeled, unlabeled = np.concatenate(partition.roles["labeled"]), np.concatenate(partition.roles["unlabeled"])
    assert np.intersect1d(labeled, unlabeled).size == 0
    assert labeled.size == 105 and labeled.size + unlabeled.size == labels.size
    per_class = np.bincount(labels[labeled], minlength=10)
    assert set(per_class.tolist()) == {10, 11} and (per_class == 11).sum() == 5
    # IID unlabeled part: client sizes differ by at most one.
    sizes = [p.size for p in partition.roles["unlabeled"]]
    assert max(sizes) - min(sizes) <= 1
    again = splitter.partition(labels)
    assert all(np.array_equal(a, b) for a, b in zip(partition.roles["labeled"], again.roles["labeled"], strict=True))


def test_labeled_split_draws_the_two_sets_independently():
    splitter = LabeledSplitPartitioner.with_dirichlet(8, 100, alpha=0.3, seed=0)
    assert splitter.labeled.seed != splitter.unlabeled.seed


def test_labeled_split_errors_name_the_field():
    labels = skewed_labels()  # smallest class: 30 samples
    with pytest.raises(ConfigError, match=r"partition\.num_labeled: must be a positive integer, got 0"):
        LabeledSplitPartitioner(0, IidPartitioner(4), IidPartitioner(4))
    with pytest.raises(ConfigError, match=r"partition\.num_labeled: 400 .* need 40 of class 0, which has only 30"):
        LabeledSplitPartitioner(400, IidPartitioner(4), IidPartitioner(4)).partition(labels)
    with pytest.raises(ConfigError, match=r"federation\.num_clients: the labeled partitioner has 4 clients"):
        LabeledSplitPartitioner(10, IidPartitioner(4), IidPartitioner(5))


# ---------------------------------------------------------------- quantity skew (issue 46 item 7)


@pytest.mark.parametrize(
    "shape, ratio, weights",
    [("linear", 4.0, [1, 2, 3, 4]), ("exponential", 8.0, [1, 2, 4, 8]), ("power-law", 16.0, [1, 4, 9, 16]), ("linear", 1.0, [1, 1, 1, 1])],
)
def test_quantity_weights_grow_with_the_client_to_the_ratio(shape, ratio, weights):
    """4 clients, r = i / 3: linear 1 + (R - 1) r; exponential R^r (R = 8: 1, 2, 4, 8); power-law (i + 1)^(ln R / ln 4) (R = 16: squares)."""
    assert size_weights(shape, 4, ratio) == pytest.approx(weights)


def test_quantity_sizes_follow_the_weights_to_one_sample():
    """100 samples over weights 1, 2, 4, 8 (sum 15): 6.67, 13.33, 26.67, 53.33 -> floors 6, 13, 26, 53 and the 2 left to the largest fractions."""
    assert client_sizes(np.array([1.0, 2.0, 4.0, 8.0]), 100).tolist() == [7, 13, 27, 53]
    labels = balanced_labels()  # 600 samples
    parts = QuantitySkewPartitioner(4, "exponential", 8.0, seed=3).split(labels)
    assert [p.size for p in parts] == [40, 80, 160, 320]
    assert_well_formed(parts, labels.size, 4)


def test_quantity_skew_keeps_the_classes_of_an_iid_draw():
    """Each client is a random draw without replacement: its class counts are hypergeometric around the global shares
    (10 classes of 2,000 each; the bound is 3 to 4 sd of a hypergeometric count for every client and class)."""
    labels = balanced_labels(per_class=2000)
    parts = QuantitySkewPartitioner(4, "exponential", 8.0, seed=0).split(labels)
    counts = counts_of(labels, parts)
    expected = counts.sum(axis=1, keepdims=True) / 10
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected * 0.9 * 0.5) + 1)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: QuantitySkewPartitioner(4, "zipf"), r"partition.sizes: unknown value 'zipf'; accepted: linear, exponential, power-law"),
        (lambda: QuantitySkewPartitioner(4, "linear", 0.5), r"partition.size_ratio: .* finite number >= 1, got 0.5"),
        (lambda: QuantitySkewPartitioner(4, "linear", True), r"partition.size_ratio: .* got True"),
        (lambda: QuantitySkewPartitioner(4, "linear", float("inf")), r"partition.size_ratio: .* got inf"),
        (lambda: QuantitySkewPartitioner(10, "exponential", 1e4).split(balanced_labels()), r"partition.size_ratio: 10000 leaves client 0 without a sample"),
        (lambda: QuantitySkewPartitioner(0), r"federation.num_clients: must be a positive integer"),
    ],
)
def test_quantity_errors_name_the_field(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_quantity_scheme_from_the_config():
    made = scheme_partitioner(PartitionConfig(scheme="quantity", sizes="linear", size_ratio=3.0), 7, 3)
    assert isinstance(made, QuantitySkewPartitioner) and (made.sizes, made.size_ratio, made.seed) == ("linear", 3.0, 3)
    assert PartitionConfig(scheme="quantity").scheme_parameters() == {"sizes": "power-law", "size_ratio": 10.0}


# ---------------------------------------------------------------- factory


def test_factory_builds_every_configured_scheme():
    from fedprior.partition.config import SCHEME_NAMES

    assert {*SCHEME_NAMES, "flwr:NAME"} == set(SCHEMES)
    shard = scheme_partitioner(PartitionConfig(scheme="shard", shards=4), 7, 3)
    assert isinstance(shard, ShardPartitioner) and (shard.num_clients, shard.shards_per_client, shard.seed) == (7, 4, 3)
    lda = scheme_partitioner(PartitionConfig(scheme="dirichlet", alpha=0.2, min_size=5), 7, 3)
    assert isinstance(lda, DirichletPartitioner) and (lda.alpha, lda.min_size, lda.balance) == (0.2, 5, False)
    window = scheme_partitioner(PartitionConfig(scheme="window", window=4), 7, 3)
    assert isinstance(window, ClassWindowPartitioner) and window.window == 4
    assert isinstance(scheme_partitioner(PartitionConfig(scheme="iid"), 7, 3), IidPartitioner)


def test_factory_rejects_unknown_schemes_with_the_accepted_ones():
    with pytest.raises(ConfigError, match=r"partition\.scheme: unknown scheme 'lda'; accepted: iid, shard, dirichlet, window"):
        make_partitioner(PartitionConfig.model_construct(scheme="lda"), 10, 0)  # type: ignore[arg-type]


def test_make_partitioner_is_the_one_way_from_the_config():
    split = make_partitioner(PartitionConfig(scheme="dirichlet", alpha=0.3, num_labeled=20), 4, 5)
    assert isinstance(split, LabeledSplitPartitioner) and split.labeled.seed != split.unlabeled.seed
    assert (split.labeled.alpha, split.unlabeled.alpha) == (0.3, 0.3)
    single = make_partitioner(PartitionConfig(scheme="shard", shards=3), 4, 5).partition(np.repeat(np.arange(4), 6))
    assert list(single.roles) == ["train"] and single.num_clients == 4
