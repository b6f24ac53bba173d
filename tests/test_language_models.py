"""Language models for LKCC: a Hugging Face text tower from a local folder (a tiny random BERT written here), the text cache."""

from __future__ import annotations

import pytest
import torch

from fedprior.algorithms.lkcc import concept_embeddings
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
    from tiny_clip import PROJECTION_DIM, make_tiny_clip

    folder = make_tiny_clip(tmp_path / "clip")
    embeddings = concept_embeddings(("cat", "dog"), f"hf-clip:{folder}", "generic")
    assert embeddings.shape == (2, 24, PROJECTION_DIM) and torch.isfinite(embeddings).all()
