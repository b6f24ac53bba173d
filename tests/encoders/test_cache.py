"""The on-disk feature cache: hits, corruption detection, keys, atomic writes."""

import os
import warnings

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from fedprior.encoders.cache import cache_path, load_or_encode, tensor_checksum
from tests.support.cli import invoke as cli
from tests.support.cli import linear_args
from tests.support.damage import _write, no_space


class CountingEncoder:
    """Features are a fixed random projection of the pixels; counts the images it was asked to encode."""

    reserved_train_indices = np.zeros(0, dtype=np.int64)

    def __init__(self, dim: int = 5, seed: int = 0, name: str = "counting") -> None:
        self.name = name
        self.dim = dim
        self.fingerprint = f"counting{dim}s{seed}"
        self.projection = torch.from_numpy(np.random.default_rng(seed).normal(size=(16, dim)).astype(np.float32))
        self.encoded = 0
        self.calls = 0

    def encode_images(self, images, batch_size=256):
        self.encoded += len(images)
        self.calls += 1
        return torch.from_numpy(images.reshape(len(images), -1).astype(np.float32)) @ self.projection


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, size=(23, 1, 4, 4), dtype=np.uint8), rng.integers(0, 3, size=23)


def expected(encoder, images):
    return torch.from_numpy(images.reshape(len(images), -1).astype(np.float32)) @ encoder.projection


def test_second_call_encodes_nothing(cache, data):
    images, labels = data
    encoder = CountingEncoder()
    first = load_or_encode(encoder, "toy", "train", images, labels, batch_size=5, progress=False).features
    assert encoder.encoded == 23 and encoder.calls == 5  # batches of 5: 5+5+5+5+3
    torch.testing.assert_close(first, expected(encoder, images))
    second = load_or_encode(encoder, "toy", "train", images, labels, batch_size=5, progress=False).features
    assert encoder.encoded == 23
    assert torch.equal(first, second) and second.dtype == torch.float32
    path = cache_path(encoder, "toy", "train", images, labels)
    assert path.parent == cache / "features" / "toy" and path.name.startswith(f"train-{encoder.fingerprint}-")
    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata()
    assert meta["encoder"] == "counting" and meta["dataset"] == "toy" and meta["split"] == "train"
    assert meta["count"] == "23" and meta["dim"] == "5" and meta["checksum"] == tensor_checksum(first)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left behind


def test_no_cache_encodes_every_time_and_writes_nothing(cache, data):
    images, labels = data
    encoder = CountingEncoder()
    for _ in range(2):
        load_or_encode(encoder, "toy", "train", images, labels, use_cache=False, progress=False)
    assert encoder.encoded == 46
    assert not (cache / "features").exists()


def _truncate(path):
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size - 17)


def _flip_tensor_bytes(path):
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF  # last tensor bytes: the header still parses, the checksum does not match
    path.write_bytes(bytes(raw))


def _garbage_header(path):
    raw = bytearray(path.read_bytes())
    raw[0:8] = (10**12).to_bytes(8, "little")  # header length beyond the file
    path.write_bytes(bytes(raw))


def _wrong_shape(path):
    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata()
    features = torch.zeros(22, 5)
    save_file({"features": features}, str(path), metadata={**meta, "checksum": tensor_checksum(features)})


def _no_metadata(path):
    save_file({"features": torch.zeros(23, 5)}, str(path))


