"""Language models for LKCC: a Hugging Face text tower from a local folder (a tiny random BERT written here), the text cache."""

from __future__ import annotations

import pytest
import torch

from fedprior.algorithms.pieces.lkcc import concept_embeddings
from fedprior.encoders.cache import cached_text_features, text_cache_path
from fedprior.encoders.language_models import language_model
from fedprior.errors import FedpriorError


def make_tiny_bert(folder, seed: int = 0):
    """A randomly initialised 1-layer BERT (hidden 16) and a word-level tokenizer, saved as transformers does."""
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "a",
        "an",
        "the",
        "of",
        "image",
        "photo",
        "this",
        "is",
        "shows",
        "presented",
        "in",
        "presence",
        "picture",
        "close",
        "-",
        "up",
        "cat",
        "dog",
        "bird",
        ".",
        "long",
        "sentence",
        "here",
    ]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    tokenizer = BertTokenizer(str(folder / "vocab.txt"))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    BertModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_hf_text_tower_from_a_local_folder_mean_pools_the_real_tokens(tmp_path):
    folder = make_tiny_bert(tmp_path / "bert")
    model = language_model(f"hf:{folder}")
    assert model.dim == 16 and model.name == f"hf:{folder}"
    alone = model.encode_texts(["a cat"])
    batched = model.encode_texts(["a cat", "this is a long long long sentence here ."])
    assert batched.shape == (2, 16)
    assert torch.allclose(alone[0], batched[0], atol=1e-5)  # padding does not change a sentence's embedding
    embeddings = concept_embeddings(("cat", "dog", "bird"), f"hf:{folder}", "generic", 0.5)
    assert embeddings.shape == (3, 12, 16) and torch.isfinite(embeddings).all()
    assert not torch.allclose(embeddings[0], embeddings[1])


def test_missing_text_model_folder_fails_fast_naming_it(tmp_path):
    with pytest.raises(FedpriorError, match="does not exist") as error:
        language_model(f"hf:{tmp_path / 'nowhere'}")
    assert str(tmp_path / "nowhere") in str(error.value) and "algorithm.text_model" in str(error.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FedpriorError, match="config.json"):
        language_model(f"hf:{tmp_path / 'empty'}")


class CountingEncoder:
    name, fingerprint, dim = "fake", "f00d", 3

    def __init__(self):
        self.calls = 0

    def encode_texts(self, texts):
        self.calls += 1
        return torch.arange(len(texts) * 3, dtype=torch.float32).view(len(texts), 3)


def test_text_embeddings_are_cached_and_a_damaged_file_is_rebuilt():
    encoder = CountingEncoder()
    first = cached_text_features(encoder, ["a", "b"])
    again = cached_text_features(encoder, ["a", "b"])
    assert encoder.calls == 1 and torch.equal(first, again)
    cached_text_features(encoder, ["a", "c"])
    assert encoder.calls == 2  # other texts, another file
    text_cache_path(encoder, ["a", "b"]).write_bytes(b"broken")
    with pytest.warns(UserWarning, match="rebuilding"):
        rebuilt = cached_text_features(encoder, ["a", "b"])
    assert encoder.calls == 3 and torch.equal(rebuilt, first)


def test_a_clip_text_tower_with_its_projection(tmp_path):
    from tests.support.tiny_clip import PROJECTION_DIM, make_tiny_clip

    folder = make_tiny_clip(tmp_path / "clip")
    embeddings = concept_embeddings(("cat", "dog"), f"hf-clip:{folder}", "generic")
    assert embeddings.shape == (2, 24, PROJECTION_DIM) and torch.isfinite(embeddings).all()


GIVE = "give 'minilm', a sentence-transformers folder, hf:FOLDER or hf-clip:FOLDER"


def test_a_folder_without_a_model_names_the_field_that_named_it(tmp_path):
    """algorithm.text_model (FedBM) and encoder.text_model (the locked-text stand-in) each name themselves."""
    from fedprior.encoders.text import SENTENCE_ACCEPTED, text_encoder

    folder = tmp_path / "notmodel"
    folder.mkdir()
    (folder / "readme.txt").write_text("not a model")
    with pytest.raises(FedpriorError) as error:
        language_model(str(folder))
    assert str(error.value) == f"algorithm.text_model: {folder} is a folder but holds no sentence-transformers model (no modules.json); {GIVE}"
    with pytest.raises(FedpriorError) as error:
        language_model(str(tmp_path / "nope"))
    assert str(error.value) == f"algorithm.text_model: {tmp_path / 'nope'} does not exist; {GIVE}"
    with pytest.raises(FedpriorError) as error:
        text_encoder(str(folder))
    assert str(error.value) == f"encoder.text_model: {folder} is a folder but holds no sentence-transformers model (no modules.json); {SENTENCE_ACCEPTED}"
    with pytest.raises(FedpriorError, match=r"^algorithm\.text_model: hf-clip folder .* has no config\.json"):  # not encoder.name
        language_model(f"hf-clip:{folder}")


def _sentence_folder_with_bad_modules_json(folder):
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "modules.json").write_text("{bad")
    return str(folder), "a text model", "modules.json is damaged (not valid JSON: Expecting property name enclosed in double quotes"


def _random_safetensors(prefix):
    def make(folder):
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "bert"}')
        (folder / "model.safetensors").write_bytes(bytes(range(256)) * 20)
        what = "a CLIP model" if prefix == "hf-clip:" else "a text model"
        return f"{prefix}{folder}", what, "model.safetensors is damaged (Error while deserializing header"

    return make


def _truncated_bert(folder):
    make_tiny_bert(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return f"hf:{folder}", "a text model", "model.safetensors is damaged ("


@pytest.mark.parametrize(
    "make",
    [_sentence_folder_with_bad_modules_json, _random_safetensors(""), _random_safetensors("hf:"), _random_safetensors("hf-clip:"), _truncated_bert],
    ids=["bad-modules-json", "random-safetensors", "hf-random-safetensors", "hf-clip-random-safetensors", "hf-truncated-weights"],
)
def test_a_damaged_model_file_is_named_before_the_loader_meets_it(tmp_path, make):
    """A JSONDecodeError or SafetensorError from the loaders named neither the file nor the field ('report it')."""
    spec, what, damage = make(tmp_path / "model")
    with pytest.raises(FedpriorError) as error:
        language_model(spec)
    assert str(error.value).startswith(f"algorithm.text_model: cannot load {what} from {tmp_path / 'model'}: {damage}"), error.value
