"""The locked-text stand-in's shipped towers: used without training, intact, damage reported, and `fedprior standin build`.

Apart from one rebuild of the tiny digits recipe (seconds), nothing here trains: the
command's tests replace the training with a fresh untrained tower, and the tests that
damage or rewrite shipped files work on a copy of the towers folder.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from fedprior.atomic import tensors_sha256
from fedprior.data.registry import load_dataset
from fedprior.encoders import locked_text, shipped_towers
from fedprior.encoders.locked_text import _new_tower, build_locked_text_encoder, locked_text_fingerprint, tower_path
from fedprior.errors import DatasetNotFoundError, FedpriorError
from fedprior.experiments.config import EncoderConfig, list_presets, load_config
from tests.support.cli import error_line, invoke

MB = 1e6


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.fixture
def config():
    """The tests' stand-in (tests/support/cli.py STANDIN): it ships."""
    return EncoderConfig(**shipped_towers.RECIPES["digits-300"].settings())


def forbid(monkeypatch, module, name):
    def fail(*args, **kwargs):
        raise AssertionError(f"{name} was called")

    monkeypatch.setattr(module, name, fail)


@pytest.fixture
def towers_copy(tmp_path, monkeypatch):
    """The shipped towers folder copied to tmp_path, and the package pointed at the copy."""
    folder = tmp_path / "towers"
    shutil.copytree(shipped_towers.FOLDER, folder)
    monkeypatch.setattr(shipped_towers, "FOLDER", folder)
    monkeypatch.setattr(shipped_towers, "MANIFEST", folder / "towers.json")
    return folder


def untrained(config, dataset, split=None):
    """Stands in for the minute of training in the command's tests: a fresh tower of the right shape."""
    channels, size, _ = dataset.image_shape
    return _new_tower(channels, size, 384, seed=7)


def test_every_recipe_ships_intact_and_small():
    towers = shipped_towers.shipped_towers()
    assert set(towers) == set(shipped_towers.RECIPES)
    for name, tower in towers.items():
        assert tower.path.is_file() and tower.path.stat().st_size == tower.bytes
        assert tower.bytes < 2 * MB, (name, tower.bytes)
        assert tower.settings == shipped_towers.RECIPES[name].settings()
        assert tower.recipe_version == locked_text.RECIPE_VERSION
        loaded = locked_text.load_shipped_tower(tower)
        assert tensors_sha256(loaded.state_dict()) == tower.weights_sha256
        assert all(torch.isfinite(v).all() for v in loaded.state_dict().values() if v.is_floating_point())


def test_the_wheel_carries_the_shipped_towers():
    """pyproject's package-data globs cover every shipped file (an editable install would not notice if they did not)."""
    import tomllib
    from fnmatch import fnmatch
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["fedprior"]
    package = root / "src" / "fedprior"
    files = [shipped_towers.MANIFEST] + [tower.path for tower in shipped_towers.shipped_towers().values()]
    for path in files:
        assert any(fnmatch(path.relative_to(package).as_posix(), pattern) for pattern in globs), path


def test_the_shipped_recipe_loads_the_shipped_weights_without_training(digits, config, monkeypatch, capsys):
    forbid(monkeypatch, locked_text, "train_recipe")
    forbid(monkeypatch, locked_text, "train_image_tower")
    forbid(monkeypatch, locked_text, "text_encoder")  # not even the text tower is loaded to build it
    encoder = build_locked_text_encoder(config, digits)
    assert encoder.weights == "shipped" and "weights=shipped" in repr(encoder)
    shipped = shipped_towers.RECIPES["digits-300"]
    assert tensors_sha256(encoder.tower.state_dict()) == shipped_towers.shipped_towers()[shipped.name].weights_sha256
    assert not tower_path(encoder.recipe_fingerprint).exists(), "nothing is written to the user cache"
    assert "training" not in capsys.readouterr().err
    # the feature cache is keyed on the weights: the shipped tower's key, not the recipe's alone
    assert encoder.fingerprint == locked_text.weights_fingerprint(encoder.recipe_fingerprint, encoder.tower)
    result = invoke("encode", "--dataset", "digits", "--encoder", "locked-text", "--set", "encoder.pretrain_images=300", "--split", "test")
    assert result.exit_code == 0 and f"fingerprint {encoder.fingerprint}, shipped weights" in result.stdout, result.output


def test_a_recipe_that_does_not_ship_is_trained(digits, config, monkeypatch):
    other = config.model_copy(update={"pretrain_images": 200})
    assert shipped_towers.shipped_tower_for(locked_text_fingerprint(other, digits)) is None
    calls = []
    monkeypatch.setattr(locked_text, "train_recipe", lambda *args: calls.append(args) or untrained(*args))
    encoder = build_locked_text_encoder(other, digits)
    assert encoder.weights == "trained" and len(calls) == 1
    assert tower_path(encoder.recipe_fingerprint).is_file()