@pytest.mark.parametrize(
    "damage, problem",
    [
        (_truncate, "unreadable"),
        (_flip_tensor_bytes, "checksum"),
        (_garbage_header, "unreadable"),
        (_wrong_shape, "tensor is"),
        (_no_metadata, "metadata"),
    ],
)
def test_damaged_file_is_reported_and_rebuilt(cache, data, damage, problem):
    images, labels = data
    encoder = CountingEncoder()
    good = load_or_encode(encoder, "toy", "train", images, labels, progress=False).features
    path = cache_path(encoder, "toy", "train", images, labels)
    damage(path)
    with pytest.warns(UserWarning, match=problem) as record:
        rebuilt = load_or_encode(encoder, "toy", "train", images, labels, progress=False).features
    assert str(path) in str(record[0].message)
    assert encoder.encoded == 46
    torch.testing.assert_close(rebuilt, good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt file is good again: no warning, no encoding
        load_or_encode(encoder, "toy", "train", images, labels, progress=False)
    assert encoder.encoded == 46


def test_keys_separate_encoders_data_and_splits(cache, data):
    images, labels = data
    a, b = CountingEncoder(seed=0), CountingEncoder(seed=1)
    fa = load_or_encode(a, "toy", "train", images, labels, progress=False).features
    fb = load_or_encode(b, "toy", "train", images, labels, progress=False).features
    assert not torch.allclose(fa, fb) and b.encoded == 23
    changed = images.copy()
    changed[0, 0, 0, 0] ^= 1
    load_or_encode(a, "toy", "train", changed, labels, progress=False)
    relabeled = labels.copy()
    relabeled[0] = (relabeled[0] + 1) % 3
    load_or_encode(a, "toy", "train", images, relabeled, progress=False)
    load_or_encode(a, "toy", "test", images, labels, progress=False)
    assert a.encoded == 4 * 23
    assert len(list((cache / "features" / "toy").iterdir())) == 5


def test_load_or_encode_reports_hits(cache, data):
    images, labels = data
    encoder = CountingEncoder()
    miss = load_or_encode(encoder, "toy", "train", images, labels, progress=False)
    hit = load_or_encode(encoder, "toy", "train", images, labels, progress=False)
    assert (miss.hit, hit.hit) == (False, True)
    assert miss.path == hit.path and miss.path.is_file() and hit.seconds >= 0


def test_failed_write_warns_and_leaves_no_file(cache, data, monkeypatch):
    images, labels = data
    encoder = CountingEncoder()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.warns(UserWarning, match="cannot be written .*going on without the cache"):
        features = load_or_encode(encoder, "toy", "train", images, labels, progress=False).features
    torch.testing.assert_close(features, expected(encoder, images))  # the cache is optional: the run goes on
    assert list((cache / "features" / "toy").iterdir()) == []


def test_wrong_feature_shape_from_encoder_is_an_error(cache, data):
    images, labels = data
    encoder = CountingEncoder()
    encoder.dim = 6  # claims 6, returns 5
    with pytest.raises(RuntimeError, match="dim 6"):
        load_or_encode(encoder, "toy", "train", images, labels, progress=False)


def test_progress_bar_runs(cache, data, capsys):
    images, labels = data
    encoder = CountingEncoder()
    out = load_or_encode(encoder, "toy", "train", images, labels, batch_size=4, progress=True).features
    assert out.shape == (23, 5)


@pytest.fixture
def encode_again():
    """Forget the features kept in memory by an earlier test, so this one encodes (and writes the cache)."""
    from fedprior.experiments.inputs import _PREPARED

    _PREPARED.clear()


def test_unwritable_cache_folder_is_a_warning_and_the_run_goes_on(tmp_path, tiny_clip, encode_again):
    blocker = _write(tmp_path / "not-a-folder", b"x")
    result = cli(*linear_args(tiny_clip, tmp_path / "run"), cache=blocker / "cache")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: feature cache")]
    assert len(warnings) == 2 and all("going on without the cache" in w for w in warnings), result.stderr


def test_full_cache_disk_is_a_warning_and_the_run_goes_on(tmp_path, tiny_clip, monkeypatch, encode_again):
    import fedprior.encoders.cache as cache

    monkeypatch.setattr(cache, "save_tensors", no_space(cache.save_tensors))
    result = cli(*linear_args(tiny_clip, tmp_path / "run"), cache=tmp_path / "cache")
    assert result.exit_code == 0, result.stderr
    assert "(No space left on device); going on without the cache" in result.stderr
