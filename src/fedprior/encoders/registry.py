"""The encoder registry: ``encoder.name`` -> a frozen encoder, plus the two things runs ask of one.

- :func:`build_encoder`: ``locked-text`` (the offline CLIP stand-in), ``openclip:ARCH``,
  ``hf-clip:FOLDER``; each backend is imported only when asked for.
- :func:`encode_dataset`: a split's image features through the on-disk cache.
- :func:`reserved_train_indices`: the training images an encoder was fitted on (no client holds them).
- :func:`class_text_features`: the class prototypes T_k of FST-CBDG (the FST-CBDG paper,
  "Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model",
  Algorithm 1 lines 1-3: a sentence per class from the prompt template, through the
  text encoder).
"""

from __future__ import annotations

import numpy as np
import torch

from fedprior.data.dataset import Dataset
from fedprior.encoders.cache import load_or_encode
from fedprior.encoders.config import ACCEPTED as ACCEPTED  # re-exported with the check
from fedprior.encoders.config import EncoderConfig
from fedprior.encoders.config import check_encoder_name as check_encoder_name
from fedprior.errors import ConfigError


def build_encoder(config: EncoderConfig, dataset: Dataset, device: torch.device = torch.device("cpu")):
    """The frozen encoder named by ``config.name``, running on ``device`` (``dataset`` is for encoders that fit themselves to it)."""
    name = config.name
    check_encoder_name(name)
    if name == "none":
        raise ConfigError(f"encoder.name: 'none' means training on pixels, there is no encoder to build; accepted: {ACCEPTED}")
    if name == "locked-text":
        from fedprior.encoders.locked_text import build_locked_text_encoder

        return build_locked_text_encoder(config, dataset, device=device)
    if name.startswith("openclip:"):
        from fedprior.encoders.openclip import build_openclip_encoder

        return build_openclip_encoder(name[len("openclip:") :], config.weights, config.download, device)
    from fedprior.encoders.hf_clip import build_hf_clip_encoder

    return build_hf_clip_encoder(name[len("hf-clip:") :], config.download, device)


def reserved_train_indices(config: EncoderConfig, dataset: Dataset) -> np.ndarray:
    """The training indices the encoder of ``config`` is fitted on, which no client may hold, without building it.

    The same indices as the built encoder's ``reserved_train_indices``: the locked-text stand-in's
    pretraining split; none for the other encoders (and for ``none``).
    """
    if config.name == "locked-text":
        from fedprior.encoders.locked_text import pretraining_split

        return pretraining_split(config, dataset).indices
    return np.zeros(0, dtype=np.int64)


def encode_dataset(encoder, dataset: Dataset, split: str, config: EncoderConfig, *, progress: bool = True) -> torch.Tensor:
    """float32 (N, dim) image features of ``dataset``'s ``split`` ('train', 'test' or 'val'), cached per ``config.cache``."""
    if split not in ("train", "test", "val"):
        raise ValueError(f"split must be 'train', 'test' or 'val', got {split!r}")
    return load_or_encode(
        encoder,
        dataset.name,
        split,
        getattr(dataset, f"{split}_images"),
        getattr(dataset, f"{split}_labels"),
        batch_size=config.batch_size,
        use_cache=config.cache,
        progress=progress,
    ).features


def class_prompts(class_names: list[str] | tuple[str, ...], prompt: str) -> list[str]:
    """``prompt.format(name)`` per class (the FST-CBDG paper, Algorithm 1, line 2: "a photo of a {object}.")."""
    if "{}" not in prompt:
        raise ConfigError(f"encoder.prompt: must contain {{}} where the class name goes, got {prompt!r}")
    try:
        return [prompt.format(name) for name in class_names]
    except (IndexError, KeyError, ValueError) as error:
        raise ConfigError(f"encoder.prompt: {prompt!r} is not a valid template with one {{}} ({error})") from None


def class_text_features(encoder, class_names: list[str] | tuple[str, ...], prompt: str) -> torch.Tensor:
    """float32 (K, dim): the text features T_k of one prompt per class (the FST-CBDG paper, Algorithm 1, lines 1-3), not normalized."""
    features = encoder.encode_texts(class_prompts(class_names, prompt))
    return features.to(torch.float32)
