"""FixMatch's weak and strong views (Sohn et al., 2020, Sec. 2.3), batched on image tensors.

FedDB (the FedDB paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning",
Sec. 5.1: "The data augmentation operation is consistent with those
described in FixMatch") and its baselines train the labeled images and label the
unlabeled ones on the *weak* view alpha(x), and train the pseudo-labeled images on the
*strong* view A(x) (Eq. 2-5):

- weak: random horizontal flip (p = 0.5; off for digits-like data such as SVHN, as
  the FedDB code does) and a random translation by up to 12.5% of the side, done as
  FixMatch's code does it, a random crop of the reflect-padded image
  (:func:`fedprior.data.augment.shift_flip.shift_flip`, per image on the whole batch);
- strong: the weak view, then one of three RandAugment recipes (``strong_augment``,
  the config field ``algorithm.strong_augment``):

  - ``"fixmatch"`` (default): FixMatch's RandAugment, per image: ``n = 2`` operations
    drawn from FixMatch's list of 14, each at a magnitude drawn uniformly over its
    range, with PIL's semantics (:mod:`fedprior.data.augment.pil_ops`), then Cutout, a
    gray square of ``cutout`` (0.5) of the side that the border may cut. Details and
    sources in :mod:`fedprior.data.augment.randaugment`.
  - ``"feddb-code"``: the FedDB authors' code (SemiFL's RandAugment): ``n = 2`` of 15
    operations, each applied with probability 0.5 at the fixed magnitude ``m = 10``,
    Cutout among the operations and none after (see :mod:`~fedprior.data.augment.randaugment`).
  - ``"kornia-fixed"``: what fedprior did before (kept for comparisons, whole: its weak
    view is kornia's ``RandomHorizontalFlip`` and ``RandomCrop(padding_mode="reflect")``):
    kornia's ``RandAugment`` operation list at a fixed ``min(3 m, 29)`` of kornia's 0..30 scale,
    ``n`` distinct operations per image, then ``kornia.augmentation.RandomErasing`` with a
    half-side square inside the image (:mod:`fedprior.data.augment.kornia_fixed`). kornia's
    brightness *adds* up to 0.84 where PIL multiplies, and at 29/30 of every range the views
    erase most of an image (a clean-trained CNN: 85.7% on clean Fashion-MNIST, 19.5% on these
    views, 30.7% on ``fixmatch``'s; ``benchmarks/strong_views.py``).

Value ranges. fedprior standardizes pixels per channel (:mod:`fedprior.data.standardize`),
while the colour operations (contrast, solarize, posterize, equalize ...) expect
images in [0, 1]. Every view is therefore made on the *un-standardized* image:
``x * std + mean`` -> ops -> clamp to [0, 1] -> ``(x - mean) / std``, with the
training set's mean and std that the model inputs were standardized with.
One-channel images work in every recipe (``color`` is then the identity; ``kornia-fixed``
runs them as three equal channels).

Randomness, and no host sync: the weak view and the three strong views are computed on
the whole batch, every image with its own parameters (its flip and shift, its operations,
whether each applies, their magnitudes or signs, the Cutout square) combined with
``torch.where``: no loop over images, no boolean indexing, no ``nonzero``, no value read
back. Every parameter is drawn on the images' device from a generator there, seeded from
the caller's generator (the client's stream for the round;
:func:`fedprior.data.augment.device_generator`): on a GPU nothing waits for the host,
and the same client, round and seed give the same views on the same device (a CPU and a
GPU generator give different numbers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fedprior.data.augment import device_generator
from fedprior.data.augment.kornia_fixed import erase, kornia_ops
from fedprior.data.augment.kornia_fixed import rand_augment as kornia_rand_augment
from fedprior.data.augment.randaugment import cutout_fixmatch, feddb_code_ops, fixmatch_ops, rand_augment
from fedprior.data.augment.shift_flip import shift_flip
from fedprior.data.standardize import PixelStandardizer

RANDAUGMENT_OPS = 15
"""Operations in kornia's default RandAugment list (auto_contrast ... translate_y)."""

STRONG_AUGMENTS = ("fixmatch", "feddb-code", "kornia-fixed")
"""The strong-view recipes: FixMatch's RandAugment, the FedDB authors' code's, fedprior's former kornia one."""


