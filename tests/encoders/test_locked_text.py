"""The ``locked-text`` offline CLIP stand-in: determinism, caching, the reserved split, zero-shot behaviour.

Everything runs on scikit-learn's digits (1,437 train / 359 test 8x8 images) with 300
pretraining images, so a build takes a couple of seconds; FEDPRIOR_CACHE points at a
temporary folder so the user's cache is never touched. The recipe with pretrain_seed 0 ships
its tower (tests/encoders/test_shipped_towers.py); the tests of training, caching and determinism use
pretrain_seed 1 and up, which do not ship.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedprior.data.dataset import Dataset
from fedprior.data.registry import load_dataset
from fedprior.encoders import locked_text
from fedprior.encoders.locked_text import build_locked_text_encoder, locked_text_fingerprint, pretraining_split, tower_path
from fedprior.encoders.shipped_towers import shipped_tower_for
from fedprior.encoders.standin_probe import logistic_probe_accuracy
from fedprior.errors import ConfigError
from fedprior.experiments.config import EncoderConfig

PRETRAIN = 300


@pytest.fixture(autouse=True)
def one_thread():
    """The work here is tiny: one torch thread is as fast, and does not fight other processes for the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.fixture
def config():
    return EncoderConfig(name="locked-text", pretrain_images=PRETRAIN)


