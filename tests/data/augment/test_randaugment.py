"""FixMatch's strong view: each PIL operation against values worked out by hand, the per-image draws, and the options."""

from __future__ import annotations

import pytest
import torch

from fedprior.data.augment import pil_ops as ops
from fedprior.data.augment.fixmatch import FixMatchAugment
from fedprior.data.augment.randaugment import Op, cutout_feddb_code, cutout_fixmatch, feddb_code_ops, fixmatch_ops, rand_augment


def image(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)[None, None]


def one(value: float) -> torch.Tensor:
    return torch.tensor([value])


NINE = image([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) / 10


# -- colour operations ---------------------------------------------------------------------------------


def test_brightness_multiplies_by_the_factor_and_clamps():
    x = image([[0.1, 0.5, 0.9]])
    assert torch.allclose(ops.brightness(x, one(1.5)), image([[0.15, 0.75, 1.0]]))
    assert torch.allclose(ops.brightness(x, one(0.5)), image([[0.05, 0.25, 0.45]]))
    assert torch.equal(ops.brightness(x, one(0.0)), torch.zeros_like(x))


def test_contrast_blends_with_the_mean_gray_rounded_to_an_8_bit_level():
    x = image([[0.0, 0.2], [0.4, 1.0]])  # mean 0.4 = 102/255
    assert torch.allclose(ops.contrast(x, one(0.5)), image([[0.2, 0.3], [0.4, 0.7]]))
    assert torch.allclose(ops.contrast(x, one(0.0)), torch.full_like(x, 0.4))
    y = image([[0.0, 0.0], [0.0, 0.1]])  # mean 0.025 = 6.375/255 -> level 6
    assert torch.allclose(ops.contrast(y, one(0.0)), torch.full_like(y, 6 / 255))
    rgb = torch.tensor([1.0, 0.0, 0.0]).view(1, 3, 1, 1)  # luminance 0.299 -> level 76
    assert torch.allclose(ops.contrast(rgb, one(0.0)), torch.full_like(rgb, 76 / 255))


def test_color_blends_with_the_luminance_and_leaves_gray_images_alone():
    red = torch.tensor([1.0, 0.0, 0.0]).view(1, 3, 1, 1)
    assert torch.allclose(ops.color(red, one(0.0)).flatten(), torch.full((3,), 0.299))
    assert torch.allclose(ops.color(red, one(0.5)).flatten(), torch.tensor([0.6495, 0.1495, 0.1495]))
    assert torch.equal(ops.color(NINE, one(0.1)), NINE)


def test_sharpness_blends_with_the_smoothed_image_and_keeps_the_border():
    x = image([[0.5, 0, 0], [0, 1, 0], [0, 0, 0]])
    smooth = (0.5 + 5) / 13  # kernel [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 at the centre
    out = ops.sharpness(x, one(0.0))
    assert out[0, 0, 1, 1] == pytest.approx(smooth)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[..., 1, 1] = False
    assert torch.equal(out[mask], x[mask]), "border pixels are kept"
    assert float(ops.sharpness(x, one(0.5))[0, 0, 1, 1]) == pytest.approx(0.5 * smooth + 0.5)
    assert float(ops.sharpness(x, one(2.0))[0, 0, 1, 1]) == 1.0  # 2 - smooth > 1, clamped


def test_posterize_keeps_the_high_bits_of_each_level():
    levels = torch.tensor([200, 100, 255, 15, 47])
    x = ((levels + 0.5) / 255).view(1, 1, 1, -1)
    out = ops.posterize(x, torch.tensor([4]))
    assert torch.allclose(out.flatten() * 255, torch.tensor([192.0, 96, 240, 0, 32]), atol=1e-3)
    assert torch.allclose(ops.posterize(x, torch.tensor([1])).flatten() * 255, torch.tensor([128.0, 0, 128, 0, 0]), atol=1e-3)
    assert torch.equal(ops.posterize(x, torch.tensor([8])), x)


def test_solarize_inverts_the_pixels_at_or_above_the_threshold():
    x = image([[0.2, 0.5, 0.6, 0.8]])
    assert torch.allclose(ops.solarize(x, one(0.5)), image([[0.2, 0.5, 0.4, 0.2]]))
    assert torch.allclose(ops.solarize(x, one(0.0)), 1 - x)
    assert torch.equal(ops.solarize(x, one(1.0)), x)


def test_equalize_is_pils_histogram_lookup():
    # 900 pixels: 300 at level 10, 300 at 20, 250 at 30, 50 at 40; step = (900 - 50) // 255 = 3,
    # lut[i] = (step // 2 + pixels below i) // step: 10 -> 0, 20 -> 301 // 3 = 100, 30 -> 601 // 3 = 200, 40 -> 851 // 3 -> 255
    levels = torch.tensor([10] * 300 + [20] * 300 + [30] * 250 + [40] * 50).float()
    x = ((levels + 0.5) / 255).view(1, 1, 30, 30)
    out = (ops.equalize(x, one(0)) * 255).round().flatten()
    expected = torch.tensor([0] * 300 + [100] * 300 + [200] * 250 + [255] * 50).float()
    assert torch.equal(out, expected)
    flat = torch.full((1, 1, 3, 3), 0.3)
    assert torch.allclose(ops.equalize(flat, one(0)), flat), "one level: unchanged"


def test_autocontrast_stretches_each_channel_to_the_full_range():
    x = torch.tensor([[0.2, 0.4, 0.6], [0.5, 0.5, 0.5]]).view(1, 2, 1, 3)
    out = ops.autocontrast(x, one(0))
    assert torch.allclose(out[0, 0, 0], torch.tensor([0.0, 0.5, 1.0]))
    assert torch.equal(out[0, 1], x[0, 1]), "a constant channel is kept"


# -- geometry ------------------------------------------------------------------------------------------


def test_rotate_is_counter_clockwise_about_the_centre():
    assert torch.allclose(ops.rotate(NINE, one(90.0)), image([[3, 6, 9], [2, 5, 8], [1, 4, 7]]) / 10)
    assert torch.allclose(ops.rotate(NINE, one(-90.0)), image([[7, 4, 1], [8, 5, 2], [9, 6, 3]]) / 10)
    assert torch.allclose(ops.rotate(NINE, one(180.0)), NINE.flip(-1).flip(-2))
    square = torch.ones(1, 1, 4, 4)
    corners = ops.rotate(square, one(45.0))
    assert corners[0, 0, 0, 0] == 0 and corners[0, 0, 1, 1] == 1, "corners outside the rotated image are black"


def test_shear_is_pils_affine_about_the_top_left_corner():
    # nearest: output pixel centre (x + .5, y + .5) reads input floor(x + .5 + v (y + .5))
    assert torch.allclose(ops.shear_x(NINE, one(0.5)), image([[1, 2, 3], [5, 6, 0], [8, 9, 0]]) / 10)
    assert torch.allclose(ops.shear_y(NINE, one(0.5)), image([[1, 5, 6], [4, 8, 9], [7, 0, 0]]) / 10)


def test_translate_moves_by_whole_pixels_and_fills_black():
    assert torch.allclose(ops.translate_x(NINE, one(1.0)), image([[2, 3, 0], [5, 6, 0], [8, 9, 0]]) / 10)
    assert torch.allclose(ops.translate_x(NINE, one(-1.0)), image([[0, 1, 2], [0, 4, 5], [0, 7, 8]]) / 10)
    assert torch.allclose(ops.translate_y(NINE, one(1.0)), image([[4, 5, 6], [7, 8, 9], [0, 0, 0]]) / 10)


def test_bilinear_interpolates_pixel_centres_with_the_border_repeated():
    x = image([[0.1, 0.2, 0.3, 0.4]])
    assert torch.allclose(ops.translate_x(x, one(0.5), mode="bilinear"), image([[0.15, 0.25, 0.35, 0.0]]))
    assert torch.allclose(ops.translate_x(x, one(-0.25), mode="bilinear"), image([[0.1, 0.175, 0.275, 0.375]]))


def test_geometric_ops_take_one_parameter_per_image():
    both = torch.cat([NINE, NINE])
    out = ops.translate_x(both, torch.tensor([1.0, -1.0]))
    assert torch.equal(out[0], ops.translate_x(NINE, one(1.0))[0]) and torch.equal(out[1], ops.translate_x(NINE, one(-1.0))[0])


# -- Cutout --------------------------------------------------------------------------------------------


def boxes(out: torch.Tensor, value: float) -> list[tuple[int, int]]:
    """(height, width) of the filled region of each image, checking it is one rectangle."""
    sizes = []
    for plane in out[:, 0]:
        filled = (plane - value).abs() < 1e-6
        rows, cols = filled.any(1).nonzero().flatten(), filled.any(0).nonzero().flatten()
        height, width = len(rows), len(cols)
        assert int(filled.sum()) == height * width
        if height:
            assert bool(filled[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].all())
        sizes.append((height, width))
    return sizes


def test_fill_box_fills_the_half_open_rectangle():
    out = ops.fill_box(torch.zeros(1, 1, 4, 4), torch.tensor([1]), torch.tensor([3]), torch.tensor([0]), torch.tensor([2]), 0.5)
    expected = torch.zeros(1, 1, 4, 4)
    expected[..., 1:3, 0:2] = 0.5
    assert torch.equal(out, expected)


def test_fixmatch_cutout_is_a_gray_square_that_the_border_may_cut():
    torch.manual_seed(0)
    sizes = boxes(cutout_fixmatch(torch.ones(200, 1, 8, 8), 4), 0.5)
    assert all(1 <= h <= 4 and 1 <= w <= 4 for h, w in sizes)
    assert (4, 4) in sizes and any(h < 4 or w < 4 for h, w in sizes)


def test_feddb_code_cutout_is_pils_inclusive_rectangle():
    torch.manual_seed(0)
    sizes = boxes(cutout_feddb_code(torch.ones(200, 1, 8, 8), torch.full((200,), 2.0)), 127 / 255)
    assert all(1 <= h <= 3 and 1 <= w <= 3 for h, w in sizes)
    assert (3, 3) in sizes, "a 2-pixel CutoutConst covers 3 x 3 pixels away from the border"


# -- the recipes ---------------------------------------------------------------------------------------


def test_fixmatch_pool_is_fixmatchs_list():
    names = [op.name for op in fixmatch_ops()]
    assert len(names) == 14 and "invert" not in names and "cutout" not in names
    assert [op.name for op in feddb_code_ops()][4] == "cutout" and len(feddb_code_ops()) == 15


def test_each_image_draws_its_own_magnitude():
    factor = next(op for op in fixmatch_ops() if op.name == "brightness")
    x = torch.full((40, 1, 2, 2), 0.5)
    torch.manual_seed(0)
    out = rand_augment(x, [factor], n=1)
    ratios = out[:, 0, 0, 0] / 0.5
    assert len(set(ratios.tolist())) == 40
    assert float(ratios.min()) >= 0.05 and float(ratios.max()) <= 0.95


def test_each_image_draws_its_own_operations():
    pool = [Op("dark", lambda n, d, g=None: torch.zeros(n), lambda x, v: x * 0.5), Op("bright", lambda n, d, g=None: torch.zeros(n), lambda x, v: x * 0 + 1)]
    x = torch.full((64, 1, 1, 1), 0.4)
    torch.manual_seed(1)
    out = rand_augment(x, pool, n=2).flatten()
    # dark-dark 0.1, bright-dark 0.5, then bright 1.0: every combination turns up in one batch
    assert {round(v, 4) for v in out.tolist()} == {0.1, 0.5, 1.0}


def test_feddb_code_applies_each_op_with_probability_one_half_at_full_magnitude():
    pool = feddb_code_ops(10.0)
    by_name = {op.name: op for op in pool}
    x = torch.rand(1, 1, 8, 8)
    assert torch.allclose(by_name["solarize"].apply(x, by_name["solarize"].sample(1, x.device)), 1 - x), "threshold 0"
    assert float(by_name["brightness"].sample(1, x.device)) == pytest.approx(1.9)
    shift = by_name["translate_x"]
    assert torch.equal(ops.affine(x, shift.matrix(shift.sample(1, x.device), 8, 8), shift.resample), torch.zeros_like(x)), "100 px of 32"
    assert [op.name for op in pool if op.resample == "bilinear"] == ["shear_x", "shear_y", "translate_x", "translate_y"], "rotate is PIL's default"
    torch.manual_seed(0)
    many = torch.rand(600, 1, 6, 6)
    out = rand_augment(many, pool, n=2, probability=0.5)
    untouched = (out == many).flatten(1).all(1).float().mean()
    assert 0.2 < float(untouched) < 0.33, "neither of the two ops applied: about 1/4 (+ some no-op draws)"


@pytest.mark.parametrize("recipe", ["fixmatch", "feddb-code", "kornia-fixed"])
def test_recipes_are_reproducible_and_keep_shape_dtype_and_device(recipe):
    augment = FixMatchAugment((0.3,), (0.2,), strong_augment=recipe)
    x = torch.randn(8, 1, 12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = augment.strong(x, torch.Generator().manual_seed(5))
    assert torch.equal(a, augment.strong(x, torch.Generator().manual_seed(5)))
    assert not torch.equal(a, augment.strong(x, torch.Generator().manual_seed(6)))
    assert a.shape == x.shape and a.dtype == torch.float64 and a.device == x.device
    rgb = torch.randn(4, 3, 10, 10)
    assert FixMatchAugment((0.5, 0.4, 0.3), (0.2,) * 3, strong_augment=recipe).strong(rgb, torch.Generator()).shape == rgb.shape


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_views_stay_on_the_gpu():
    x = torch.randn(16, 3, 32, 32, device="cuda")
    for recipe in ("fixmatch", "feddb-code"):
        out = FixMatchAugment((0.5,) * 3, (0.25,) * 3, strong_augment=recipe).strong(x, torch.Generator().manual_seed(0))
        assert out.device == x.device and out.shape == x.shape


def test_fixmatch_views_keep_most_of_the_image():
    """At FixMatch's magnitudes most strong views stay close to the image (the old kornia views did not)."""
    x = torch.rand(100, 1, 12, 12, generator=torch.Generator().manual_seed(0))
    standard = (x - 0.3) / 0.2

    def changed(recipe: str) -> float:
        out = FixMatchAugment((0.3,), (0.2,), flip=False, pad_fraction=0.1, cutout=0.0, strong_augment=recipe).strong(
            standard, torch.Generator().manual_seed(1)
        )
        return float(((out * 0.2 + 0.3) - x).abs().mean())

    assert changed("fixmatch") < changed("kornia-fixed")


def test_the_former_kornia_views_are_unchanged():
    """``kornia-fixed``'s views for a seed (values pinned when issue 19 moved its draws to the device; the operations are
    kornia's own, compared with kornia's modules in tests/data/augment/test_kornia_fixed.py; before, kornia drew on the CPU and these
    inputs gave the sums 133.3863, 1036.3865 and 176.0804)."""
    unit = torch.rand(6, 1, 12, 12, generator=torch.Generator().manual_seed(0))
    x = (unit - 0.3) / 0.2
    for flip, total, samples in [
        (True, 539.5086, [-0.6413, -1.5, 0.3824, 1.3147, 1.0, 1.0, -0.6315, 1.6595]),
        (False, 1360.4931, [0.597, 3.0714, 0.3258, 3.5, 3.5, 2.7, 1.0, 3.5]),
    ]:
        out = FixMatchAugment((0.3,), (0.2,), flip=flip, strong_augment="kornia-fixed").strong(x, torch.Generator().manual_seed(7))
        assert float(out.double().sum()) == pytest.approx(total, abs=1e-3)
        assert torch.allclose(out.flatten()[::97][:8], torch.tensor(samples), atol=1e-4)
    unit3 = torch.rand(4, 3, 10, 10, generator=torch.Generator().manual_seed(1))
    mean = torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1)
    out = FixMatchAugment((0.5, 0.4, 0.3), (0.2, 0.2, 0.2), strong_augment="kornia-fixed").strong((unit3 - mean) / 0.2, torch.Generator().manual_seed(3))
    assert float(out.double().sum()) == pytest.approx(616.8641, abs=1e-3)


def test_an_unknown_recipe_is_refused_by_name():
    with pytest.raises(ValueError, match="strong_augment must be one of 'fixmatch', 'feddb-code', 'kornia-fixed'"):
        FixMatchAugment((0.5,), (0.2,), strong_augment="randaugment")


def test_the_algorithms_expose_the_recipe_as_a_field_defaulting_to_fixmatch():
    from fedprior.algorithms.registry import algorithm_spec

    for name in ("fixmatch", "feddb", "fedmatch", "fedrgd", "semifl"):
        field = algorithm_spec(name).hyperparameters()["strong_augment"]
        assert field.default == "fixmatch"
    with pytest.raises(Exception, match="strong_augment"):
        algorithm_spec("feddb").validate({"strong_augment": "kornia"})


# -- against PIL itself (pillow is a dependency) -------------------------------------------------------


def pil_cases():
    from PIL import Image, ImageEnhance, ImageOps

    affine = Image.Transform.AFFINE
    return [
        ("brightness 0.3", lambda x: ops.brightness(x, one(0.3)), lambda im: ImageEnhance.Brightness(im).enhance(0.3)),
        ("brightness 1.7", lambda x: ops.brightness(x, one(1.7)), lambda im: ImageEnhance.Brightness(im).enhance(1.7)),
        ("contrast 0.3", lambda x: ops.contrast(x, one(0.3)), lambda im: ImageEnhance.Contrast(im).enhance(0.3)),
        ("color 0.3", lambda x: ops.color(x, one(0.3)), lambda im: ImageEnhance.Color(im).enhance(0.3)),
        ("sharpness 1.7", lambda x: ops.sharpness(x, one(1.7)), lambda im: ImageEnhance.Sharpness(im).enhance(1.7)),
        ("autocontrast", lambda x: ops.autocontrast(x, one(0)), ImageOps.autocontrast),
        ("equalize", lambda x: ops.equalize(x, one(0)), ImageOps.equalize),
        ("posterize 3", lambda x: ops.posterize(x, torch.tensor([3])), lambda im: ImageOps.posterize(im, 3)),
        ("solarize 100", lambda x: ops.solarize(x, one(100 / 255)), lambda im: ImageOps.solarize(im, 100)),
        ("rotate 17", lambda x: ops.rotate(x, one(17.0)), lambda im: im.rotate(17.0)),
        ("rotate -23 bilinear", lambda x: ops.rotate(x, one(-23.0), mode="bilinear"), lambda im: im.rotate(-23.0, Image.Resampling.BILINEAR)),
        ("shear_x 0.27", lambda x: ops.shear_x(x, one(0.27)), lambda im: im.transform(im.size, affine, (1, 0.27, 0, 0, 1, 0))),
        ("shear_y -0.3", lambda x: ops.shear_y(x, one(-0.3)), lambda im: im.transform(im.size, affine, (1, 0, 0, -0.3, 1, 0))),
        ("translate_x 2.6", lambda x: ops.translate_x(x, one(2.6)), lambda im: im.transform(im.size, affine, (1, 0, 2.6, 0, 1, 0))),
        (
            "translate_y -2.6 bilinear",
            lambda x: ops.translate_y(x, one(-2.6), mode="bilinear"),
            lambda im: im.transform(im.size, affine, (1, 0, 0, 0, 1, -2.6), Image.Resampling.BILINEAR),
        ),
    ]


@pytest.mark.parametrize("channels", [1, 3])
def test_every_op_matches_pil_within_its_8_bit_rounding(channels):
    """On a random 8-bit image, each op gives PIL's pixels to within 2 levels (PIL rounds to 8 bits; resampling: 0.5)."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 256, (9, 11, channels), dtype=np.uint8)
    im = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, "L" if channels == 1 else "RGB")
    x = torch.from_numpy((pixels.astype(np.float32) + 0.5) / 255).permute(2, 0, 1)[None]  # mid-level: the 8-bit level is exact
    for name, ours, pil in pil_cases():
        expected = torch.from_numpy(np.asarray(pil(im)).astype(np.float32)).reshape(9, 11, channels).permute(2, 0, 1)
        tolerance = 0.5 if name.split()[0] in ("rotate", "shear_x", "shear_y", "translate_x") and "bilinear" not in name else 2.0
        assert float((ours(x)[0] * 255 - expected).abs().max()) <= tolerance + 1e-3, name
