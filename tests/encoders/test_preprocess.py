"""CLIP preprocessing on tensors, checked against hand-computed values."""

import numpy as np
import pytest
import torch

from fedprior.encoders.preprocess import CLIP_MEAN, CLIP_STD, PreprocessConfig, preprocess_images, resized_shape

IDENTITY = dict(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))


def test_bicubic_upsampling_matches_hand_computed_pil_kernel():
    # One row [0, 255] upsampled to width 4 (PIL's bicubic, a = -0.5, normalized over the valid taps):
    # output centres at 0.25 and 0.75 of the input pixel grid give weights
    #   x=0: [0.8671875, -0.0703125] / 0.796875  -> -22.5  -> clamped to 0
    #   x=1: [0.8671875,  0.2265625] / 1.09375   -> 52.82  -> 53
    # and the mirror images 202.18 -> 202 and 277.5 -> 255.
    image = np.array([[[[0, 255], [0, 255]]]], dtype=np.uint8)
    out = preprocess_images(image, PreprocessConfig(size=4, **IDENTITY)) * 255
    expected = torch.tensor([0.0, 53.0, 202.0, 255.0])
    assert out.shape == (1, 3, 4, 4)
    for channel in range(3):
        for row in range(4):
            torch.testing.assert_close(out[0, channel, row], expected, atol=1e-3, rtol=0)


def test_bicubic_matches_pil():
    from PIL import Image

    # values well inside 0..255, so PIL's clipping between its horizontal and vertical passes never bites
    rng = np.random.default_rng(0)
    image = rng.integers(60, 196, size=(9, 13), dtype=np.uint8)
    # shorter side 9 -> 20, longer side int(20 * 13 / 9) = 28, then crop 20 x 20 from column round(8 / 2) = 4
    reference = np.asarray(Image.fromarray(image).resize((28, 20), Image.BICUBIC), dtype=np.float32)[:, 4:24]
    out = preprocess_images(image[None, None], PreprocessConfig(size=20, **IDENTITY))[0, 0] * 255
    assert np.abs(out.numpy() - reference).max() <= 1.0  # PIL rounds through fixed point; at most 1 level apart


def test_normalization_grayscale_and_values():
    image = np.zeros((1, 1, 2, 2), dtype=np.uint8)
    image[0, 0, 0, 0] = 255
    out = preprocess_images(image, PreprocessConfig(size=2))
    assert out.dtype == torch.float32 and out.shape == (1, 3, 2, 2)
    for c in range(3):
        assert out[0, c, 0, 0].item() == pytest.approx((1.0 - CLIP_MEAN[c]) / CLIP_STD[c], abs=1e-5)
        assert out[0, c, 1, 1].item() == pytest.approx((0.0 - CLIP_MEAN[c]) / CLIP_STD[c], abs=1e-5)
    # (1 - 0.48145466) / 0.26862954, by hand
    assert out[0, 0, 0, 0].item() == pytest.approx(1.9303, abs=1e-4)


def test_center_crop_of_a_wide_image_without_resizing():
    # 4 x 6, size 4: no resize, crop columns round((6 - 4) / 2) = 1 .. 4
    image = np.arange(24, dtype=np.uint8).reshape(1, 1, 4, 6) * 10
    out = preprocess_images(image, PreprocessConfig(size=4, **IDENTITY))[0, 0] * 255
    torch.testing.assert_close(out, torch.from_numpy(image[0, 0, :, 1:5].astype(np.float32)), atol=1e-3, rtol=0)


def test_crop_smaller_than_resize_and_rgb_channels_kept():
    image = np.stack([np.full((4, 4), v, dtype=np.uint8) for v in (0, 100, 200)])[None]
    image[0, :, 0, :] = 255  # a border row that the crop removes
    out = preprocess_images(image, PreprocessConfig(size=4, crop=2, **IDENTITY)) * 255
    assert out.shape == (1, 3, 2, 2)
    torch.testing.assert_close(out[0, :, 0, 0], torch.tensor([0.0, 100.0, 200.0]), atol=1e-3, rtol=0)


def test_constant_image_stays_constant_when_upsampled():
    image = np.full((2, 1, 8, 8), 77, dtype=np.uint8)
    out = preprocess_images(image, PreprocessConfig(size=32, **IDENTITY)) * 255
    assert out.shape == (2, 3, 32, 32)
    torch.testing.assert_close(out, torch.full_like(out, 77.0), atol=1e-3, rtol=0)


def test_resized_shape_follows_torchvision_rounding():
    assert resized_shape(8, 8, 224) == (224, 224)
    assert resized_shape(9, 13, 20) == (20, 28)
    assert resized_shape(13, 9, 20) == (28, 20)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="uint8"):
        preprocess_images(np.zeros((1, 1, 4, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="channels"):
        preprocess_images(np.zeros((1, 2, 4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="crop"):
        PreprocessConfig(size=4, crop=8)


def test_describe_changes_with_every_setting():
    base = PreprocessConfig()
    half = (0.5, 0.5, 0.5)
    variants = [PreprocessConfig(size=225), PreprocessConfig(crop=200), PreprocessConfig(mean=half), PreprocessConfig(std=half)]
    assert len({base.describe(), *(v.describe() for v in variants)}) == 5