@pytest.fixture
def trained(config, digits):
    """A digits recipe that does not ship: built by training (then cached)."""
    recipe = config.model_copy(update={"pretrain_seed": 1})
    assert shipped_tower_for(locked_text_fingerprint(recipe, digits)) is None, "this test needs a recipe that does not ship"
    return recipe


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def forbid_training(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the locked-text image tower was trained again")

    monkeypatch.setattr(locked_text, "train_image_tower", fail)


def test_interface(digits, config, cache):
    encoder = build_locked_text_encoder(config, digits)
    assert encoder.name == "locked-text" and "CLIP stand-in" in repr(encoder)
    assert encoder.dim == 384 and len(encoder.fingerprint) == 16
    images = encoder.encode_images(digits.test_images[:37], batch_size=10)
    assert images.dtype == torch.float32 and images.shape == (37, 384)
    assert torch.allclose(images, encoder.encode_images(digits.test_images[:37]), atol=1e-5)
    texts = encoder.encode_texts(["a photo of a 3.", "a photo of a 7."])
    assert texts.dtype == torch.float32 and texts.shape == (2, 384)
    assert not torch.allclose(images.norm(dim=1), torch.ones(37), atol=1e-3)  # not normalized here
    with pytest.raises(ValueError, match="1, 8, 8"):
        encoder.encode_images(np.zeros((2, 1, 28, 28), dtype=np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        encoder.encode_images(digits.test_images[:2].astype(np.float32))


def test_colour_images(cache):
    """3x32x32 images (CIFAR-like) go through the same tower; class names may be any words."""
    rng = np.random.default_rng(0)
    labels = np.arange(120) % 3
    images = (rng.integers(0, 60, size=(120, 3, 32, 32)) + 60 * labels[:, None, None, None]).astype(np.uint8)
    data = Dataset("toy-rgb", images[:90], labels[:90], images[90:], labels[90:], ("cat", "ship", "frog"))
    encoder = build_locked_text_encoder(EncoderConfig(name="locked-text", pretrain_images=30), data)
    assert encoder.reserved_train_indices.size == 30
    assert encoder.encode_images(data.test_images).shape == (30, 384)


def test_deterministic_and_leaves_global_rng_alone(digits, trained, tmp_path, monkeypatch):
    features, fingerprints, indices = [], [], []
    threads = torch.get_num_threads()
    for folder, build_threads in (("a", 1), ("b", 2)):  # the tower must not depend on the thread count
        monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / folder))
        torch.manual_seed(123)
        before = torch.get_rng_state()
        torch.set_num_threads(build_threads)
        try:
            encoder = build_locked_text_encoder(trained, digits)
            assert encoder.weights == "trained"
            assert torch.get_num_threads() == build_threads
        finally:
            torch.set_num_threads(threads)
        assert torch.equal(torch.get_rng_state(), before), "building must not draw from torch's global generator"
        assert tower_path(encoder.recipe_fingerprint).is_file()
        features.append(encoder.encode_images(digits.test_images))
        fingerprints.append(encoder.fingerprint)
        indices.append(encoder.reserved_train_indices)
    assert fingerprints[0] == fingerprints[1]
    assert torch.equal(features[0], features[1])
    assert np.array_equal(indices[0], indices[1])
    # another pretraining seed: another fingerprint, split and tower
    other = build_locked_text_encoder(trained.model_copy(update={"pretrain_seed": 2}), digits)
    assert other.fingerprint != fingerprints[0]
    assert not np.array_equal(other.reserved_train_indices, indices[0])
    assert not torch.allclose(other.encode_images(digits.test_images), features[0])


def test_fingerprint_covers_the_recipe(digits, config, monkeypatch):
    base = locked_text_fingerprint(config, digits)
    for update in ({"pretrain_images": PRETRAIN + 1}, {"caption_noise": 0.3}, {"pretrain_seed": 5}):
        assert locked_text_fingerprint(config.model_copy(update=update), digits) != base, update
    # settings that do not change the tower do not change the fingerprint
    assert locked_text_fingerprint(config.model_copy(update={"prompt": "a {}", "batch_size": 7, "normalize": False}), digits) == base
    monkeypatch.setattr(locked_text, "RECIPE_VERSION", locked_text.RECIPE_VERSION + 1)
    assert locked_text_fingerprint(config, digits) != base


def test_second_build_loads_from_the_cache(digits, trained, cache, monkeypatch, capsys):
    first = build_locked_text_encoder(trained, digits)
    assert "training the locked-text stand-in" in capsys.readouterr().err
    assert first.weights == "trained"
    forbid_training(monkeypatch)
    second = build_locked_text_encoder(trained, digits)
    assert "training" not in capsys.readouterr().err
    assert second.weights == "cache"
    assert second.fingerprint == first.fingerprint
    assert np.array_equal(second.reserved_train_indices, first.reserved_train_indices)
    assert torch.equal(second.encode_images(digits.test_images), first.encode_images(digits.test_images))
    assert [p.name for p in tower_path(first.recipe_fingerprint).parent.iterdir()] == [f"{first.recipe_fingerprint}.safetensors"]


def test_reserved_indices_are_the_pretraining_split(digits, trained, cache, monkeypatch):
    seen = {}
    train = locked_text.train_image_tower

    def spy(images, caption_features, seed, *recipe):
        seen.update(images=images.copy(), caption_features=caption_features.clone(), seed=seed)
        return train(images, caption_features, seed, *recipe)

    monkeypatch.setattr(locked_text, "train_image_tower", spy)
    encoder = build_locked_text_encoder(trained, digits)
    reserved = encoder.reserved_train_indices
    assert reserved.dtype == np.int64 and reserved.size == PRETRAIN
    assert np.all(np.diff(reserved) > 0), "sorted and distinct"
    assert reserved[0] >= 0 and reserved[-1] < digits.train_labels.size
    # class-balanced: 30 per class
    assert np.array_equal(np.bincount(digits.train_labels[reserved], minlength=10), np.full(10, PRETRAIN // 10))
    # the tower was trained on exactly those images, with the captions of the split
    assert np.array_equal(seen["images"], digits.train_images[reserved])
    split = pretraining_split(trained, digits)
    assert np.array_equal(split.indices, reserved)
    expected = encoder.encode_texts(list(split.captions))
    assert torch.allclose(seen["caption_features"], expected, atol=1e-5)
    # exactly 40% of the captions name a wrong class; the others the true class, through several templates
    wrong = split.caption_classes != digits.train_labels[reserved]
    assert wrong.sum() == round(0.4 * PRETRAIN)
    assert all(f" {digits.class_names[c]}." in caption for c, caption in zip(split.caption_classes, split.captions, strict=True))
    assert len({caption.rsplit(" ", 1)[0] for caption in split.captions}) >= 4


def test_too_many_pretraining_images_is_a_config_error(digits, config, cache):
    with pytest.raises(ConfigError, match="encoder.pretrain_images"):
        build_locked_text_encoder(config.model_copy(update={"pretrain_images": digits.train_labels.size}), digits)


def test_zero_shot_is_near_uniform_useful_and_below_a_linear_probe(digits, config, cache):
    """The FST-CBDG paper, Eq. (2) and Figure 2, on the shipped digits tower.

    Measured (digits, 300 pretraining images, pretrain_seed 0 / 1 / 2): mean entropy 2.2978 /
    2.2979 / 2.2981 against log 10 = 2.3026 (0.998 log K); zero-shot accuracy 88.9 / 89.1 / 89.7%;
    linear probe 98.1 / 97.8 / 98.1%.
    """
    encoder = build_locked_text_encoder(config, digits)
    assert encoder.weights == "shipped"
    image = F.normalize(encoder.encode_images(digits.test_images), dim=1)
    text = F.normalize(encoder.encode_texts([config.prompt.format(c) for c in digits.class_names]), dim=1)
    p = torch.softmax(image @ text.T, dim=1)  # Eq. (2): raw cosine similarities, no logit scale
    entropy = -(p * p.log()).sum(1)
    log_k = math.log(10)
    assert entropy.mean() > 0.99 * log_k
    assert entropy.max() < log_k
    labels = torch.from_numpy(digits.test_labels)
    zero_shot = (p.argmax(1) == labels).float().mean().item()
    assert zero_shot > 0.6, zero_shot  # chance is 0.1

    keep = np.setdiff1d(np.arange(digits.train_labels.size), encoder.reserved_train_indices)
    train = F.normalize(encoder.encode_images(digits.train_images[keep]), dim=1)
    probe = logistic_probe_accuracy(train, torch.from_numpy(digits.train_labels[keep]), image, labels)
    assert probe > zero_shot + 0.04, (probe, zero_shot)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "another tower"])
def test_a_damaged_or_mismatched_cache_file_is_rebuilt_with_a_warning(digits, trained, cache, monkeypatch, damage):
    encoder = build_locked_text_encoder(trained, digits)
    path = tower_path(encoder.recipe_fingerprint)
    reference = encoder.encode_images(digits.test_images)
    if damage == "garbage":
        path.write_bytes(b"not a safetensors file")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-1000])
    else:  # a valid file, but trained with another seed
        other = build_locked_text_encoder(trained.model_copy(update={"pretrain_seed": 3}), digits)
        path.write_bytes(tower_path(other.recipe_fingerprint).read_bytes())
    with pytest.warns(RuntimeWarning, match="cannot be used.*rebuilding"):
        rebuilt = build_locked_text_encoder(trained, digits)
    assert torch.equal(rebuilt.encode_images(digits.test_images), reference)
    forbid_training(monkeypatch)  # and the repaired file is used next time
    assert torch.equal(build_locked_text_encoder(trained, digits).encode_images(digits.test_images), reference)


