"""CGDE: Concept-guided Global Distribution Estimation (the FedBM paper,
"FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. III-C, Eq. 6-10).

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

Host syncs: the conditions of a batch are one batched product for all classes
(:meth:`Conditions.sample`), L_div is one ``torch.cdist`` over the batch with a
same-class pair mask (:func:`diversity_loss`), the labels and noise of a whole cycle are
drawn first (on the CPU, in the order the steps used to draw them, so the numbers do not
change) and copied to the device once (:func:`draw_batches`; a client's local steps draw
their synthetic batches the same way, :func:`synthesize`), and the loss terms are summed
on the device and read once per cycle. The crop and flip of G's images draw their
parameters on the images' device, from a generator there seeded per step from ``rng``
(:mod:`fedprior.data.augment.crop_flip`): nothing waits for the host inside a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.pieces.metrics import read_once
from fedprior.data.augment import generator_at, seed_from
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

    def noise(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """The standard normal draws of ``count`` conditions, (count, D) on the CPU from ``generator``."""
        return torch.randn(count, self.mean.shape[1], generator=generator)

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """(N, dim) conditions for labels ``y`` (N,), drawn from ``generator``."""
        return self.from_noise(y, self.noise(y.shape[0], generator).to(self.mean.device))

    def from_noise(self, y: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """(N, dim) conditions for labels ``y`` from standard normal ``eps`` (N, D): ``mu_y + L_y eps`` (Eq. 9).

        The whole batch at once, with no per-class selection: ``eps`` times every class's
        factor in one batched product (K, N, D) (K times the work of the per-class
        products, small beside G's), then each row's own class taken by a gather.
        """
        if self.kind == "noise":
            return torch.cat([eps, F.one_hot(y, self.mean.shape[0]).to(eps.dtype)], dim=1)
        if self.scale.ndim == 2:
            return self.mean[y] + self.scale[y] * eps
        every_class = torch.matmul(eps, self.scale.transpose(1, 2))  # (K, N, D): eps_n L_k^T for every k
        return self.mean[y] + every_class[y, torch.arange(y.shape[0], device=y.device)]

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
    than two samples in the batch adds nothing. Computed over the whole batch with static
    shapes: the L1 distances of all pairs (``torch.cdist``), a mask of the same-class pairs
    ``i < j``, per-class sums and counts by a one-hot product; no selection, no value read.
    """
    z, images = z.flatten(1), images.flatten(1)
    n = y.shape[0]
    upper = torch.ones(n, n, dtype=torch.bool, device=y.device).triu(1)
    pairs = (y.view(n, 1) == y.view(1, n)) & upper  # each unordered same-class pair once
    one = torch.ones((), dtype=z.dtype, device=z.device)
    dz = torch.where(pairs, torch.cdist(z, z, p=1), one)  # 1 off the pairs: no 0/0 to poison the gradients
    dg = torch.where(pairs, torch.cdist(images, images, p=1), one)
    term = torch.where(pairs, 1.0 / (dg / dz + EPS), torch.zeros((), dtype=z.dtype, device=z.device))
    member = F.one_hot(y, num_classes).to(term.dtype)  # (N, K): pair (i, j) belongs to y_i's class
    sums = member.T @ term.sum(1)
    counts = member.T @ pairs.sum(1).to(term.dtype)
    return (sums / counts.clamp_min(1)).sum() / num_classes


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
    """G's [0, 1] images as the classifier's inputs: cropped and flipped (drawn on the images' device from a generator
    there seeded with ``seed``; one draw per batch when ``per_batch``, as the code) when ``augment``, then standardized."""
    if augment:
        images = crop_flip(images, same_on_batch=per_batch, generator=generator_at(seed, images.device))
    return to_input(images)


@dataclass(frozen=True)
class SyntheticDraws:
    """The random draws of ``steps`` batches of G's images, drawn before the first (:func:`draw_batches`).

    Step ``i`` uses ``labels[i]`` (its labels, on the device), ``noise[i]`` (the standard normal draws of its
    conditions, :meth:`Conditions.from_noise`; on the conditions' device) and ``seeds[i]`` (the seed of its
    crop and flip, :func:`synthetic_inputs`).
    """

    labels: torch.Tensor
    """(steps, batch) class labels."""
    noise: torch.Tensor
    """(steps, batch, D) standard normal draws."""
    seeds: list[int]


def draw_batches(conditions: Conditions, num_classes: int, batch_size: int, steps: int, rng: torch.Generator, device: torch.device) -> SyntheticDraws:
    """The labels, noise and augmentation seeds of ``steps`` batches of ``batch_size`` images, drawn from ``rng`` on the CPU
    in the order a step-by-step loop draws them (per step: labels, noise, seed; so the numbers are those of drawing at
    each step), the labels moved to ``device`` and the noise to the conditions' device in one copy each, not one per step."""
    labels, noises, seeds = [], [], []
    for _ in range(steps):
        labels.append(torch.randint(0, num_classes, (batch_size,), generator=rng))
        noises.append(conditions.noise(batch_size, rng))
        seeds.append(seed_from(rng))
    if not steps:
        dim = conditions.mean.shape[1]
        empty_labels = torch.empty(0, batch_size, dtype=torch.long, device=device)
        return SyntheticDraws(empty_labels, torch.empty(0, batch_size, dim, device=conditions.mean.device), [])
    return SyntheticDraws(torch.stack(labels).to(device), torch.stack(noises).to(conditions.mean.device), seeds)


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

    Labels, conditions and augmentation seeds all come from ``rng`` (the labels and the
    conditions' noise of every step drawn before the first, in the order the steps use
    them, and moved to the device in one copy); returns the mean of each loss term over
    the steps, summed on the device and read once.
    """
    teacher.eval().requires_grad_(False)
    generator.train()
    statistics = BatchNormStatistics(teacher)
    device = next(generator.parameters()).device
    sums = {key: torch.zeros((), dtype=torch.float64, device=device) for key in ("generator_sem", "generator_div", "generator_dis")}
    draws = draw_batches(conditions, num_classes, settings.batch_size, settings.steps, rng, device)
    for step in range(settings.steps):
        y = draws.labels[step]
        z = conditions.from_noise(y, draws.noise[step])
        images = generator(z)
        inputs = synthetic_inputs(images, to_input, settings.augment, draws.seeds[step], settings.per_batch)
        with statistics.recording():
            semantic = loss_fn(teacher, inputs, y)
        div = diversity_loss(z, images, y, num_classes) if settings.lambda_div > 0 else torch.zeros((), device=device)
        dis = statistics.loss() if settings.lambda_dis > 0 else torch.zeros((), device=device)
        loss = semantic + settings.lambda_div * div + settings.lambda_dis * dis
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        sums["generator_sem"] += semantic.detach().double()
        sums["generator_div"] += div.detach().double()
        sums["generator_dis"] += dis.detach().double()
    return {k: v / max(settings.steps, 1) for k, v in read_once(sums).items()}


@torch.no_grad()
def synthesize(
    generator: nn.Module,
    conditions: Conditions,
    draws: SyntheticDraws,
    step: int,
    to_input: Callable[[torch.Tensor], torch.Tensor],
    augment: bool,
    per_batch: bool = True,
) -> torch.Tensor:
    """Client-side synthetic inputs of local step ``step``, for the labels ``draws.labels[step]``: G in eval mode (running
    BatchNorm statistics), as the code; its conditions from ``draws.noise[step]``, its crop and flip seeded by ``draws.seeds[step]``."""
    generator.eval()
    images = generator(conditions.from_noise(draws.labels[step], draws.noise[step]))
    return synthetic_inputs(images, to_input, augment, draws.seeds[step], per_batch)
