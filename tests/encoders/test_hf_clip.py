"""Real CLIP encoders behind one interface: Hugging Face CLIP (tiny random model), open_clip, the registry, `fedprior encode`."""

import json
import socket
import sys
import urllib.request

import numpy as np
import pytest
import torch

from fedprior.data import load_dataset
from fedprior.encoders.base import VisionLanguageEncoder
from fedprior.encoders.preprocess import PreprocessConfig, preprocess_images
from fedprior.encoders.registry import build_encoder, class_text_features, encode_dataset
from fedprior.errors import ConfigError, FedpriorError
from fedprior.experiments.config import EncoderConfig
from tests.support.tiny_clip import PROJECTION_DIM, make_tiny_clip

# resize the shorter side to 36, crop 32: exercises both steps; unusual mean/std prove the file is read
PREPROCESSOR = {
    "size": {"shortest_edge": 36},
    "crop_size": {"height": 32, "width": 32},
    "do_center_crop": True,
    "do_normalize": True,
    "image_mean": [0.5, 0.4, 0.3],
    "image_std": [0.2, 0.25, 0.3],
}
EXPECTED_PREPROCESS = PreprocessConfig(size=36, crop=32, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
OPEN_CLIP_REASON = "open_clip cannot be imported here: it needs torchvision, which this machine lacks (no CPU build next to torch 2.13)"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny", seed=0, preprocessor=PREPROCESSOR)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to reach the network fails (and, even if the code under test swallows the error, fails the test)."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[:2])
        raise AssertionError(f"network access attempted: {args[:2]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    yield
    assert not attempts, f"network access attempted: {attempts}"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    return tmp_path / "cache"


def hf_encoder(folder, digits):
    return build_encoder(EncoderConfig(name=f"hf-clip:{folder}"), digits)


# ---------------------------------------------------------------- Hugging Face CLIP


def test_hf_clip_shapes_and_protocol(tiny_folder, digits, no_network):
    encoder = hf_encoder(tiny_folder, digits)
    assert isinstance(encoder, VisionLanguageEncoder)
    assert encoder.name == f"hf-clip:{tiny_folder}" and encoder.dim == PROJECTION_DIM
    assert encoder.preprocess == EXPECTED_PREPROCESS
    assert encoder.reserved_train_indices.dtype == np.int64 and encoder.reserved_train_indices.size == 0
    images = encoder.encode_images(digits.train_images[:10], batch_size=4)
    assert images.shape == (10, PROJECTION_DIM) and images.dtype == torch.float32
    assert torch.isfinite(images).all() and images.norm(dim=1).min() > 0
    texts = encoder.encode_texts(["a photo of a 0.", "a photo of a 1.", "a much longer sentence " * 8])
    assert texts.shape == (3, PROJECTION_DIM) and texts.dtype == torch.float32


def test_hf_clip_equals_transformers_on_the_same_input(tiny_folder, digits):
    from transformers import AutoTokenizer, CLIPModel

    encoder = hf_encoder(tiny_folder, digits)
    model = CLIPModel.from_pretrained(str(tiny_folder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_folder))
    images = digits.train_images[:7]
    pixels = preprocess_images(images, EXPECTED_PREPROCESS)
    assert pixels.shape == (7, 3, 32, 32)
    texts = ["a photo of a 3.", "a photo of a 4."]
    with torch.no_grad():
        image_ref = model.get_image_features(pixel_values=pixels)
        text_ref = model.get_text_features(**tokenizer(texts, padding=True, return_tensors="pt"))
    image_ref = getattr(image_ref, "pooler_output", image_ref)
    text_ref = getattr(text_ref, "pooler_output", text_ref)
    torch.testing.assert_close(encoder.encode_images(images, batch_size=3), image_ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(encoder.encode_texts(texts), text_ref, atol=1e-5, rtol=1e-4)
    # Algorithm 1 lines 1-3: one prompt per class through the text tower
    prior = class_text_features(encoder, ["3", "4"], "a photo of a {}.")
    torch.testing.assert_close(prior, text_ref, atol=1e-5, rtol=1e-4)


def test_hf_clip_fingerprint_is_stable_and_tracks_weights_and_preprocessing(tiny_folder, digits, tmp_path):
    first = hf_encoder(tiny_folder, digits).fingerprint
    assert hf_encoder(tiny_folder, digits).fingerprint == first
    other_weights = make_tiny_clip(tmp_path / "seed1", seed=1, preprocessor=PREPROCESSOR)
    assert hf_encoder(other_weights, digits).fingerprint != first
    same_weights = make_tiny_clip(tmp_path / "seed0", seed=0, preprocessor=PREPROCESSOR)
    assert hf_encoder(same_weights, digits).fingerprint == first  # content, not location
    (same_weights / "preprocessor_config.json").write_text(json.dumps({**PREPROCESSOR, "image_mean": [0.4, 0.4, 0.4]}))
    assert hf_encoder(same_weights, digits).fingerprint != first


def test_hf_clip_without_preprocessor_config_uses_clip_defaults(tmp_path, digits):
    folder = make_tiny_clip(tmp_path / "plain", seed=0)
    encoder = hf_encoder(folder, digits)
    assert encoder.preprocess == PreprocessConfig(size=32)


def test_hf_clip_missing_folder_fails_without_network(tmp_path, digits, no_network, cache):
    with pytest.raises(FedpriorError, match="does not exist") as error:
        hf_encoder(tmp_path / "nowhere", digits)
    assert str(tmp_path / "nowhere") in str(error.value)
    with pytest.raises(FedpriorError, match="encoder.download=true"):
        hf_encoder("openai/clip-vit-base-patch32", digits)  # a hub id that is not in the (empty) cache
    (tmp_path / "empty").mkdir()
    with pytest.raises(FedpriorError, match="config.json"):
        hf_encoder(tmp_path / "empty", digits)


def test_encode_dataset_uses_the_cache(tiny_folder, digits, cache):
    encoder = hf_encoder(tiny_folder, digits)
    config = EncoderConfig(name=f"hf-clip:{tiny_folder}", batch_size=100)
    calls = []
    original = encoder.encode_images
    encoder.encode_images = lambda images, batch_size=256: calls.append(len(images)) or original(images, batch_size)
    count = len(digits.test_images)
    first = encode_dataset(encoder, digits, "test", config, progress=False)
    assert first.shape == (count, PROJECTION_DIM) and sum(calls) == count
    assert max(calls) <= 100  # encoder.batch_size is honoured
    second = encode_dataset(encoder, digits, "test", config, progress=False)
    assert sum(calls) == count and torch.equal(first, second)
    assert len(list((cache / "features" / "digits").glob("test-*.safetensors"))) == 1


# ---------------------------------------------------------------- registry


@pytest.mark.parametrize("name", ["bogus", "clip:RN50", "openclip", "hf-clip"])
def test_unknown_encoder_names(name, digits):
    with pytest.raises(ConfigError) as error:
        build_encoder(EncoderConfig(name=name), digits)
    assert str(error.value) == (f"encoder.name: unknown encoder '{name}'; accepted: none, locked-text, openclip:ARCH, hf-clip:FOLDER")


@pytest.mark.parametrize("name", ["openclip:", "hf-clip:", "none"])
def test_incomplete_or_empty_encoder_names(name, digits):
    with pytest.raises(ConfigError, match="encoder.name"):
        build_encoder(EncoderConfig(name=name), digits)


def test_locked_text_dispatches_lazily(monkeypatch, digits):
    import types

    seen = {}
    fake = types.ModuleType("fedprior.encoders.locked_text")
    fake.build_locked_text_encoder = lambda config, dataset, device: seen.setdefault("args", (config.name, dataset.name, device))
    monkeypatch.setitem(sys.modules, "fedprior.encoders.locked_text", fake)
    build_encoder(EncoderConfig(name="locked-text"), digits)
    assert seen["args"] == ("locked-text", "digits", torch.device("cpu"))


def test_class_prompt_template_is_checked():
    class Echo:
        dim = 1

        def encode_texts(self, texts):
            self.texts = texts
            return torch.zeros(len(texts), 1)

    echo = Echo()
    assert class_text_features(echo, ["cat", "dog"], "a photo of a {}.").shape == (2, 1)
    assert echo.texts == ["a photo of a cat.", "a photo of a dog."]
    with pytest.raises(ConfigError, match="encoder.prompt"):
        class_text_features(echo, ["cat"], "a photo")
    with pytest.raises(ConfigError, match="encoder.prompt"):
        class_text_features(echo, ["cat"], "a {} of {0}")


# ---------------------------------------------------------------- open_clip


def open_clip_or_skip():
    try:
        import open_clip
    except Exception:  # ImportError, or torchvision failing inside open_clip
        pytest.skip(OPEN_CLIP_REASON)
    return open_clip


def test_openclip_missing_package_message(monkeypatch, digits):
    monkeypatch.setitem(sys.modules, "open_clip", None)  # makes `import open_clip` raise ImportError
    with pytest.raises(FedpriorError) as error:
        build_encoder(EncoderConfig(name="openclip:RN50", weights="openai"), digits)
    message = str(error.value)
    assert 'pip install -c requirements.lock -e ".[openclip]"' in message and "torchvision" in message


def test_openclip_absent_weights_file_fails_fast_without_network(tmp_path, digits, no_network, cache):
    missing = tmp_path / "models" / "RN50.pt"
    with pytest.raises(FedpriorError) as error:
        build_encoder(EncoderConfig(name="openclip:RN50", weights=str(missing)), digits)
    message = str(error.value)
    assert str(missing) in message and "does not exist" in message
    assert "https://openaipublic.azureedge.net/clip/models/" in message and "RN50.pt" in message


def test_openclip_tag_without_download_names_the_file(digits, no_network, cache):
    open_clip_or_skip()
    with pytest.raises(FedpriorError) as error:
        build_encoder(EncoderConfig(name="openclip:RN50", weights="openai", download=False), digits)
    message = str(error.value)
    assert str(cache / "weights" / "RN50.pt") in message and "openaipublic.azureedge.net" in message
    assert "encoder.download=true" in message


TINY_OPEN_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_openclip_tiny_model_through_our_loader(tmp_path, digits, no_network, cache, suffix):
    open_clip = open_clip_or_skip()
    from safetensors.torch import save_file

    config = tmp_path / "TinyViT-fedprior-test.json"
    config.write_text(json.dumps(TINY_OPEN_CLIP))
    open_clip.add_model_config(config)
    torch.manual_seed(0)
    model = open_clip.create_model("TinyViT-fedprior-test").eval()
    weights = tmp_path / f"tiny{suffix}"
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(weights)) if suffix == ".safetensors" else torch.save(state, weights)

    encoder = build_encoder(EncoderConfig(name=f"openclip:{config}", weights=str(weights)), digits)
    assert encoder.dim == 16 and encoder.preprocess == PreprocessConfig(size=32)
    images = digits.train_images[:6]
    texts = ["a photo of a 1.", "a photo of a 2."]
    with torch.no_grad():
        image_ref = model.encode_image(preprocess_images(images, PreprocessConfig(size=32)))
        text_ref = model.encode_text(open_clip.get_tokenizer("TinyViT-fedprior-test")(texts))
    torch.testing.assert_close(encoder.encode_images(images, batch_size=4), image_ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(encoder.encode_texts(texts), text_ref, atol=1e-5, rtol=1e-4)
    again = build_encoder(EncoderConfig(name=f"openclip:{config}", weights=str(weights)), digits)
    assert again.fingerprint == encoder.fingerprint

    torch.manual_seed(1)
    other = tmp_path / f"other{suffix}"
    state = {k: v.contiguous() for k, v in open_clip.create_model("TinyViT-fedprior-test").state_dict().items()}
    save_file(state, str(other)) if suffix == ".safetensors" else torch.save(state, other)
    assert build_encoder(EncoderConfig(name=f"openclip:{config}", weights=str(other)), digits).fingerprint != encoder.fingerprint


def test_openclip_torchscript_file_like_openai(tmp_path, digits, cache):
    open_clip = open_clip_or_skip()
    config = tmp_path / "TinyQuickGelu-fedprior-test.json"
    config.write_text(json.dumps({**TINY_OPEN_CLIP, "quick_gelu": True}))  # OpenAI's files are QuickGELU models
    open_clip.add_model_config(config)
    torch.manual_seed(2)
    model = open_clip.create_model("TinyQuickGelu-fedprior-test").eval()
    weights = tmp_path / "tiny-jit.pt"
    torch.jit.script(model).save(str(weights))
    encoder = build_encoder(EncoderConfig(name=f"openclip:{config}", weights=str(weights)), digits)
    images = digits.test_images[:4]
    with torch.no_grad():
        image_ref = model.encode_image(preprocess_images(images, PreprocessConfig(size=32)))
    torch.testing.assert_close(encoder.encode_images(images), image_ref, atol=1e-5, rtol=1e-4)


def test_openclip_weights_of_another_architecture_are_refused(tmp_path, digits, cache):
    open_clip_or_skip()
    config = tmp_path / "TinyViT-fedprior-test.json"
    config.write_text(json.dumps(TINY_OPEN_CLIP))
    weights = tmp_path / "wrong.pt"
    torch.save({"visual.proj": torch.zeros(3)}, weights)
    with pytest.raises(FedpriorError, match="does not fit"):
        build_encoder(EncoderConfig(name=f"openclip:{config}", weights=str(weights)), digits)
    with pytest.raises(ConfigError, match="no architecture"):
        build_encoder(EncoderConfig(name="openclip:RN5O", weights=str(weights)), digits)


# ---------------------------------------------------------------- fedprior encode


def test_fedprior_encode_on_digits(tiny_folder, digits, cache):
    from typer.testing import CliRunner

    from fedprior.cli import app

    runner = CliRunner()
    args = ["encode", "--dataset", "digits", "--encoder", f"hf-clip:{tiny_folder}", "--split", "train", "--batch-size", "500"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    line = [row for row in first.output.splitlines() if row.startswith("digits train:")]
    assert len(line) == 1, first.output
    count = f"{len(digits.train_images):,} images"
    assert count in line[0] and f"dim {PROJECTION_DIM}" in line[0] and "images/s" in line[0]
    assert "encoded, cached" in line[0] and str(cache / "features" / "digits") in line[0]
    second = runner.invoke(app, [*args, "--no-progress"])
    assert second.exit_code == 0, second.output
    assert f"digits train: {count}" in second.output and "cache hit" in second.output


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--encoder", "bogus"], "encoder.name: unknown encoder 'bogus'"),
        (["--encoder", "hf-clip:/nowhere", "--split", "validation"], "--split: unknown split 'validation'"),
        (["--encoder", "hf-clip:/nowhere", "--set", "encoder.batch_size=0"], "encoder.batch_size"),
        (["--encoder", "hf-clip:/nowhere", "--set", "run.seed=1"], "encoder.KEY=VALUE"),
        (["--encoder", "openclip:RN50", "--weights", "/nowhere/RN50.pt"], "/nowhere/RN50.pt does not exist"),
    ],
)
def test_fedprior_encode_errors_are_one_line(extra, message, cache):
    from typer.testing import CliRunner

    from fedprior.cli import app

    result = CliRunner().invoke(app, ["encode", "--dataset", "digits", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