@dataclass(frozen=True)
class FixMatchAugment:
    """Weak and strong views of standardized images ``(N, C, H, W)``.

    ``mean``/``std`` are the per-channel statistics the images were standardized with;
    ``flip`` turns the horizontal flip of both views on or off; ``pad_fraction`` is the
    largest translation as a fraction of the side (FixMatch: 0.125, 4 pixels at 32);
    ``strong_augment`` picks the strong view's recipe (:data:`STRONG_AUGMENTS`, see the
    module docstring); ``n`` is RandAugment's number of operations per image; ``m`` its
    fixed magnitude in 0..10 (``feddb-code`` and ``kornia-fixed``; ``fixmatch`` draws the
    magnitude per image); ``cutout`` is the side of the Cutout square as a fraction of the
    image side (FixMatch: 0.5; 0 turns Cutout off; not used by ``feddb-code``, whose
    Cutout is one of its operations).
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    flip: bool = True
    pad_fraction: float = 0.125
    n: int = 2
    m: float = 10.0
    cutout: float = 0.5
    strong_augment: str = "fixmatch"
    _ops: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or not self.mean:
            raise ValueError(f"mean and std need one value per channel, got {self.mean} and {self.std}")
        if not 1 <= self.n <= RANDAUGMENT_OPS:
            raise ValueError(f"RandAugment n must be in 1..{RANDAUGMENT_OPS}, got {self.n}")
        if not 0 < self.m <= 10:
            raise ValueError(f"RandAugment m must be in (0, 10], got {self.m}")
        if self.strong_augment not in STRONG_AUGMENTS:
            raise ValueError(f"strong_augment must be one of {', '.join(map(repr, STRONG_AUGMENTS))}, got {self.strong_augment!r}")

    # -- building blocks (the operation lists, built once; kornia modules hold no state that carries between calls) --

    def _pool(self, recipe: str) -> list:
        if recipe not in self._ops:
            makers = {"fixmatch": fixmatch_ops, "feddb-code": lambda: feddb_code_ops(self.m), "kornia-fixed": kornia_ops}
            self._ops[recipe] = makers[recipe]()
        return self._ops[recipe]

    @property
    def standardizer(self) -> PixelStandardizer:
        """The standardisation the images were made with (``mean``, ``std``)."""
        return PixelStandardizer(self.mean, self.std)

    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        return self.standardizer.invert(x)

    def _standard(self, x: torch.Tensor) -> torch.Tensor:
        return self.standardizer.apply(x.clamp(0.0, 1.0))

    def _pad(self, height: int, width: int) -> int:
        return max(1, round(self.pad_fraction * min(height, width)))

    def _weak_unit(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """alpha(x) on a [0, 1] batch: per-image flip and shift, drawn from ``generator`` (on x's device)."""
        return shift_flip(x, self._pad(x.shape[-2], x.shape[-1]), self.flip, generator)

    def _kornia_fixed_unit(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """``kornia-fixed``: per-image kornia RandAugment at a fixed magnitude, then kornia's RandomErasing (drawn from ``generator``, on x's device).

        Its weak view (kornia's flip, then its crop of the reflect-padded image) has the distribution of
        :meth:`_weak_unit`'s, which the caller applies first (:mod:`fedprior.data.augment.kornia_fixed`).
        """
        out = self._randaugment_unit(x, generator)
        if self.cutout > 0:
            out = erase(out, self.cutout, generator)
        return out

    def _strong_unit(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The ``fixmatch`` or ``feddb-code`` RandAugment recipe (and Cutout) on a [0, 1] batch, drawn from ``generator`` (on x's device)."""
        pool = self._pool(self.strong_augment)
        x = x.clamp(0.0, 1.0)  # standardizing back and forth may step just outside [0, 1]
        if self.strong_augment == "feddb-code":
            return rand_augment(x, pool, self.n, probability=0.5, generator=generator)
        out = rand_augment(x, pool, self.n, generator=generator)
        side = round(self.cutout * min(x.shape[-2:]))
        return cutout_fixmatch(out, side, generator) if side > 0 else out

    def _randaugment_unit(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``kornia-fixed``'s per-image RandAugment: each image draws ``n`` distinct operations, applied in the order drawn
        (one-channel images as three equal channels); ``generator`` on x's device (torch's global generator when None)."""
        gray = x.shape[1] == 1
        out = kornia_rand_augment(x.expand(-1, 3, -1, -1) if gray else x, self._pool("kornia-fixed"), self.n, min(3.0 * self.m, 29.0), generator)
        return out[:, :1] if gray else out

    # -- the views --

    def weak(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """alpha(x): flip and translate (FixMatch's weak augmentation); ``generator``: the caller's stream, on any device."""
        if x.shape[0] == 0:
            return x
        return self._standard(self._weak_unit(self._unit(x), device_generator(generator, x.device)))

    def strong(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """A(x): the weak view, then RandAugment and Cutout by the ``strong_augment`` recipe (FixMatch's by default)."""
        if x.shape[0] == 0:
            return x
        on_device = device_generator(generator, x.device)
        weak = self._weak_unit(self._unit(x), on_device)
        if self.strong_augment == "kornia-fixed":
            return self._standard(self._kornia_fixed_unit(weak, on_device))
        return self._standard(self._strong_unit(weak, on_device))
