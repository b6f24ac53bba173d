"""Synthetic(alpha, beta) of the FedProx paper (Sec. 5.1), generated per client: reproducible per (seed, client), lazy, of the paper's form."""

from __future__ import annotations

import numpy as np
import pytest

from fedprior.data.synthetic import DIMENSION, MIN_SIZE, NUM_CLASSES, SIZE_BLOCK, SyntheticFederation, client_sizes, feature_scales


def same_client(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("x_train", "y_train", "x_test", "y_test"))


def test_a_client_depends_on_seed_and_id_only():
    """Client k's data are the same whatever the number of clients and whichever clients were generated before."""
    small, large = SyntheticFederation(30, seed=3), SyntheticFederation(5 * SIZE_BLOCK + 7, seed=3)
    np.testing.assert_array_equal(small.sizes, large.sizes[:30])
    first = small.client(17)
    for k in (0, 5, 29):
        large.client(k)
    assert same_client(first, large.client(17))
    assert same_client(first, SyntheticFederation(18, seed=3).client(17))
    assert not same_client(first, SyntheticFederation(30, seed=4).client(17))
    assert not same_client(first, small.client(16))


def test_sizes_follow_the_authors_lognormal_and_cost_nothing_per_client():
    sizes = client_sizes(0, 3 * SIZE_BLOCK)
    assert sizes.dtype == np.int32 and sizes.min() >= MIN_SIZE
    # floor(LogNormal(4, 2)) + 50: the median of the log-normal is e^4 = 54.6
    assert np.median(sizes) - MIN_SIZE == pytest.approx(np.exp(4), rel=0.15)
    assert np.log(sizes - MIN_SIZE + 0.5).std() == pytest.approx(2.0, rel=0.1)


def test_a_client_holds_80_percent_for_training_and_its_labels_follow_its_model():
    federation = SyntheticFederation(5, alpha=1.0, beta=1.0, seed=0)
    for k in range(5):
        c = federation.client(k)
        n = int(federation.sizes[k])
        assert c.x_train.shape == (int(0.8 * n), DIMENSION) and c.x_test.shape == (n - int(0.8 * n), DIMENSION)
        assert c.x_train.dtype == np.float32 and c.y_train.dtype == np.int64
        assert c.y_train.min() >= 0 and c.y_train.max() < NUM_CLASSES
        assert federation.train_sizes[k] == c.y_train.size


def test_feature_variances_are_j_to_the_minus_1_2():
    """x ~ N(v_k, Sigma), Sigma_jj = j^-1.2: around each client's mean, the pooled variance of feature j is j^-1.2."""
    federation = SyntheticFederation(40, seed=0)
    centred = []
    for k in range(40):
        c = federation.client(k)
        x = np.concatenate([c.x_train, c.x_test]).astype(np.float64)
        centred.append(x - x.mean(0))
    variance = np.concatenate(centred).var(0)
    np.testing.assert_allclose(variance, np.arange(1, DIMENSION + 1) ** -1.2, rtol=0.1)
    np.testing.assert_allclose(feature_scales() ** 2, np.arange(1, DIMENSION + 1) ** -1.2)


def test_iid_clients_share_one_model_and_heterogeneous_ones_do_not():
    """Synthetic IID: every client labels a point alike; Synthetic(1, 1): clients label the same point differently."""
    iid, het = SyntheticFederation(2, iid=True, seed=0), SyntheticFederation(2, alpha=1.0, beta=1.0, seed=0)
    assert abs(iid.client(0).x_train.mean()) < 0.1  # v = 0
    models = [het._model(np.random.default_rng(k)) for k in range(2)]
    shared = [iid._model(np.random.default_rng(k)) for k in range(2)]
    assert np.array_equal(shared[0][0], shared[1][0]) and not np.array_equal(models[0][0], models[1][0])


def test_alpha_and_beta_zero_is_not_iid_but_homogeneous_in_law():
    """Synthetic(0, 0): the clients' models and feature means are drawn around 0, each client its own (as the paper's)."""
    federation = SyntheticFederation(3, alpha=0.0, beta=0.0, seed=0)
    means = [np.concatenate([federation.client(k).x_train, federation.client(k).x_test]).mean(0) for k in range(3)]
    assert not np.allclose(means[0], means[1])
