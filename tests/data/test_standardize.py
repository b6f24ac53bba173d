"""The pixel standardiser: fitted statistics, apply and invert on hand-made images, the identity without statistics."""

import numpy as np
import pytest
import torch

from fedprior.data.standardize import STD_EPS, PixelStandardizer

MEAN, STD = (0.5, 0.2), (0.25, 0.1)
UNIT = torch.tensor([[[[0.0, 0.25], [0.5, 1.0]], [[0.2, 0.3], [0.1, 0.0]]]])
STANDARD = torch.tensor([[[[-2.0, -1.0], [0.0, 2.0]], [[0.0, 1.0], [-1.0, -2.0]]]])
"""UNIT standardized by hand: (x - 0.5) / 0.25 on channel 0, (x - 0.2) / 0.1 on channel 1."""


def test_apply_and_invert_by_hand():
    s = PixelStandardizer(MEAN, STD)
    assert torch.allclose(s.apply(UNIT), STANDARD, atol=1e-6)
    assert torch.allclose(s.invert(STANDARD), UNIT, atol=1e-6)
    assert torch.allclose(s.invert(s.apply(UNIT)), UNIT, atol=1e-6)
    assert torch.equal(s.to_unit(torch.full((1, 2, 1, 1), 10.0)), torch.ones(1, 2, 1, 1))  # clamped to [0, 1]
    assert torch.equal(s.to_unit(torch.full((1, 2, 1, 1), -10.0)), torch.zeros(1, 2, 1, 1))
    assert s.apply(UNIT.double()).dtype == torch.float64


def test_fit_on_uint8_images_and_pixels():
    images = np.zeros((2, 2, 1, 2), dtype=np.uint8)
    images[:, 0] = 255  # channel 0 all white: mean 1, std 0 (+ eps)
    images[0, 1], images[1, 1] = 0, 255  # channel 1: half black, half white: mean 0.5, std 0.5
    s = PixelStandardizer.fit(images)
    assert s.mean == pytest.approx((1.0, 0.5)) and s.std == pytest.approx((STD_EPS, 0.5 + STD_EPS))
    x = s.pixels(images)
    assert x.dtype == torch.float32 and x.shape == (2, 2, 1, 2)
    assert torch.allclose(x[:, 1], torch.tensor([[[-1.0, -1.0]], [[1.0, 1.0]]]), atol=1e-5)
    assert torch.equal(x[:, 0], torch.zeros(2, 1, 2))
    assert torch.allclose(s.to_unit(x), torch.from_numpy(images).float() / 255.0, atol=1e-6)


def test_no_statistics_is_the_identity_and_mismatched_statistics_fail():
    s = PixelStandardizer()
    assert s.identity and s.apply(STANDARD) is STANDARD and s.invert(STANDARD) is STANDARD
    assert torch.equal(s.to_unit(torch.tensor([-1.0, 0.5, 2.0])), torch.tensor([0.0, 0.5, 1.0]))
    with pytest.raises(ValueError, match="one value per channel"):
        PixelStandardizer((0.5,), (0.25, 0.1))
