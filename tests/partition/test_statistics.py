"""Partition statistics: class histograms, beta^CIB and beta^hetero (the MFCL paper's Appendix B), the heatmap.

The published values of the MFCL paper's Table 1 (CIFAR-10, M = 10) and Table 4 (CIFAR-100, M = 100)
are reproduced from partitions built by ClassWindowPartitioner on synthetic balanced labels.

What the tables let us check, worked out by hand: with every client uniform over its W
classes and every class held by the same number of clients (h = M W / n), each client has
beta^m = log2(n / W), and beta^{m,z} = (d / W) log2(1 / (W * 1e-6)) where d is the number
of m's classes that z lacks; summing d over all ordered pairs gives M^2 W (1 - W / n), so

    beta^CIB = log2(n / W),    beta^hetero = (1 - W / n) log2(1e6 / W)

when averaged over all M^2 ordered pairs (the tables' convention; the main text's M(M-1)
would give Sc1 = 19.93 instead of the printed 17.94).

Most printed values agree with these to 2 decimals, either rounded or truncated (the
paper mixes both: Sc3's beta^CIB 1.7370 is printed 1.73, Sc6's 0.7370 is printed 0.74).
Those that do not are marked xfail(strict) below with the reason; each one is either
outside what ANY window layout can give (for uniform W-class clients, beta^CIB >= log2(n/W)
and beta^hetero <= (1 - W/n) log2(1e6/W), equality iff coverage is even) or a row that
was evidently copied from elsewhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedprior.partition.statistics import (
    SMOOTHING,
    beta_cib,
    beta_hetero,
    class_counts,
    client_imbalance,
    describe,
    pairwise_divergence,
)
from fedprior.partition.window import ClassWindowPartitioner, window_classes

# ---------------------------------------------------------------- hand-computed small cases


def test_class_counts_counts_each_clients_labels():
    labels = np.array([0, 1, 1, 2, 2, 2, 0])
    counts = class_counts(labels, [np.array([0, 1, 2]), np.array([3, 4]), np.array([], dtype=np.int64)], 4)
    np.testing.assert_array_equal(counts, [[1, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]])
    assert counts.dtype == np.int64
    with pytest.raises(ValueError, match="outside 0..1"):
        class_counts(labels, [np.array([0])], 2)


def test_beta_cib_by_hand():
    # [1, 1, 0, 0]: log2(4) - H(1/2, 1/2) = 2 - 1 = 1; [3, 3, 3, 3]: 0; [5, 0, 0, 0]: 2.
    np.testing.assert_allclose(client_imbalance([[1, 1, 0, 0], [3, 3, 3, 3], [5, 0, 0, 0]]), [1.0, 0.0, 2.0])
    assert beta_cib([[1, 1, 0, 0], [3, 3, 3, 3], [5, 0, 0, 0]]) == pytest.approx(1.0)
    # [1, 3]: 1 - H(1/4, 3/4) = 1 - 0.811278... ; empty clients are left out of the mean.
    assert beta_cib([[1, 3], [0, 0]]) == pytest.approx(1 - 0.8112781244591328)


def test_beta_hetero_by_hand():
    # P1 = (1, 0), P2 = (1/2, 1/2).
    # KL(P1 || P2) = 1 * log2(1 / 0.5) = 1.
    # KL(P2 || P1) = 0.5 log2(0.5 / 1) + 0.5 log2(0.5 / 1e-6) = -0.5 + 0.5 * 18.931568569324174.
    forward, backward = 1.0, -0.5 + 0.5 * 18.931568569324174
    divergence = pairwise_divergence([[4, 0], [2, 2]])
    np.testing.assert_allclose(divergence, [[0.0, forward], [backward, 0.0]], atol=1e-12)
    # Averaged over all 4 ordered pairs, the diagonal included.
    assert beta_hetero([[4, 0], [2, 2]]) == pytest.approx((forward + backward) / 4)
    assert beta_hetero([[4, 0], [0, 0], [2, 2]]) == pytest.approx((forward + backward) / 4)
    assert SMOOTHING == 1e-6
    assert beta_hetero([[4, 0], [2, 2]], smoothing=1e-3) == pytest.approx((1 + (-0.5 + 0.5 * math.log2(500))) / 4)


@pytest.mark.parametrize("seed", range(6))
def test_beta_hetero_equals_the_mean_of_the_pairwise_matrix(seed):
    """The O(M C) beta^hetero is the mean of the M x M matrix of Eq. 7, zero and empty cells and empty clients included."""
    rng = np.random.default_rng(seed)
    clients, classes = int(rng.integers(1, 40)), int(rng.integers(2, 12))
    counts = rng.integers(0, 30, (clients, classes)) * (rng.random((clients, classes)) < rng.uniform(0.2, 1.0))  # many empty cells
    if counts.sum() == 0:
        counts[0, 0] = 1
    for smoothing in (SMOOTHING, 1e-3):
        matrix = pairwise_divergence(counts, smoothing)
        assert beta_hetero(counts, smoothing) == pytest.approx(matrix.sum() / matrix.shape[0] ** 2, abs=1e-9, rel=0)


def test_beta_hetero_of_200000_clients_needs_no_pairwise_matrix():
    """Half the clients hold class 0 only, half class 1 only: half the ordered pairs differ, by log2(1e6) bits each.
    The 200,000 x 200,000 matrix would take 320 GB."""
    counts = np.zeros((200_000, 2), dtype=np.int64)
    counts[::2, 0], counts[1::2, 1] = 3, 5
    assert beta_hetero(counts) == pytest.approx(0.5 * math.log2(1e6), abs=1e-9)


def test_identical_clients_are_homogeneous():
    counts = np.array([[5, 10, 0, 5], [1, 2, 0, 1], [10, 20, 0, 10]])
    assert beta_hetero(counts) == pytest.approx(0.0, abs=1e-12)
    assert beta_cib(counts) == pytest.approx(2 - 1.5)


def test_describe_reports_sizes_classes_and_betas():
    counts = np.array([[4, 0, 0], [2, 2, 0], [0, 0, 0]])
    summary = describe(counts, class_names=("a", "b", "c"))
    assert summary["num_clients"] == 3 and summary["num_classes"] == 3 and summary["num_samples"] == 8
    assert summary["client_sizes"] == [4, 4, 0]
    assert summary["class_counts"] == counts.tolist()
    assert summary["classes_per_client"] == [1, 2, 0]
    assert (summary["min_client_size"], summary["mean_client_size"], summary["max_client_size"]) == (0, 8 / 3, 4)
    assert summary["empty_clients"] == 1
    assert summary["beta_cib"] == pytest.approx(beta_cib(counts[:2]))
    assert summary["beta_hetero"] == pytest.approx(beta_hetero(counts[:2]))
    assert summary["class_names"] == ["a", "b", "c"]
    import json

    json.dumps(summary)  # plain Python types only
    assert describe(np.zeros((2, 3), dtype=int))["beta_cib"] is None


# ---------------------------------------------------------------- the published tables


def window_counts(num_classes: int, num_clients: int, window: int, per_class: int) -> np.ndarray:
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(num_classes), per_class))
    parts = ClassWindowPartitioner(num_clients, window, seed=0).split(labels)
    return class_counts(labels, parts, num_classes)


def closed_form(num_classes: int, window: int) -> tuple[float, float]:
    """(beta^CIB, beta^hetero) of evenly covering uniform windows, derived in the module docstring."""
    return math.log2(num_classes / window), (1 - window / num_classes) * math.log2(1 / (window * 1e-6))


def agrees_to_two_decimals(value: float, published: float) -> bool:
    """Rounded or truncated to 2 decimals, the value reads as printed (the paper uses both)."""
    rounded = round(value, 2)
    truncated = math.floor(value * 100 + 1e-9) / 100
    return math.isclose(rounded, published, abs_tol=1e-9) or math.isclose(truncated, published, abs_tol=1e-9)


def typo(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


def ab(text: str, num_classes: int) -> set[int]:
    """The paper's 1-based {a:b} (wrapping past n) as a set of 0-based classes."""
    a, _, b = text.partition(":")
    a, b = int(a), int(b or a)
    length = (b - a) % num_classes + 1
    return {(a - 1 + j) % num_classes for j in range(length)}


