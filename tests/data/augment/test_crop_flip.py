"""FedBM's crop and flips (``data/augment/crop_flip.py``): kornia's distribution of crops and flips, drawn on the device.

Issue 19 item 2 moved the draws from kornia (parameters drawn on the CPU and copied to the
device at every call) to a generator on the images' device. These tests pin what must not
have changed: every view is a crop of the zero-padded image at an offset in ``0..2p`` on
each axis, then a left-right and an upside-down flip, each with probability 1/2, per image
or once per batch; and they compare the distribution with kornia's own modules.
"""

from __future__ import annotations

import collections
import itertools

import pytest
import torch
import torch.nn.functional as F

from fedprior.data.augment import generator_at, seeded
from fedprior.data.augment.crop_flip import crop_flip
from tests.support.pretend_device import DEVICE, OnDevice, PretendDevice

SIDE, PAD = 6, 2


def distinct_image(channels: int = 2, height: int = SIDE, width: int = SIDE) -> torch.Tensor:
    """One image whose pixels are all different and non-zero (so a view identifies its crop and flips)."""
    return torch.arange(1.0, 1.0 + channels * height * width).view(1, channels, height, width)


def view(image: torch.Tensor, dy: int, dx: int, mirrored: bool, upside_down: bool, pad: int = PAD) -> torch.Tensor:
    """The view by hand: slice the zero-padded image, then flip."""
    h, w = image.shape[-2:]
    out = F.pad(image, (pad, pad, pad, pad))[..., dy : dy + h, dx : dx + w]
    if mirrored:
        out = out.flip(-1)
    if upside_down:
        out = out.flip(-2)
    return out


def parameters_of(views: torch.Tensor, image: torch.Tensor, pad: int = PAD) -> list[tuple[int, int, bool, bool]]:
    """(dy, dx, mirrored, upside_down) of each view of ``image``; fails if a view is none of the candidates."""
    candidates = {key: view(image, *key, pad=pad)[0] for key in itertools.product(range(2 * pad + 1), range(2 * pad + 1), (False, True), (False, True))}
    found = []
    for v in views:
        matches = [key for key, c in candidates.items() if torch.equal(v, c)]
        assert len(matches) == 1, f"a view that is no crop and flip of the image ({len(matches)} matches)"
        found.append(matches[0])
    return found


def kornia_views(images: torch.Tensor, seed: int, same_on_batch: bool = False) -> torch.Tensor:
    """What fedprior ran before issue 19: kornia's modules, under a seeded global generator."""
    import kornia.augmentation as K

    h, w = images.shape[-2:]
    ops = torch.nn.Sequential(
        K.RandomCrop((h, w), padding=PAD, same_on_batch=same_on_batch),
        K.RandomHorizontalFlip(same_on_batch=same_on_batch),
        K.RandomVerticalFlip(same_on_batch=same_on_batch),
    )
    with seeded(seed):
        return ops(images)


def test_each_view_is_the_drawn_crop_of_the_zero_padded_image_then_the_drawn_flips():
    image = distinct_image()
    images = image.expand(40, -1, -1, -1)
    out = crop_flip(images, padding=PAD, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)  # the draws, in the documented order
    dy, dx = torch.randint(0, 2 * PAD + 1, (40,), generator=g), torch.randint(0, 2 * PAD + 1, (40,), generator=g)
    mirrored, upside_down = torch.rand(40, generator=g) < 0.5, torch.rand(40, generator=g) < 0.5
    for i in range(40):
        assert torch.equal(out[i], view(image, int(dy[i]), int(dx[i]), bool(mirrored[i]), bool(upside_down[i]))[0])
    assert out.shape == images.shape and out.dtype == images.dtype


