"""The locked-text stand-in's named recipes (``encoder.recipe``): fingerprints, the shipped towers they select, bad names.

Nothing here trains a tower: training is replaced by a spy returning a fresh untrained tower.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from fedprior.data.registry import load_dataset
from fedprior.encoders import locked_text, shipped_towers, standin_recipes
from fedprior.encoders.locked_text import _new_tower, build_locked_text_encoder, locked_text_fingerprint, resolved_recipe
from fedprior.errors import ConfigError, DatasetNotFoundError
from fedprior.experiments.config import EncoderConfig
from tests.support.cli import error_line, invoke

V1_DIGITS_300 = "34e7b461a0e3aca7"
"""v1's recipe fingerprint on digits with 300 pretraining images, as shipped before recipes had names: it must never change."""
V1_FASHION_MNIST = "f3ac4f1ab3d8f5e9"
HEADROOM = "v2-headroom"


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.fixture(scope="module")
def fashion():
    try:
        return load_dataset("fashion-mnist")
    except DatasetNotFoundError:
        pytest.skip("Fashion-MNIST is not installed")


def digits_config(**fields):
    return EncoderConfig(name="locked-text", pretrain_images=300, **fields)


def test_the_default_recipe_is_v1_and_its_fingerprint_is_unchanged(digits, fashion):
    assert EncoderConfig().recipe == "v1" == standin_recipes.DEFAULT_RECIPE
    assert locked_text_fingerprint(digits_config(), digits) == V1_DIGITS_300
    assert locked_text_fingerprint(digits_config(recipe="v1", caption_noise=0.4), digits) == V1_DIGITS_300  # explicit = the recipe's
    assert locked_text_fingerprint(EncoderConfig(name="locked-text"), fashion) == V1_FASHION_MNIST
    assert shipped_towers.shipped_tower_for(V1_FASHION_MNIST) == shipped_towers.shipped_towers()["fashion-mnist"]


def test_the_recipe_reaches_the_fingerprint(digits, monkeypatch):
    def fingerprint(recipe):
        return locked_text_fingerprint(EncoderConfig(name="locked-text", recipe=recipe), digits)  # the recipe's own data settings

    headroom = fingerprint(HEADROOM)
    assert headroom != fingerprint("v1")
    # every training setting of a recipe counts, and its data defaults too
    base = standin_recipes.STANDIN_RECIPES[HEADROOM]
    seen = {headroom}
    for change in ({"epochs": base.epochs + 1}, {"tower_width": 16}, {"tower_hidden": 128}, {"caption_noise": 0.3}, {"pretrain_images": 2001}):
        monkeypatch.setitem(standin_recipes.STANDIN_RECIPES, "variant", dataclasses.replace(base, name="variant", **change))
        assert fingerprint("variant") not in seen, change
        seen.add(fingerprint("variant"))
    # the name alone does not: two names with v1's settings share v1's tower
    monkeypatch.setitem(standin_recipes.STANDIN_RECIPES, "v1-again", dataclasses.replace(standin_recipes.STANDIN_RECIPES["v1"], name="v1-again"))
    assert locked_text_fingerprint(digits_config(recipe="v1-again"), digits) == V1_DIGITS_300


def test_the_recipe_reaches_the_training(digits, monkeypatch):
    seen = []

    def spy(images, caption_features, seed, recipe):
        seen.append(recipe)
        return _new_tower(1, 8, caption_features.shape[1], seed, recipe)

    monkeypatch.setattr(locked_text, "train_image_tower", spy)
    small = dataclasses.replace(standin_recipes.STANDIN_RECIPES[HEADROOM], name="small", tower_width=8, tower_hidden=16)
    monkeypatch.setitem(standin_recipes.STANDIN_RECIPES, "small", small)
    encoder = build_locked_text_encoder(digits_config(recipe="small"), digits)
    assert encoder.weights == "trained" and encoder.recipe == "small" and "recipe=small" in repr(encoder)
    assert seen == [dataclasses.replace(small, pretrain_images=300)]
    assert seen[0].epochs == standin_recipes.STANDIN_RECIPES[HEADROOM].epochs
    assert encoder.tower.features[0].out_channels == 8 and encoder.tower.projection.in_features == 16
    # the cached tower of that size loads back (not retrained)
    again = build_locked_text_encoder(digits_config(recipe="small"), digits)
    assert again.weights == "cache" and len(seen) == 1


def test_the_headroom_recipe_ships_and_loads_without_training(fashion, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("trained")

    monkeypatch.setattr(locked_text, "train_recipe", fail)
    monkeypatch.setattr(locked_text, "train_image_tower", fail)
    shipped = shipped_towers.shipped_towers()[f"fashion-mnist-{HEADROOM}"]
    assert shipped.settings["recipe"] == HEADROOM
    config = EncoderConfig(name="locked-text", recipe=HEADROOM)
    assert locked_text_fingerprint(config, fashion) == shipped.recipe_fingerprint != V1_FASHION_MNIST
    encoder = build_locked_text_encoder(config, fashion)
    assert encoder.weights == "shipped" and encoder.recipe == HEADROOM
    assert locked_text.tensors_sha256(encoder.tower.state_dict()) == shipped.weights_sha256
    # the shipped settings, written out in full, select the same tower
    assert locked_text_fingerprint(EncoderConfig(**shipped_towers.RECIPES[shipped.name].settings()), fashion) == shipped.recipe_fingerprint
    recipe = resolved_recipe(config)
    assert (recipe.pretrain_images, recipe.caption_noise) == (shipped.settings["pretrain_images"], shipped.settings["caption_noise"])


def test_an_unknown_recipe_is_one_line_naming_the_field_and_the_names(digits):
    import fedprior

    with pytest.raises(ConfigError) as error:
        fedprior.load_config("zero-shot", {"encoder.recipe": "v9"})
    assert str(error.value) == f"encoder.recipe: unknown recipe 'v9'; accepted: v1, {HEADROOM} (got 'v9')"
    with pytest.raises(ConfigError, match=rf"^encoder.recipe: unknown recipe 'v9'; accepted: v1, {HEADROOM}$"):  # a config built unchecked
        build_locked_text_encoder(digits_config().model_copy(update={"recipe": "v9"}), digits)
    result = invoke("encode", "--dataset", "digits", "--encoder", "locked-text", "--set", "encoder.recipe=v9", "--no-progress")
    assert result.exit_code == 2
    assert error_line(result) == f"error: encoder.recipe: unknown recipe 'v9'; accepted: v1, {HEADROOM} (got 'v9')"


def test_the_training_loop_runs_the_recipes_epochs_at_its_size(monkeypatch):
    calls = []
    loss = locked_text.clip_loss
    monkeypatch.setattr(locked_text, "clip_loss", lambda *args: calls.append(1) or loss(*args))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(30, 1, 8, 8), dtype=np.uint8)
    captions = torch.randn(30, 6, generator=torch.Generator().manual_seed(0))
    recipe = standin_recipes.StandinRecipe("tiny", epochs=3, pretrain_images=30, caption_noise=0.4, tower_width=4, tower_hidden=8)
    tower = locked_text.train_image_tower(images, captions, 0, recipe)
    assert len(calls) == 3  # one batch of 30 per epoch
    assert tower.features[0].out_channels == 4 and tower.projection.in_features == 8 and tower.out_dim == 6
