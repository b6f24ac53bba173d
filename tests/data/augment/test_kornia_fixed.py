"""``strong_augment = "kornia-fixed"`` (``data/augment/kornia_fixed.py``): kornia's operations, parameters drawn on the device.

Issue 19 item 2 moved this recipe's draws from kornia (on the CPU, from torch's global
generator, with a ``nonzero`` per operation) to a generator on the images' device. The
operations must be the same: each one is compared here with kornia's ``RandAugment`` of that
one operation given the same random parts (signs, thresholds); the erasing with kornia's
``RandomErasing``; the weak view's set of views and frequencies with kornia's flip and crop.
"""

from __future__ import annotations

import collections
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.data.augment import seeded
from fedprior.data.augment.kornia_fixed import KorniaOp, apply_op, erase, kornia_ops, rand_augment
from fedprior.data.augment.shift_flip import shift_flip

SIGNED = {"rotate": "degrees", "shear_x": "shear_x", "shear_y": "shear_y", "translate_x": "translate_x", "translate_y": "translate_y"}


def kornia_reference(entry, magnitude: float, x: torch.Tensor, seed: int):
    """kornia's RandAugment of one operation (what the former code ran per operation): its output and its parameters."""
    from kornia.augmentation.auto import RandAugment

    module = RandAugment(n=1, m=magnitude, policy=[entry])
    with seeded(seed):
        out = module(x)
    return out, module._params[0].data[0].data


def test_the_operations_are_kornias_default_policy_in_its_order():
    from kornia.augmentation.auto.rand_augment.rand_augment import default_policy

    assert [op.name for op in kornia_ops()] == [entry[0][0] for entry in default_policy]


