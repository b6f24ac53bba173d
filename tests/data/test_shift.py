"""The rotations and styles of feature-shift federations (``fedprior.data.shift``; issue 55, item 3), on hand-made images."""

from __future__ import annotations

import numpy as np

from fedprior.data.shift import rotated, styled
from fedprior.partition.domains import STYLES


def images(n: int = 4, side: int = 9) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (n, 1, side, side)).astype(np.uint8)


def test_rotations_by_multiples_of_90_degrees_are_exact_and_counterclockwise():
    x = images()
    out = rotated(x, np.array([0, 1, 2, 3]), (0.0, 90.0, 180.0, 270.0))
    assert np.array_equal(out[0], x[0])
    for k in (1, 2, 3):
        assert np.array_equal(out[k, 0], np.rot90(x[k, 0], k))  # NumPy's rot90 turns counterclockwise too
    arrow = np.zeros((1, 1, 9, 9), dtype=np.uint8)
    arrow[0, 0, 4, 6:] = 255  # a line pointing right from the centre
    assert rotated(arrow, np.array([0]), (90.0,))[0, 0, :3, 4].tolist() == [255, 255, 255]  # turned 90 degrees: it points up


def test_other_angles_turn_the_image_bilinearly():
    arrow = np.zeros((1, 1, 9, 9), dtype=np.uint8)
    arrow[0, 0, 4, 5:] = 255
    out = rotated(arrow, np.array([0]), (45.0,))[0, 0]
    assert out[4, 8] < 128 and out[1, 7] > 100  # the line now points up and to the right


def test_each_style():
    x = images(5)
    out = styled(x, np.arange(5), STYLES).astype(float)
    assert STYLES == ("original", "low-contrast", "blur", "noise", "inverted")
    assert np.array_equal(out[0], x[0])
    assert out[1].std() < 0.5 * x[1].std() and abs(out[1].mean() - x[1].mean()) < 3  # contrast around the mean
    high = lambda a: np.abs(np.diff(a, axis=-1)).mean()  # noqa: E731
    assert high(out[2]) < 0.6 * high(x[2].astype(float))  # blurred
    assert 20 < np.abs(out[3] - x[3]).mean() < 80  # noisy
    assert np.array_equal(out[4], 255 - x[4].astype(float))
    assert np.array_equal(styled(x, np.arange(5), STYLES), styled(x, np.arange(5), STYLES))  # the noise is a fixed draw