# the MFCL paper's Table 1: scenario -> (window W, client 1, client 2, client 9, client 10, beta^CIB, beta^hetero).
TABLE_1 = {
    1: (1, "1", "2", "9", "10", 3.32, 17.94),
    2: (2, "1:2", "3:4", "8:9", "10:1", 2.32, 15.14),
    3: (3, "1:3", "4:6", "5:7", "8:10", 1.73, 12.84),
    4: (4, "1:4", "5:8", "4:7", "8:1", 1.32, 10.82),
    5: (5, "1:5", "6:10", "1:5", "6:10", 1.00, 8.81),
    6: (6, "1:6", "7:2", "9:4", "5:10", 0.74, 6.97),
    7: (7, "1:7", "8:4", "7:3", "4:10", 0.51, 5.14),
    8: (8, "1:8", "9:6", "5:2", "3:10", 0.32, 3.38),
    9: (9, "1:9", "10:8", "3:1", "2:10", 0.15, 1.67),
    10: (10, "1:10", "1:10", "1:10", "1:10", 0.00, 0.00),
}

TABLE_1_TYPOS = {
    # (scenario, measure): why the printed value does not reproduce.
    (4, "hetero"): "printed 10.82, above 0.6 log2(250000) = 10.759, the largest beta^hetero any layout of 4-class uniform clients can reach",
    (5, "hetero"): "printed 8.81, above 0.5 log2(2e5) = 8.8048 (8.80 rounded or truncated), the largest "
    "beta^hetero any layout of 5-class uniform clients can reach; off by 0.005",
    (6, "hetero"): "printed 6.97, above 0.4 log2(1e6/6) = 6.939, the largest beta^hetero any layout of 6-class uniform clients can reach",
}