@pytest.mark.parametrize("magnitude", [29.0, 15.0, 4.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_operation_is_kornias_with_the_same_parameters(magnitude, dtype):
    """Our magnitudes are kornia's (to float rounding), and with kornia's random parts (the sign of a symmetric
    operation, solarize_add's threshold) our batched call gives kornia's output exactly, on every image."""
    from kornia.augmentation.auto.rand_augment.rand_augment import default_policy

    x = torch.rand(8, 3, 9, 11, generator=torch.Generator().manual_seed(0), dtype=dtype)
    for op, entry in zip(kornia_ops(), default_policy, strict=True):
        reference, theirs = kornia_reference(entry, magnitude, x, seed=1)
        ours = op.params(x, magnitude / 30.0, torch.Generator().manual_seed(2))
        assert set(ours) <= set(theirs), (op.name, set(ours), set(theirs))
        for key, value in ours.items():
            if key == "thresholds" and op.name == "solarize_add":
                continue  # drawn per image (checked below)
            expected = theirs[key].to(value.dtype)
            if op.name in SIGNED and key == SIGNED[op.name]:
                value, expected = value.abs(), expected.abs()
            assert torch.allclose(value, expected, rtol=1e-6, atol=1e-6), (op.name, key, value, expected)
        replay = {key: theirs[key].to(dtype) if theirs[key].is_floating_point() else theirs[key] for key in ours}
        out = apply_op(op, x, replay)
        assert out.dtype == dtype and torch.equal(out, reference.to(dtype)), op.name


def test_signs_and_thresholds_are_drawn_per_image_with_kornias_distribution():
    x = torch.rand(4000, 3, 4, 4)
    ops = {op.name: op for op in kornia_ops()}
    g = torch.Generator().manual_seed(0)
    for name, key in SIGNED.items():
        v = ops[name].params(x, 0.5, g)[key]
        assert set(v.abs().unique().tolist()) == {v.abs()[0].item()} and abs(float((v > 0).float().mean()) - 0.5) < 0.03, name
    thresholds = ops["solarize_add"].params(x, 0.5, g)["thresholds"]
    assert 0 <= float(thresholds.min()) and float(thresholds.max()) < 1 and abs(float(thresholds.mean()) - 0.5) < 0.02
    _, theirs = kornia_reference([("solarize_add", 0.0, 0.43)], 15.0, x, seed=0)
    assert abs(float(theirs["thresholds"].mean()) - 0.5) < 0.02 and float(theirs["thresholds"].std()) == pytest.approx(float(thresholds.std()), abs=0.02)


class Marker(nn.Module):
    """A fake operation adding 2^-k: the sum of a view tells which operations it went through."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def apply_transform(self, x, params, flags, transform=None):
        return x + 2.0**-self.k


def test_each_image_draws_n_distinct_operations_uniformly():
    ops = [KorniaOp(f"op{k}", Marker(k + 1), lambda x, t, g: {}) for k in range(15)]
    out = rand_augment(torch.zeros(6000, 3, 2, 2), ops, n=2, magnitude=10.0, generator=torch.Generator().manual_seed(0))
    codes = (out[:, 0, 0, 0].double() * 2**16).round().long().tolist()
    chosen = [[k for k in range(15) if code & (1 << (15 - k))] for code in codes]
    assert all(len(c) == 2 for c in chosen), "two distinct operations per image"
    counts = collections.Counter(itertools.chain.from_iterable(chosen))
    assert all(abs(counts[k] / 6000 - 2 / 15) < 0.02 for k in range(15)), counts
    assert len({tuple(c) for c in chosen}) == 15 * 14 // 2, "every pair occurs"


def test_the_erasing_is_kornias_random_erasing():
    import kornia.augmentation as K

    for h, w, side in ((16, 16, 0.5), (10, 14, 0.5), (12, 12, 0.3), (5, 5, 0.05)):
        x = torch.rand(300, 3, h, w) * 0.4  # below the gray 0.5: the square is where pixels are 0.5
        module = K.RandomErasing(scale=(side**2, side**2), ratio=(1.0, 1.0), value=0.5, p=1.0)
        with seeded(0):
            reference = module(x)
        theirs = module._params
        ours = erase(x, side, torch.Generator().manual_seed(0))
        box = lambda v: v[:, 0] == 0.5  # noqa: E731
        ours_h, ours_w = box(ours).any(2).sum(1), box(ours).any(1).sum(1)
        assert set(ours_h.tolist()) == set(theirs["heights"].long().tolist()) and set(ours_w.tolist()) == set(theirs["widths"].long().tolist())
        tops = box(ours).any(2).float().argmax(1)
        assert int(tops.min()) == 0 and int(tops.max()) == h - int(theirs["heights"][0]), "every top row inside the image occurs"
        # with kornia's corners, our square is kornia's
        top, left = theirs["ys"].long(), theirs["xs"].long()
        from fedprior.data.augment.pil_ops import fill_box

        replay = fill_box(x, top, top + theirs["heights"].long(), left, left + theirs["widths"].long(), 0.5)
        assert torch.equal(replay, reference)


def test_the_weak_view_has_kornias_distribution_of_flips_and_reflect_padded_crops():
    """kornia-fixed's weak view was kornia's RandomHorizontalFlip then RandomCrop(padding_mode='reflect'); shift_flip
    crops then flips: the same set of views, each offset uniform and the flip 1/2, in both."""
    import kornia.augmentation as K

    image = torch.arange(1.0, 37.0).view(1, 1, 6, 6)
    pad, n = 1, 3000
    padded = F.pad(image, (pad,) * 4, mode="reflect")
    candidates = {
        (dy, dx, m): (padded[..., dy : dy + 6, dx : dx + 6].flip(-1) if m else padded[..., dy : dy + 6, dx : dx + 6])[0]
        for dy, dx, m in itertools.product(range(2 * pad + 1), range(2 * pad + 1), (False, True))
    }

    def keys(views):
        found = []
        for v in views:
            matches = [k for k, c in candidates.items() if torch.equal(v, c)]
            assert len(matches) >= 1
            found.append(matches[0])
        return collections.Counter(found)

    with seeded(0):
        theirs = keys(nn.Sequential(K.RandomHorizontalFlip(p=0.5), K.RandomCrop((6, 6), padding=pad, padding_mode="reflect"))(image.expand(n, -1, -1, -1)))
    ours = keys(shift_flip(image.expand(n, -1, -1, -1), pad, True, torch.Generator().manual_seed(0)))
    assert set(theirs) == set(ours) == set(candidates)
    assert all(abs(ours[k] - theirs[k]) / n < 0.03 for k in candidates), (ours, theirs)


def test_kornia_fixed_views_are_reproducible_per_generator_and_one_channel_works():
    from fedprior.data.augment.fixmatch import FixMatchAugment

    augment = FixMatchAugment((0.3,), (0.2,), strong_augment="kornia-fixed")
    x = torch.randn(10, 1, 12, 12, generator=torch.Generator().manual_seed(0))
    a = augment.strong(x, torch.Generator().manual_seed(1))
    assert torch.equal(a, augment.strong(x, torch.Generator().manual_seed(1)))
    assert not torch.equal(a, augment.strong(x, torch.Generator().manual_seed(2)))
    assert a.shape == x.shape
