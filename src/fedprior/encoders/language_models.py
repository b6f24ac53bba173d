"""Pretrained language models by name, for methods that embed class descriptions (FedBM's LKCC: the
FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. III-B).

``algorithm.text_model`` accepts:

- ``minilm``: the bundled sentence-transformers all-MiniLM-L6-v2 (384-d, offline; the default here);
- a folder holding a sentence-transformers model (``modules.json``);
- ``hf:FOLDER``: any transformers text tower (BERT, RoBERTa, PubMedBERT; Table XII), mean-pooled
  (:mod:`fedprior.encoders.hf_text`);
- ``hf-clip:FOLDER``: the text tower of a transformers CLIP model with its projection
  (``get_text_features``; a CLIP-architecture export of a medical CLIP, the paper's BiomedCLIP role).

Every one is loaded with the Hugging Face hub switched off; a hub id works when it is in
the local Hugging Face cache. Embeddings go through the on-disk cache
(:func:`fedprior.encoders.cache.cached_text_features`).
"""

from __future__ import annotations

from functools import lru_cache

import torch

from fedprior.encoders.cache import cached_text_features

ACCEPTED = "minilm, a sentence-transformers folder, hf:FOLDER, hf-clip:FOLDER"
GIVE = "give 'minilm', a sentence-transformers folder, hf:FOLDER or hf-clip:FOLDER"
FIELD = "algorithm.text_model"


@lru_cache(maxsize=4)
def language_model(spec: str, field: str = FIELD):
    """The frozen text encoder named ``spec`` (one shared instance per process); an error names ``field``."""
    if spec.startswith("hf:"):
        from fedprior.encoders.hf_text import HFTextEncoder

        return HFTextEncoder(spec[len("hf:") :], field=field)
    if spec.startswith("hf-clip:"):
        from fedprior.encoders.hf_clip import build_hf_clip_encoder

        return build_hf_clip_encoder(spec[len("hf-clip:") :], False, field=field, download_hint="you copy the model there")
    from fedprior.encoders.text import text_encoder

    return text_encoder(spec, field, GIVE)


def embed_texts(spec: str, texts: list[str]) -> torch.Tensor:
    """float32 (len(texts), dim) embeddings of ``texts`` by the language model ``spec`` (``algorithm.text_model``), through the cache."""
    return cached_text_features(language_model(spec), list(texts))