def test_every_locked_text_preset_uses_a_shipped_tower():
    try:
        data = load_dataset("fashion-mnist")
    except DatasetNotFoundError:
        pytest.skip("Fashion-MNIST is not installed")
    checked = 0
    for name in list_presets():
        _, preset = load_config(name)
        if preset.encoder.name != "locked-text":
            continue
        assert preset.data.dataset == "fashion-mnist", name
        assert shipped_towers.shipped_tower_for(locked_text_fingerprint(preset.encoder, data)) is not None, name
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("damage", ["garbage", "missing", "weights edited"])
def test_a_damaged_shipped_tower_is_an_error_not_a_retrain(digits, config, towers_copy, monkeypatch, damage):
    path = towers_copy / "digits-300.safetensors"
    if damage == "garbage":
        path.write_bytes(b"not a safetensors file")
    elif damage == "missing":
        path.unlink()
    else:  # the weights change and the file's own checksum is rewritten to match: only the package's record can tell
        tower = locked_text.load_shipped_tower(shipped_towers.shipped_towers()["digits-300"])
        with torch.no_grad():
            tower.projection.weight.mul_(-1)
        locked_text.save_tower(tower, path, locked_text_fingerprint(config, digits))
    forbid(monkeypatch, locked_text, "train_recipe")
    with pytest.raises(FedpriorError, match=r"shipped image tower .*digits-300.safetensors is damaged .*reinstall fedprior"):
        build_locked_text_encoder(config, digits)


def test_a_damaged_shipped_tower_is_one_line_in_the_cli(towers_copy, monkeypatch):
    (towers_copy / "digits-300.safetensors").write_bytes(b"\0" * 100)
    forbid(monkeypatch, locked_text, "train_recipe")
    result = invoke("encode", "--dataset", "digits", "--encoder", "locked-text", "--set", "encoder.pretrain_images=300", "--no-progress")
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith("error: locked-text: the shipped image tower") and "reinstall fedprior" in line
    listing = invoke("standin", "list")
    assert listing.exit_code == 0 and "digits-300" in listing.output and "DAMAGED" in listing.output


def test_a_damaged_tower_list_is_an_error(digits, config, towers_copy):
    (towers_copy / "towers.json").write_text("{not json")
    with pytest.raises(FedpriorError, match="tower list .* is damaged .*reinstall"):
        build_locked_text_encoder(config, digits)


def test_build_check_reproduces_the_shipped_digits_tower():
    """The real recipe, retrained: on the machine kind the tower was built on it must match bit for bit."""
    shipped = shipped_towers.shipped_towers()["digits-300"]
    if shipped.built_on != shipped_towers.build_machine():
        pytest.skip(f"the shipped tower was built on {shipped.built_on}; this is {shipped_towers.build_machine()}")
    result = invoke("standin", "build", "--recipe", "digits-300", "--check")
    assert result.exit_code == 0, result.output
    assert f"weights SHA-256 {shipped.weights_sha256}" in result.output
    assert "matches the shipped weights bit for bit" in result.output


@pytest.mark.parametrize("built_on", ["this machine", "another machine"])
def test_build_check_fails_on_other_weights_and_says_what_it_means(towers_copy, monkeypatch, built_on):
    manifest = json.loads((towers_copy / "towers.json").read_text())
    manifest["towers"]["digits-300"]["built_on"] = shipped_towers.build_machine() if built_on == "this machine" else "Plan9 mips, torch 0.1"
    (towers_copy / "towers.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(locked_text, "train_recipe", untrained)
    result = invoke("standin", "build", "--recipe", "digits-300", "--check")
    assert result.exit_code == 1, result.output
    assert "DIFFERS from the shipped weights" in result.output and "check failed: digits-300" in result.output
    if built_on == "this machine":
        assert "on the machine kind they were built on" in result.output and "changed" in result.output
    else:
        assert "another machine kind (Plan9 mips, torch 0.1)" in result.output and "still use the shipped weights" in result.output
    # without --check the same report, exit 0
    assert invoke("standin", "build", "--recipe", "digits-300").exit_code == 0


def test_build_write_refreshes_the_shipped_tower_and_its_fingerprint(digits, config, towers_copy, monkeypatch):
    monkeypatch.setattr(locked_text, "train_recipe", untrained)
    result = invoke("standin", "build", "--recipe", "digits-300", "--write")
    assert result.exit_code == 0, result.output
    entry = shipped_towers.shipped_towers()["digits-300"]
    expected = tensors_sha256(untrained(config, digits).state_dict())
    assert entry.weights_sha256 == expected and entry.built_on == shipped_towers.build_machine()
    assert entry.bytes == (towers_copy / "digits-300.safetensors").stat().st_size
    assert set(shipped_towers.shipped_towers()) == set(shipped_towers.RECIPES), "the other recipe's entry is kept"
    # runs now load the new file, and --check agrees with it
    assert tensors_sha256(build_locked_text_encoder(config, digits).tower.state_dict()) == expected
    assert invoke("standin", "build", "--recipe", "digits-300", "--check").exit_code == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--check", "--write"], "--check and --write exclude each other: check the shipped towers, or replace them"),
        (["--recipe", "cifar"], "--recipe: unknown recipe 'cifar'; accepted: fashion-mnist, digits-300, fashion-mnist-v2-headroom"),
    ],
)
def test_build_bad_flags_are_one_line(args, message, monkeypatch):
    forbid(monkeypatch, locked_text, "train_recipe")
    result = invoke("standin", "build", *args)
    assert result.exit_code == 2 and error_line(result) == f"error: {message}"