def table_1_cases():
    for scenario in TABLE_1:
        for measure in ("cib", "hetero"):
            marks = [typo(TABLE_1_TYPOS[(scenario, measure)])] if (scenario, measure) in TABLE_1_TYPOS else []
            yield pytest.param(scenario, measure, marks=marks, id=f"Sc{scenario}-{measure}")


@pytest.fixture(scope="module")
def table_1_counts():
    return {scenario: window_counts(10, 10, row[0], per_class=60) for scenario, row in TABLE_1.items()}


@pytest.mark.parametrize("scenario", sorted(TABLE_1))
def test_table_1_partitions_match_the_closed_form(table_1_counts, scenario):
    counts = table_1_counts[scenario]
    assert (beta_cib(counts), beta_hetero(counts)) == pytest.approx(closed_form(10, TABLE_1[scenario][0]), abs=1e-9)


@pytest.mark.parametrize("scenario,measure", list(table_1_cases()))
def test_table_1_published_betas(table_1_counts, scenario, measure):
    *_, cib, hetero = TABLE_1[scenario]
    counts = table_1_counts[scenario]
    value = beta_cib(counts) if measure == "cib" else beta_hetero(counts)
    published = cib if measure == "cib" else hetero
    assert agrees_to_two_decimals(value, published), f"computed {value:.4f}, published {published}"


@pytest.mark.parametrize("scenario", sorted(TABLE_1))
def test_table_1_client_windows(scenario):
    window, client_1, client_2, client_9, client_10, *_ = TABLE_1[scenario]
    assert set(window_classes(0, window, 10)) == ab(client_1, 10)
    assert set(window_classes(1, window, 10)) == ab(client_2, 10)
    if scenario in (2, 4):
        # Typo in the table: clients 9 and 10 of Sc2 and Sc4 are printed one class further on
        # ({8:9}, {10:1} and {4:7}, {8:1}) than the pattern every other entry follows
        # ({7:8}, {9:10} and {3:6}, {7:10}); the published betas cannot tell them apart.
        assert set(window_classes(8, window, 10)) == {(c - 1) % 10 for c in ab(client_9, 10)}
        assert set(window_classes(9, window, 10)) == {(c - 1) % 10 for c in ab(client_10, 10)}
    else:
        assert set(window_classes(8, window, 10)) == ab(client_9, 10)
        assert set(window_classes(9, window, 10)) == ab(client_10, 10)


