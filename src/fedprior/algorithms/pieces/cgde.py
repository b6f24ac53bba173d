"""CGDE: Concept-guided Global Distribution Estimation (FedBM, fedbm.txt Sec. III-C, Eq. 6-10).

The server trains a conditional generator G (:class:`fedprior.models.generator.ConditionalGenerator`)
against the frozen global model F, so that G's images capture F's input space, and the
clients add G's images to their batches. Per step, with labels y drawn uniformly:

- conditions z ~ N(mu_y, Sigma_y), the concept distributions of LKCC (Eq. 9; the
  authors' code samples the full covariance plus 1e-4 I);
- L_sem = F's classification loss on G(z) with labels y (Eq. 6; the code uses the
  model's own training loss, Eq. 4 under LKCC);
- L_div = |z_i - z_j| / |G(z_i) - G(z_j)| over pairs of the same class, L1 distances
  (Eq. 7; the code averages per class over the pairs and divides the sum by K);
- L_dis = sum over F's BatchNorm layers of ||mu_l(x) - mu_l||_2 + ||sigma_l^2(x) - sigma_l^2||_2,
  the batch statistics of the layer's input against its running ones (Eq. 8, after
  DeepInversion);
- L = L_sem + lambda_div L_div + lambda_dis L_dis (Eq. 10), minimized with Adam
  (code: 100 steps of 64 images every 5 rounds, lr 3e-4, betas (0.5, 0.999)).

The code crops (zero padding 4) and flips G's images before F sees them, at the server
and at the clients, with one crop and flip per batch (torchvision transforms on a batch
tensor; ``per_batch=False`` draws them per image), and creates a fresh Adam optimizer at every training cycle
(``adam_state='fresh'``); ``'kept'`` carries Adam's moments over in the server state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.data.augment import seed_from, seeded
from fedprior.data.augment.crop_flip import crop_flip

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
EPS = 1e-5
"""The code's guard in L_div's 1 / (|G(z_i) - G(z_j)| / |z_i - z_j| + eps)."""


@dataclass(frozen=True)
class Conditions:
    """How CGDE draws the generator's input for a label: a concept embedding (Eq. 9) or noise (Table IX)."""

    mean: torch.Tensor
    """(K, D) class means mu_k."""
    scale: torch.Tensor
    """(K, D, D) Cholesky factors of Sigma_k + 1e-4 I, or (K, D) standard deviations (diagonal)."""
    kind: str = "concept"
    """'concept' (Eq. 9) or 'noise': z = [N(0, I_D), one-hot(y)], the usual conditional noise the paper compares with."""

    @property
    def dim(self) -> int:
        return self.mean.shape[1] + (self.mean.shape[0] if self.kind == "noise" else 0)

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """(N, dim) conditions for labels ``y`` (N,), drawn from ``generator``."""
        eps = torch.randn(y.shape[0], self.mean.shape[1], generator=generator).to(self.mean.device)
        if self.kind == "noise":
            return torch.cat([eps, F.one_hot(y, self.mean.shape[0]).to(eps.dtype)], dim=1)
        if self.scale.ndim == 2:
            return self.mean[y] + self.scale[y] * eps
        z = self.mean[y].clone()
        for k in torch.unique(y).tolist():  # one (n_k, D) x (D, D) product per class, not N gathered D x D factors
            rows = y == k
            z[rows] += eps[rows] @ self.scale[k].T
        return z

    def to(self, device: torch.device) -> Conditions:
        return Conditions(self.mean.to(device), self.scale.to(device), self.kind)


def concept_conditions(mean: torch.Tensor, covariance: torch.Tensor, kind: str = "concept", jitter: float = 1e-4) -> Conditions:
    """Conditions from Eq. 2's mean (K, D) and covariance: full (K, D, D) or diagonal variances (K, D)."""
    if covariance.ndim == 3:
        eye = torch.eye(covariance.shape[-1], dtype=torch.float64)
        scale = torch.linalg.cholesky(covariance.double() + jitter * eye).float()
    else:
        scale = covariance.clamp_min(0).sqrt()
    return Conditions(mean.float(), scale, kind)


