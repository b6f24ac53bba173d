"""LKCC: Linguistic Knowledge-based Classifier Construction (the FedBM paper,
"FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. III-B, Eq. 1-5).

The server (and, since it is rebuilt from the Task, every client) embeds each class
concept P_k in M prompts with a pretrained language model, giving e_1^(k) .. e_M^(k).
Per class (Eq. 2):

    mu_k = (1/M) sum_m e_m^(k),     Sigma_k = 1/(M-1) sum_m (e_m^(k) - mu_k)(e_m^(k) - mu_k)^T

(the classifier uses the diagonal of Sigma_k, the conditions of CGDE the full matrix;
the authors' code L2-normalizes every e_m^(k) first, as here). Aligning a normalized
image representation h with infinitely many embeddings drawn from N(mu_k, Sigma_k)
(Eq. 3) is bounded by the surrogate loss (Eq. 4)

    L = (1/N) sum_i [ -log( e^{F(h_i, y_i)} / sum_k e^{F(h_i, k)} ) + (tau^2 / 2) h_i^2 . Sigma_{y_i} ],
    F(h, k) = tau h . mu_k + (tau^2 / 2) h^2 . Sigma_k         (the Appendix's F; Eq. 5 is F / tau),

so the classifier of Eq. 5, F(h) = h mu + (tau / 2) h^2 Sigma, is fixed before training,
frozen on every client and never sent. The authors' code computes exactly these
logits, ``T * (h.mu + 0.5 * T * h^2 . sigma^2)`` with T = tau between 7.5 and 17.5, and
puts a trainable linear projection from the backbone's features to the text
dimension in front of the normalization (``ProjectedNet``).

Ablations of the paper as ``classifier`` kinds (Table VIII): ``mean-embedding`` is Eq. 1
with the averaged embeddings (F = tau h . mu_k, plain cross-entropy), ``random`` a frozen
random classifier (unit rows from a fixed stream, F = tau h . w_k).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.encoders.language_models import embed_texts
from fedprior.encoders.prompts import concept_sentences, prompt_templates, take_fraction
from fedprior.errors import ConfigError
from fedprior.seeding import torch_generator

CLASSIFIERS = ("lkcc", "mean-embedding", "random")


def concept_distributions(embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 2 on (K, M, D) embeddings: mean (K, D) and diagonal variance (K, D) of the L2-normalized embeddings.

    The variance is unbiased (1 / (M - 1)), the diagonal of Eq. 2's covariance.
    """
    if embeddings.ndim != 3 or embeddings.shape[1] < 2:
        raise ConfigError(f"LKCC needs at least 2 prompts per class (Eq. 2 divides by M - 1); got embeddings {tuple(embeddings.shape)}")
    e = F.normalize(embeddings.double(), dim=-1)
    return e.mean(1).float(), e.var(1, unbiased=True).float()


def concept_covariances(embeddings: torch.Tensor) -> torch.Tensor:
    """Eq. 2's full covariance Sigma_k (K, D, D) of the L2-normalized embeddings (CGDE samples its conditions from it)."""
    e = F.normalize(embeddings.double(), dim=-1)
    centred = e - e.mean(1, keepdim=True)
    return (centred.transpose(1, 2) @ centred / (e.shape[1] - 1)).float()


def lkcc_logits(h: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, tau: float) -> torch.Tensor:
    """F(h, k) = tau h . mu_k + (tau^2 / 2) h^2 . Sigma_k for every k: (N, D) -> (N, K) (Eq. 4; Eq. 5 is F / tau)."""
    return tau * h @ mean.T + 0.5 * tau**2 * (h * h) @ var.T


def lkcc_loss(h: torch.Tensor, y: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, tau: float) -> torch.Tensor:
    """Eq. 4: mean over the batch of CE(F(h), y) + (tau^2 / 2) h^2 . Sigma_y."""
    penalty = 0.5 * tau**2 * ((h * h) * var[y]).sum(1)
    return (F.cross_entropy(lkcc_logits(h, mean, var, tau), y, reduction="none") + penalty).mean()


class FixedClassifier(nn.Module):
    """A classifier that is never trained nor sent: its tensors are non-persistent buffers rebuilt from the Task.

    ``kind`` 'lkcc': Eq. 4/5 logits and loss; 'mean-embedding' and 'random': F = tau h . w_k
    with cross-entropy (Table VIII). Inputs are the L2-normalized representations h.
    """

    weight: torch.Tensor
    var: torch.Tensor

    def __init__(self, kind: str, weight: torch.Tensor, var: torch.Tensor, tau: float) -> None:
        super().__init__()
        if kind not in CLASSIFIERS:
            raise ConfigError(f"algorithm.classifier: unknown kind '{kind}'; accepted: {', '.join(CLASSIFIERS)}, linear")
        self.kind, self.tau = kind, tau
        self.register_buffer("weight", weight.clone(), persistent=False)
        self.register_buffer("var", var.clone(), persistent=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.kind == "lkcc":
            return lkcc_logits(h, self.weight, self.var, self.tau)
        return self.tau * h @ self.weight.T

    def loss(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.kind == "lkcc":
            return lkcc_loss(h, y, self.weight, self.var, self.tau)
        return F.cross_entropy(self(h), y)


def concept_embeddings(class_names: tuple[str, ...], text_model: str, prompt_set: str, fraction: float = 1.0) -> torch.Tensor:
    """(K, M, D) language-model embeddings of every class concept in M prompts (cached on disk)."""
    templates = take_fraction(prompt_templates(prompt_set), fraction)
    sentences = concept_sentences(class_names, templates)
    flat = embed_texts(text_model, [s for per_class in sentences for s in per_class])
    return flat.view(len(class_names), len(templates), -1)


def random_classifier(num_classes: int, dim: int, seed: int) -> torch.Tensor:
    """(K, D) unit rows drawn from the fixed stream ``("random-classifier", seed)`` (Table VIII's 'Random (Freezing)')."""
    return F.normalize(torch.randn(num_classes, dim, generator=torch_generator(seed, "random-classifier")), dim=1)


def build_classifier(kind: str, embeddings: torch.Tensor, tau: float, seed: int = 0) -> FixedClassifier:
    """The frozen classifier ``kind`` from the (K, M, D) concept embeddings."""
    mean, var = concept_distributions(embeddings)
    if kind == "random":
        mean = random_classifier(mean.shape[0], mean.shape[1], seed)
    return FixedClassifier(kind, mean, var, tau)
