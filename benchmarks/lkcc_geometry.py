"""LKCC's classifier geometry (the FedBM paper, Sec. III-B, Eq. 2 and 5), measured without training (issue 44).

For a dataset's class names, a prompt set and a language model: the norms of the concept means mu_k
(Eq. 2, means of unit embeddings, not renormalized, as the authors' code), their pairwise cosines and
distances, the largest logit margin tau ||mu_k - mu_j|| a unit h can reach between two classes, and the
trace of each Sigma_k; beside a simplex ETF's (FedETF: cosine -1/(K-1), distance sqrt(2K/(K-1))). Also how
far the OCT-C8 and Kvasir-v2 means moved when their prompt sets became the code's sentences (issue 44: 30 -> 28
OCT templates, "an endoscopic" -> the code's "a endoscopic"), from the former construction rebuilt here.
Writes ``benchmarks/results/lkcc_geometry.json``.

    python benchmarks/lkcc_geometry.py
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from shared import command_line, machine

from fedprior.algorithms.pieces.lkcc import concept_distributions
from fedprior.data.fashion_mnist import CLASS_NAMES as FASHION
from fedprior.data.kvasir import CLASS_NAMES as KVASIR
from fedprior.data.oct_c8 import CLASS_NAMES as OCT
from fedprior.encoders.language_models import embed_texts
from fedprior.encoders.prompts import FORMS, concept_sentences, prompt_templates

OUT = Path(__file__).parent / "results" / "lkcc_geometry.json"
FORMER_WORDS = {"oct": ("image", "photo", "OCT scan", "OCT image", "OCT photo"), "endoscopy": ("image", "photo", "endoscopic image", "endoscopic photo")}


def former_templates(prompt_set: str) -> list[str]:
    """The set as FORMS x words built it before issue 44 (article "an" before a vowel or "OCT")."""
    words = FORMER_WORDS[prompt_set]
    article = {w: "an" if w[0].lower() in "aeio" or w.startswith("OCT") else "a" for w in words}
    return [
        form.format(article=article[words[(f + s) % len(words)]], word=words[(f + s) % len(words)], concept="{}")
        for s in range(len(words))
        for f, form in enumerate(FORMS)
    ]


def distributions(classes: tuple[str, ...], templates: list[str], model: str) -> tuple[torch.Tensor, torch.Tensor]:
    flat = embed_texts(model, [s for per_class in concept_sentences(classes, templates) for s in per_class])
    return concept_distributions(flat.view(len(classes), len(templates), -1))


def geometry(classes: tuple[str, ...], prompt_set: str, model: str, tau: float) -> dict:
    mu, var = distributions(classes, prompt_templates(prompt_set), model)
    k = len(classes)
    off = ~torch.eye(k, dtype=torch.bool)
    cos = (F.normalize(mu, dim=1) @ F.normalize(mu, dim=1).T)[off]
    dist = torch.cdist(mu, mu)[off]
    i, j = divmod(int((torch.cdist(mu, mu) + 10 * torch.eye(k)).argmin()), k)
    return {
        "prompts": len(prompt_templates(prompt_set)),
        "mean_norm": [round(float(n), 4) for n in mu.norm(dim=1)],
        "cosine_between_means": {"min": round(float(cos.min()), 4), "mean": round(float(cos.mean()), 4), "max": round(float(cos.max()), 4)},
        "distance_between_means": {"min": round(float(dist.min()), 4), "mean": round(float(dist.mean()), 4), "max": round(float(dist.max()), 4)},
        "closest_pair": [classes[i], classes[j]],
        "largest_margin_tau_times_distance": {"tau": tau, "min": round(tau * float(dist.min()), 3), "mean": round(tau * float(dist.mean()), 3)},
        "trace_sigma": [round(float(t), 4) for t in var.sum(1)],
        "simplex_etf": {"cosine": round(-1 / (k - 1), 4), "distance": round((2 * k / (k - 1)) ** 0.5, 4)},
    }


def main() -> None:
    record = {"command": command_line(), "machine": machine(), "text_model": "minilm"}
    record["fashion-mnist, prompts fashion (the embedded setting)"] = geometry(FASHION, "fashion", "minilm", 12.5)
    for name, classes in (("oct", OCT), ("endoscopy", KVASIR)):
        new, _ = distributions(classes, prompt_templates(name), "minilm")
        old, _ = distributions(classes, former_templates(name), "minilm")
        record[f"{name}: the code's sentences against the former construction"] = {
            "prompts": [len(former_templates(name)), len(prompt_templates(name))],
            "min_cosine_new_old_mean": round(float(F.cosine_similarity(new, old, dim=1).min()), 5),
            "max_distance_new_old_mean": round(float((new - old).norm(dim=1).max()), 4),
            "min_distance_between_classes_new": round(float(torch.cdist(new, new)[~torch.eye(len(classes), dtype=torch.bool)].min()), 4),
        }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
