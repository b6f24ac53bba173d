"""FixMatch's weak and strong views: reproducible from the seed, and changing images as specified."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fedprior.data.augment.fixmatch import FixMatchAugment

MEAN, STD = (0.3,), (0.2,)


def images(n: int = 16, channels: int = 1, side: int = 16, seed: int = 0) -> torch.Tensor:
    """Standardized images of distinct random pixels in [0, 1]."""
    unit = torch.rand(n, channels, side, side, generator=torch.Generator().manual_seed(seed))
    return (unit - MEAN[0]) / STD[0]


def unit(x: torch.Tensor) -> torch.Tensor:
    return x * STD[0] + MEAN[0]


def test_views_are_reproducible_from_the_seed_and_change_with_it():
    augment = FixMatchAugment(MEAN, STD)
    x = images()
    for view in (augment.weak, augment.strong):
        a = view(x, torch.Generator().manual_seed(5))
        b = view(x, torch.Generator().manual_seed(5))
        c = view(x, torch.Generator().manual_seed(6))
        assert torch.equal(a, b) and not torch.equal(a, c)
        assert a.shape == x.shape and a.dtype == x.dtype


def test_augmenting_leaves_the_global_random_state_alone():
    augment = FixMatchAugment(MEAN, STD)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    augment.strong(images(4), torch.Generator().manual_seed(0))
    assert torch.equal(torch.rand(3), expected)


def candidates(image: torch.Tensor, pad: int, flip: bool) -> list[torch.Tensor]:
    """Every crop of the reflect-padded image (and of its mirror): what a weak view may be."""
    side = image.shape[-1]
    out = []
    for source in [image, image.flip(-1)] if flip else [image]:
        padded = F.pad(source[None], (pad, pad, pad, pad), mode="reflect")[0]
        out += [padded[:, i : i + side, j : j + side] for i in range(2 * pad + 1) for j in range(2 * pad + 1)]
    return out


@pytest.mark.parametrize("flip", [True, False])
def test_weak_view_is_a_flip_and_a_translation_of_the_image(flip):
    augment = FixMatchAugment(MEAN, STD, flip=flip)
    x = images(12, side=16)
    weak = unit(augment.weak(x, torch.Generator().manual_seed(1)))
    pad = 2  # 12.5% of 16 pixels
    moved = 0
    for original, view in zip(unit(x), weak, strict=True):
        errors = [float((view - c).abs().max()) for c in candidates(original, pad, flip)]
        assert min(errors) < 1e-5, "the weak view is one of the padded crops"
        moved += min(errors) < 1e-5 and errors[2 * pad * (pad + 1)] > 1e-5  # not the centred, unflipped crop
    assert moved >= 6, "most views are actually moved"


def test_kornia_fixed_strong_view_adds_randaugment_and_a_gray_cutout_square():
    augment = FixMatchAugment(MEAN, STD, flip=False, strong_augment="kornia-fixed")
    x = images(16, side=16)
    generator = torch.Generator().manual_seed(2)
    strong = unit(augment.strong(x, generator))
    assert float(strong.min()) >= -1e-6 and float(strong.max()) <= 1 + 1e-6  # made in [0, 1], standardized back
    plain_crops = FixMatchAugment(MEAN, STD, flip=False, cutout=0.0, strong_augment="kornia-fixed").strong(x, torch.Generator().manual_seed(3))
    not_a_crop = [min(float((v - c).abs().max()) for c in candidates(o, 2, False)) > 1e-3 for o, v in zip(unit(x), unit(plain_crops), strict=True)]
    assert sum(not_a_crop) >= 8, "RandAugment changes most images beyond a weak view"
    for view in strong:
        gray = (view[0] - 0.5).abs() < 1e-6
        # an 8x8 (half the side) block of exact gray somewhere in the image
        blocks = F.avg_pool2d(gray[None, None].float(), 8, stride=1)
        assert float(blocks.max()) == pytest.approx(1.0)
    no_cutout = unit(FixMatchAugment(MEAN, STD, flip=False, cutout=0.0, strong_augment="kornia-fixed").strong(x, torch.Generator().manual_seed(2)))
    assert all(float(F.avg_pool2d(((v[0] - 0.5).abs() < 1e-6)[None, None].float(), 8, stride=1).max()) < 1 for v in no_cutout)


def test_kornia_fixed_randaugment_draws_operations_per_image():
    augment = FixMatchAugment(MEAN, STD, flip=False, cutout=0.0, strong_augment="kornia-fixed")
    one = unit(images(1, channels=3, side=16))
    batch = one.expand(40, -1, -1, -1).contiguous()
    torch.manual_seed(0)
    out = augment._randaugment_unit(batch)
    distinct = {tuple(v.flatten()[:50].round(decimals=4).tolist()) for v in out}
    assert len(distinct) >= 20, "forty copies of one image come out in many different ways"


def test_gray_and_colour_images_and_empty_batches():
    augment = FixMatchAugment((0.5, 0.4, 0.3), (0.2, 0.2, 0.2))
    rgb = torch.randn(5, 3, 12, 12)
    assert augment.strong(rgb, torch.Generator().manual_seed(0)).shape == rgb.shape
    assert augment.weak(rgb[:0], torch.Generator()).shape == (0, 3, 12, 12)
    with pytest.raises(ValueError, match="one value per channel"):
        FixMatchAugment((0.5,), (0.2, 0.2))