# the MFCL paper's Table 4 (CIFAR-100, M = 100): scenario -> (window W, client 1, client 2, client 99, client 100, cib, hetero).
# Clients 99 and 100 of Sc11-13 are printed as Table 1's clients 9 and 10 ({9}, {8:9}, {5:7}, ...):
# copied rows, not checked.
TABLE_4 = {
    11: (1, "1", "2", None, "100", 6.64, 19.73),
    12: (2, "1:2", "3:4", None, None, 5.63, 18.54),
    13: (3, "1:3", "4:6", None, None, 5.06, 17.79),
    20: (10, "1:10", "11:20", "81:90", "91:100", 3.32, 14.99),
    30: (20, "1:20", "21:40", "61:80", "81:100", 2.32, 13.81),
    70: (60, "1:60", "61:20", "81:40", "41:100", 0.74, 5.60),
    109: (99, "1:99", "100:98", "3:1", "2:100", 0.00, 0.00),
    110: (100, "1:100", "1:100", "1:100", "1:100", 0.00, 0.00),
}

TABLE_4_TYPOS = {
    (12, "cib"): "printed 5.63, below log2(100/2) = 5.644, the least beta^CIB of any client with 2 classes",
    (12, "hetero"): "printed 18.54; the windows the table describes (every class held by 2 clients) give "
    "0.98 log2(5e5) = 18.553, as the same formula does for every other row",
    (20, "hetero"): "printed 14.99, above 0.9 log2(1e5) = 14.949, the largest value any 10-class layout can reach",
    (30, "hetero"): "printed 13.81, far from 0.8 log2(5e4) = 12.488, the largest value any 20-class layout can reach (apparently a copy slip)",
    (109, "cib"): "printed 0.00 (copied from Sc110): 99-class clients have log2(100/99) = 0.0145",
    (109, "hetero"): "printed 0.00 (copied from Sc110): 99-class clients give 0.01 log2(1e6/99) = 0.133",
}


def table_4_cases():
    for scenario in TABLE_4:
        for measure in ("cib", "hetero"):
            marks = [typo(TABLE_4_TYPOS[(scenario, measure)])] if (scenario, measure) in TABLE_4_TYPOS else []
            yield pytest.param(scenario, measure, marks=marks, id=f"Sc{scenario}-{measure}")


@pytest.fixture(scope="module")
def table_4_counts():
    return {scenario: window_counts(100, 100, row[0], per_class=100) for scenario, row in TABLE_4.items()}


@pytest.mark.parametrize("scenario", sorted(TABLE_4))
def test_table_4_partitions_match_the_closed_form(table_4_counts, scenario):
    counts = table_4_counts[scenario]
    assert (beta_cib(counts), beta_hetero(counts)) == pytest.approx(closed_form(100, TABLE_4[scenario][0]), abs=1e-9)


@pytest.mark.parametrize("scenario,measure", list(table_4_cases()))
def test_table_4_published_betas(table_4_counts, scenario, measure):
    *_, cib, hetero = TABLE_4[scenario]
    counts = table_4_counts[scenario]
    value = beta_cib(counts) if measure == "cib" else beta_hetero(counts)
    published = cib if measure == "cib" else hetero
    assert agrees_to_two_decimals(value, published), f"computed {value:.4f}, published {published}"


@pytest.mark.parametrize("scenario", sorted(TABLE_4))
def test_table_4_client_windows(scenario):
    window, *clients, _, _ = TABLE_4[scenario]
    for client, text in zip((0, 1, 98, 99), clients, strict=True):
        if text is not None:
            assert set(window_classes(client, window, 100)) == ab(text, 100)


def test_main_texts_average_would_not_reproduce_table_1():
    # Guard on the convention: the M(M-1) average of the main text gives 19.93 for Sc1, the table 17.94.
    counts = window_counts(10, 10, 1, per_class=20)
    divergence = pairwise_divergence(counts)
    assert divergence.sum() / (10 * 9) == pytest.approx(math.log2(1e6), abs=1e-9)
    assert beta_hetero(counts) == pytest.approx(0.9 * math.log2(1e6), abs=1e-9)


# ---------------------------------------------------------------- heatmap


@pytest.mark.parametrize("shape", [(10, 10), (100, 100), (100, 10)])
def test_heatmap_writes_a_png(tmp_path, shape):
    from fedprior.partition.plot import plot_heatmap

    counts = np.random.default_rng(0).integers(0, 30, size=shape) * (np.random.default_rng(1).random(shape) < 0.4)
    names = [f"class {i}" for i in range(shape[1])]
    path = plot_heatmap(counts, tmp_path / "sub" / "heat.png", class_names=names, title="test")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    with pytest.raises(ValueError, match="class names"):
        plot_heatmap(counts, tmp_path / "x.png", class_names=names[:-1])
