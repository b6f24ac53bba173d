"""The ``[encoder]`` config section: which frozen encoder turns images into features, and how.

Defined here, by the layer that uses it; ``fedprior.experiments.config`` composes it
into the experiment config.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from fedprior.encoders.standin_recipes import DEFAULT_RECIPE, STANDIN_RECIPES, recipe_names
from fedprior.errors import ConfigError
from fedprior.validation import ConfigSection

ACCEPTED = "none, locked-text, openclip:ARCH, hf-clip:FOLDER"


def check_encoder_name(name: str) -> None:
    """Raise a ConfigError unless ``name`` is one of the accepted forms (checked before any loading, without torch)."""
    if name in ("none", "locked-text"):
        return
    for prefix in ("openclip:", "hf-clip:"):
        if name.startswith(prefix):
            if not name[len(prefix) :]:
                raise ConfigError(f"encoder.name: '{name}' needs what follows the colon; accepted: {ACCEPTED}")
            return
    raise ConfigError(f"encoder.name: unknown encoder '{name}'; accepted: {ACCEPTED}")


class EncoderConfig(ConfigSection):
    name: str = "none"
    """Frozen encoder turning images into features before training: 'none' (train on pixels), 'locked-text' (the offline CLIP stand-in), 'openclip:ARCH' (e.g. openclip:RN50), 'hf-clip:FOLDER' (a Hugging Face CLIP folder)."""
    weights: str | None = None
    """openclip: a local weights file (.pt/.bin/.safetensors), or an open_clip pretrained tag such as 'openai' (needs download=true unless already cached)."""
    download: bool = False
    """Allow downloading encoder weights (never happens otherwise)."""
    batch_size: int = Field(256, ge=1)
    """Images per forward pass when encoding."""
    cache: bool = True
    """Keep encoded features on disk, keyed by encoder fingerprint, dataset and split, so a second run encodes nothing."""
    normalize: bool = True
    """L2-normalize image and text features (CLIP's convention; the FST-CBDG paper does not say)."""
    prompt: str = "a photo of a {}."
    """Template of the class prompts whose text features are the prior ({} is the class name; the FST-CBDG paper, Algorithm 1, line 2)."""
    text_model: str = "minilm"
    """locked-text: the frozen text tower, a sentence-transformers model ('minilm' is bundled and offline)."""
    recipe: str = DEFAULT_RECIPE
    """locked-text: the stand-in's named training recipe (epochs, tower size, and the defaults of pretrain_images and caption_noise): 'v1' (zero-shot 77.9% on Fashion-MNIST; every FST-CBDG number in the docs) or 'v2-headroom' (a zero-shot well below the linear probe, like CLIP); see docs/fst-cbdg.md."""
    pretrain_images: int | None = Field(None, ge=10)
    """locked-text: training images used to align the image tower; they are removed from every client. Unset: the recipe's (2,000 for v1)."""
    caption_noise: float | None = Field(None, ge=0, lt=1)
    """locked-text: fraction of pretraining captions that name a wrong class, like noisy web captions. Unset: the recipe's (0.4 for v1)."""
    pretrain_seed: int = Field(0, ge=0)
    """locked-text: seed of the stand-in's own training (independent of run.seed, so one stand-in serves every run)."""

    @field_validator("recipe")
    @classmethod
    def _known_recipe(cls, value: str) -> str:
        if value not in STANDIN_RECIPES:
            raise PydanticCustomError("unknown_recipe", "unknown recipe {value}; accepted: {accepted}", {"value": repr(value), "accepted": recipe_names()})
        return value