def diversity_loss(z: torch.Tensor, images: torch.Tensor, y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Eq. 7: per class, mean over same-class pairs of |z_i - z_j|_1 / |G(z_i) - G(z_j)|_1; summed and divided by K.

    As the code: the ratio is computed as 1 / (|dG| / |dz| + eps), and a class with fewer
    than two samples in the batch adds nothing.
    """
    z, images = z.flatten(1), images.flatten(1)
    total = z.new_zeros(())
    for k in range(num_classes):
        members = y == k
        if int(members.sum()) > 1:
            ratio = F.pdist(images[members], p=1) / F.pdist(z[members], p=1)
            total = total + (1.0 / (ratio + EPS)).mean()
    return total / num_classes


class BatchNormStatistics:
    """Eq. 8 through forward hooks: each BatchNorm layer (with running statistics) of ``model`` compares its input's
    batch mean and (biased) variance with its running ones; ``loss()`` sums the L2 distances over the layers."""

    def __init__(self, model: nn.Module) -> None:
        self.layers = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
        self.terms: list[torch.Tensor] = []
        self.handles: list[torch.utils.hooks.RemovableHandle] = []

    def _hook(self, module: nn.Module, inputs, output) -> None:
        x = inputs[0]
        dims = [d for d in range(x.ndim) if d != 1]
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        self.terms.append(torch.linalg.vector_norm(module.running_mean - mean) + torch.linalg.vector_norm(module.running_var - var))

    @contextmanager
    def recording(self) -> Iterator[BatchNormStatistics]:
        self.terms = []
        self.handles = [m.register_forward_hook(self._hook) for m in self.layers]
        try:
            yield self
        finally:
            for handle in self.handles:
                handle.remove()
            self.handles = []

    def loss(self) -> torch.Tensor:
        return torch.stack(self.terms).sum() if self.terms else torch.zeros(())


@dataclass(frozen=True)
class GeneratorTraining:
    """The hyperparameters of a CGDE training cycle (Eq. 10)."""

    steps: int = 100
    batch_size: int = 64
    lr: float = 3e-4
    betas: tuple[float, float] = (0.5, 0.999)
    lambda_div: float = 1.0
    lambda_dis: float = 0.1
    augment: bool = True
    per_batch: bool = True
    """One crop and flip for the whole batch (the code), else one per image."""


def synthetic_inputs(images: torch.Tensor, to_input: Callable[[torch.Tensor], torch.Tensor], augment: bool, seed: int, per_batch: bool = True) -> torch.Tensor:
    """G's [0, 1] images as the classifier's inputs: cropped and flipped (seeded; one draw per batch when ``per_batch``,
    as the code) when ``augment``, then standardized."""
    if augment:
        with seeded(seed, images.device):
            images = crop_flip(images, same_on_batch=per_batch)
    return to_input(images)


def train_generator(
    generator: nn.Module,
    teacher: nn.Module,
    loss_fn: LossFn,
    conditions: Conditions,
    num_classes: int,
    settings: GeneratorTraining,
    to_input: Callable[[torch.Tensor], torch.Tensor],
    rng: torch.Generator,
    optimizer: torch.optim.Adam,
) -> dict[str, float]:
    """One CGDE cycle: ``settings.steps`` Adam steps on Eq. 10 against the frozen ``teacher`` (in eval mode).

    Labels, conditions and augmentation seeds all come from ``rng``; returns the mean of
    each loss term over the steps.
    """
    teacher.eval().requires_grad_(False)
    generator.train()
    statistics = BatchNormStatistics(teacher)
    sums = {"generator_sem": 0.0, "generator_div": 0.0, "generator_dis": 0.0}
    device = next(generator.parameters()).device
    for _ in range(settings.steps):
        y = torch.randint(0, num_classes, (settings.batch_size,), generator=rng).to(device)
        z = conditions.sample(y, rng)
        images = generator(z)
        inputs = synthetic_inputs(images, to_input, settings.augment, seed_from(rng), settings.per_batch)
        with statistics.recording():
            semantic = loss_fn(teacher, inputs, y)
        div = diversity_loss(z, images, y, num_classes) if settings.lambda_div > 0 else torch.zeros((), device=device)
        dis = statistics.loss() if settings.lambda_dis > 0 else torch.zeros((), device=device)
        loss = semantic + settings.lambda_div * div + settings.lambda_dis * dis
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        sums["generator_sem"] += float(semantic.detach())
        sums["generator_div"] += float(div.detach())
        sums["generator_dis"] += float(dis.detach())
    return {k: v / max(settings.steps, 1) for k, v in sums.items()}


@torch.no_grad()
def synthesize(
    generator: nn.Module,
    conditions: Conditions,
    labels: torch.Tensor,
    rng: torch.Generator,
    to_input: Callable[[torch.Tensor], torch.Tensor],
    augment: bool,
    per_batch: bool = True,
) -> torch.Tensor:
    """Client-side synthetic inputs for ``labels``: G in eval mode (running BatchNorm statistics), as the code."""
    generator.eval()
    images = generator(conditions.sample(labels, rng))
    return synthetic_inputs(images, to_input, augment, seed_from(rng), per_batch)
