"""Prompt templates that put a class concept into sentences, M per class (FedBM's LKCC, fedbm.txt Sec. III-B).

FedBM contextualizes each concept P_k with M predetermined prompts ("This is an image
of {concept}", "The image shows {concept}.", ...; the paper points to its MICCAI
version for the list) before the language model embeds them. The authors' code uses
24 to 28 sentences per dataset, built from six sentence forms crossed with the words
for the image ("image", "photo", and the modality: "OCT scan", "endoscopic image").
A prompt set here is the same construction: :data:`FORMS` x the set's image words.

The order of the templates is fixed and interleaves forms and words, so the first
``m`` templates (FedBM's Table VII uses a fraction of the prompts) cover every form
before repeating one.
"""

from __future__ import annotations

import math

from fedprior.errors import ConfigError

FORMS = (
    "{article} {word} of {concept}.",
    "this is {article} {word} of {concept}.",
    "{concept} presented in {word}.",
    "the {word} shows {concept}.",
    "the {word} shows the presence of {concept}.",
    "the presence of {concept} in {word}.",
)
"""The sentence forms of the authors' templates (their lists cross these with image words)."""

PROMPT_SETS: dict[str, tuple[str, ...]] = {
    "generic": ("image", "photo", "picture", "close-up photo"),
    "fashion": ("image", "photo", "product photo", "grayscale photo"),
    "handwriting": ("image", "scan", "handwritten character", "grayscale image"),
    "oct": ("image", "photo", "OCT scan", "OCT image", "OCT photo"),
    "endoscopy": ("image", "photo", "endoscopic image", "endoscopic photo"),
    "dermoscopy": ("image", "photo", "dermoscopic image", "dermoscopic photo"),
    "microscopy": ("image", "photo", "microscopic image", "blood smear image"),
}
"""Image words per domain; each set gives len(FORMS) x len(words) templates."""


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeio" or word.startswith("OCT") else "a"


def prompt_templates(prompt_set: str) -> list[str]:
    """The templates of ``prompt_set`` with ``{}`` where the concept goes, word-major interleaved with the forms."""
    if prompt_set not in PROMPT_SETS:
        raise ConfigError(f"algorithm.prompts: unknown prompt set '{prompt_set}'; accepted: {', '.join(PROMPT_SETS)}")
    words = PROMPT_SETS[prompt_set]
    out = []
    for shift in range(len(words)):
        for f, form in enumerate(FORMS):
            word = words[(f + shift) % len(words)]
            out.append(form.format(article=_article(word), word=word, concept="{}"))
    return out


def take_fraction(templates: list[str], fraction: float) -> list[str]:
    """The first ceil(fraction * M) templates (at least two: a variance needs two embeddings)."""
    if not 0 < fraction <= 1:
        raise ConfigError(f"algorithm.prompt_fraction: must be in (0, 1], got {fraction}")
    return templates[: max(2, math.ceil(fraction * len(templates)))]


def concept_sentences(concepts: tuple[str, ...] | list[str], templates: list[str]) -> list[list[str]]:
    """For each concept, its M sentences (concept k's list is ``[t.format(concept_k) for t in templates]``)."""
    return [[template.format(concept.replace("_", " ")) for template in templates] for concept in concepts]