def test_kornia_and_ours_draw_from_the_same_set_with_the_same_frequencies():
    """Offsets uniform over 0..2p on each axis, each flip with probability 1/2, independently: in both kornia's views and ours."""
    image = distinct_image(channels=1)
    n = 3000
    ours = parameters_of(crop_flip(image.expand(n, -1, -1, -1), padding=PAD, generator=torch.Generator().manual_seed(1)), image)
    theirs = parameters_of(kornia_views(image.expand(n, -1, -1, -1).contiguous(), seed=1), image)
    for found in (ours, theirs):
        for axis in (0, 1):
            counts = collections.Counter(p[axis] for p in found)
            assert sorted(counts) == list(range(2 * PAD + 1))
            assert all(abs(c / n - 1 / (2 * PAD + 1)) < 0.03 for c in counts.values()), counts  # 1/5 each; sd ~0.007
        for axis in (2, 3):
            assert abs(sum(p[axis] for p in found) / n - 0.5) < 0.03
        both = sum(p[2] and p[3] for p in found) / n
        assert abs(both - 0.25) < 0.03, "the two flips are independent"


def test_one_crop_and_flip_per_batch_when_asked_as_kornia_does():
    image = distinct_image()
    for seed in range(6):
        out = crop_flip(image.expand(8, -1, -1, -1), padding=PAD, same_on_batch=True, generator=torch.Generator().manual_seed(seed))
        assert len(set(parameters_of(out, image))) == 1
        assert len(set(parameters_of(kornia_views(image.expand(8, -1, -1, -1).contiguous(), seed, same_on_batch=True), image))) == 1
    per_image = crop_flip(image.expand(8, -1, -1, -1), padding=PAD, generator=torch.Generator().manual_seed(0))
    assert len(set(parameters_of(per_image, image))) > 1


def test_without_the_vertical_flip_and_without_padding():
    image = distinct_image()
    out = crop_flip(image.expand(200, -1, -1, -1), padding=PAD, vertical=False, generator=torch.Generator().manual_seed(0))
    found = parameters_of(out, image)
    assert not any(p[3] for p in found) and any(p[2] for p in found)
    still = crop_flip(image.expand(50, -1, -1, -1), padding=0, vertical=False, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(v, image[0]) or torch.equal(v, image[0].flip(-1)) for v in still)


def test_rectangular_images_many_channels_and_float64():
    image = torch.rand(1, 3, 5, 9, dtype=torch.float64) + 0.5
    out = crop_flip(image.expand(30, -1, -1, -1), padding=PAD, generator=torch.Generator().manual_seed(0))
    assert out.shape == (30, 3, 5, 9) and out.dtype == torch.float64
    candidates = [view(image, dy, dx, m, u)[0] for dy in range(5) for dx in range(5) for m in (False, True) for u in (False, True)]
    assert all(any(torch.equal(v, c) for c in candidates) for v in out)


def test_deterministic_given_a_seed_and_differentiable():
    x = torch.rand(6, 3, 8, 8, requires_grad=True)
    a = crop_flip(x, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, crop_flip(x, generator=torch.Generator().manual_seed(4)))
    assert not torch.equal(a, crop_flip(x, generator=torch.Generator().manual_seed(5)))
    with seeded(4):  # no generator: torch's global one, as before (reproducible inside seeded)
        b = crop_flip(x)
    with seeded(4):
        assert torch.equal(b, crop_flip(x))
    a.sum().backward()
    assert x.grad is not None and set(x.grad.unique().tolist()) <= {0.0, 1.0}  # each pixel read once or cropped away
    assert int(x.grad.sum()) > 0.5 * x.numel()


def test_draws_on_the_device_without_a_host_sync():
    x = torch.rand(5, 3, 8, 8)
    expected = crop_flip(x, generator=torch.Generator().manual_seed(9))
    with PretendDevice() as record:
        out = crop_flip(x.to(DEVICE), generator=generator_at(9, DEVICE))
    assert isinstance(out, OnDevice) and torch.equal(out.elem, expected)
    assert [s.split(" <- ")[0] for s in record.syncs] == ["blocking copy host -> device"], record.syncs  # the test's upload only


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_on_the_gpu():
    x = torch.rand(16, 3, 32, 32, device="cuda")
    out = crop_flip(x, generator=generator_at(0, x.device))
    assert out.device == x.device and out.shape == x.shape
