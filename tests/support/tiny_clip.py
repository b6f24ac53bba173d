"""A tiny, randomly initialised Hugging Face CLIP model folder for tests (no network, about a second)."""

from __future__ import annotations

import json
from pathlib import Path

PROJECTION_DIM = 16
IMAGE_SIZE = 32


def tiny_tokenizer():
    """A byte-level CLIP tokenizer with no merges: every character is a token (514 ids)."""
    from transformers import CLIPTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = sorted(set(bytes_to_unicode().values()))
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def make_tiny_clip(folder: Path, seed: int = 0, preprocessor: dict | None = None) -> Path:
    """Write a tiny CLIPModel (hidden 32, 2 layers, patch 4, image 32, projection 16) + tokenizer to ``folder``."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    tokenizer = tiny_tokenizer()
    bos, eos = tokenizer.convert_tokens_to_ids(["<|startoftext|>", "<|endoftext|>"])
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=32,
            bos_token_id=bos,
            eos_token_id=eos,
            pad_token_id=eos,
        ),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=IMAGE_SIZE, patch_size=4),
        projection_dim=PROJECTION_DIM,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if preprocessor is not None:
        (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    return folder
