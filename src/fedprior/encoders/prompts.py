"""Prompt templates that put a class concept into sentences, M per class (FedBM's LKCC: the
FedBM paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. III-B).

FedBM contextualizes each concept P_k with M predetermined prompts ("This is an image
of {concept}", "The image shows {concept}.", ...; the paper points to its MICCAI
version for the list) before the language model embeds them. The authors' code uses
24 to 28 sentences per dataset, built from six sentence forms crossed with the words
for the image ("image", "photo", and the modality: "OCT scan", "endoscopic image").
A prompt set here is the same construction: :data:`FORMS` x the set's image words. The two
sets of the paper's datasets that the code lists, ``oct`` (OCT-C8) and ``endoscopy``
(Kvasir-v2), are the code's sentences verbatim (:data:`CODE_TEMPLATES`, from its
``prompt_templates.py``): OCT's 28, not 6 x 5 = 30 (its first form has no "OCT image" or
"OCT photo"), and Kvasir's 24 with the code's article ("a endoscopic image of {}."), so the
concept embeddings are the ones its classifier was built from.

The order of the templates is fixed and interleaves forms and words, so the first
``m`` templates (FedBM's Table VII uses a fraction of the prompts; the code has no such
option) cover every form before repeating one.
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
    "dermoscopy": ("image", "photo", "dermoscopic image", "dermoscopic photo"),
    "microscopy": ("image", "photo", "microscopic image", "blood smear image"),
}
"""Image words per domain; each set gives len(FORMS) x len(words) templates (those in :data:`CODE_TEMPLATES` excepted)."""

CODE_TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "oct": (  # the code's OCT_TEMPLATES, one tuple per form, in its order
        ("an image of {}.", "a photo of {}.", "an OCT scan of {}."),
        ("this is a photo of {}.", "this is an image of {}.", "this is an OCT scan of {}.", "this is an OCT photo of {}.", "this is an OCT image of {}."),
        ("{} presented in photo.", "{} presented in image.", "{} presented in OCT scan.", "{} presented in OCT image.", "{} presented in OCT photo."),
        ("the image shows {}.", "the photo shows {}.", "the OCT scan shows {}.", "the OCT image shows {}.", "the OCT photo shows {}."),
        (
            "the image shows the presence of {}.",
            "the photo shows the presence of {}.",
            "the OCT scan shows the presence of {}.",
            "the OCT image shows the presence of {}.",
            "the OCT photo shows the presence of {}.",
        ),
        (
            "the presence of {} in image.",
            "the presence of {} in photo.",
            "the presence of {} in OCT image.",
            "the presence of {} in OCT photo.",
            "the presence of {} in OCT scan.",
        ),
    ),
    "endoscopy": (  # the code's Kvasir_TEMPLATES
        ("an image of {}.", "a photo of {}.", "a endoscopic image of {}.", "a endoscopic photo of {}."),
        ("this is a photo of {}.", "this is an image of {}.", "this is a endoscopic photo of {}.", "this is a endoscopic image of {}."),
        ("{} presented in photo.", "{} presented in image.", "{} presented in endoscopic photo.", "{} presented in endoscopic image."),
        ("the image shows {}.", "the photo shows {}.", "the endoscopic image shows {}.", "the endoscopic photo shows {}."),
        (
            "the image shows the presence of {}.",
            "the photo shows the presence of {}.",
            "the endoscopic image shows the presence of {}.",
            "the endoscopic photo shows the presence of {}.",
        ),
        ("the presence of {} in image.", "the presence of {} in photo.", "the presence of {} in endoscopic image.", "the presence of {} in endoscopic photo."),
    ),
}
"""The authors' code's templates for its two datasets (github.com/CUHK-AIM-Group/FedBM, ``prompt_templates.py``), by form."""


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeio" else "a"


def prompt_templates(prompt_set: str) -> list[str]:
    """The templates of ``prompt_set`` with ``{}`` where the concept goes, word-major interleaved with the forms."""
    if prompt_set not in PROMPT_SETS and prompt_set not in CODE_TEMPLATES:
        raise ConfigError(f"algorithm.prompts: unknown prompt set '{prompt_set}'; accepted: {', '.join([*PROMPT_SETS, *CODE_TEMPLATES])}")
    if prompt_set in CODE_TEMPLATES:  # round robin over the forms: the i-th sentence of every form, then the (i+1)-th
        forms = CODE_TEMPLATES[prompt_set]
        return [form[i] for i in range(max(map(len, forms))) for form in forms if i < len(form)]
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