@pytest.mark.benchmark
@pytest.mark.parametrize("seed", [0, 1])
def test_fashion_mnist_defaults(tmp_path, monkeypatch, seed):
    """The defaults on Fashion-MNIST (run with: pytest -m benchmark tests/encoders/test_locked_text.py -s).

    pretrain_seed 0 is the shipped tower (loaded, not trained); seed 1 is trained here.
    Measured (2 shared CPU cores, pretrain_seed 0 / 1): build 31-59 s for a trained tower
    (varies with the load of the machine), zero-shot 77.9 / 76.4%, mean entropy 2.2990 /
    2.2992 (log 10 = 2.3026), linear probe on the 58,000 non-reserved training images
    86.4 / 85.6%.
    """
    import time

    from fedprior.encoders.text import text_encoder
    from fedprior.errors import DatasetNotFoundError

    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path))
    try:
        data = load_dataset("fashion-mnist")
    except DatasetNotFoundError:
        pytest.skip("Fashion-MNIST is not installed")
    config = EncoderConfig(name="locked-text", pretrain_seed=seed)
    text_encoder(config.text_model)  # loading MiniLM (a few seconds) is not part of the build time
    start = time.perf_counter()
    encoder = build_locked_text_encoder(config, data)
    build = time.perf_counter() - start
    assert encoder.weights == ("shipped" if seed == 0 else "trained")
    image = F.normalize(encoder.encode_images(data.test_images), dim=1)
    text = F.normalize(encoder.encode_texts([config.prompt.format(c) for c in data.class_names]), dim=1)
    p = torch.softmax(image @ text.T, dim=1)
    entropy = -(p * p.log()).sum(1).mean().item()
    labels = torch.from_numpy(data.test_labels)
    zero_shot = (p.argmax(1) == labels).float().mean().item()
    keep = np.setdiff1d(np.arange(data.train_labels.size), encoder.reserved_train_indices)
    train = F.normalize(encoder.encode_images(data.train_images[keep]), dim=1)
    probe = logistic_probe_accuracy(train, torch.from_numpy(data.train_labels[keep]), image, labels)
    print(
        f"\nlocked-text on fashion-mnist (pretrain_seed {seed}, {encoder.weights}): build {build:.1f} s, zero-shot {zero_shot:.4f}, entropy {entropy:.4f}, probe {probe:.4f}"
    )
    assert build < 120
    assert entropy > 0.99 * math.log(10)
    assert 0.6 < zero_shot < probe - 0.04


def test_a_tower_file_with_changed_weights_fails_its_checksum(tmp_path):
    """The README's "a damaged cache file is detected and rebuilt": sign-flipped weights with intact metadata too."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from fedprior.encoders.locked_text import _load, _new_tower, _save

    path = tmp_path / "tower.safetensors"
    _save(_new_tower(1, 8, 16, seed=0), path, "fp")
    assert _load(path, "fp", (1, 8, 8), 0) is not None
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
        state = {key: handle.get_tensor(key) for key in handle.keys()}
    name = next(k for k, v in state.items() if v.is_floating_point() and v.numel() > 4)
    state[name] = -state[name]
    save_file(state, str(path), metadata=metadata)
    with pytest.raises(ValueError, match="checksum mismatch"):
        _load(path, "fp", (1, 8, 8), 0)
