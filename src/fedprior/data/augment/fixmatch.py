"""FixMatch's weak and strong views (Sohn et al., 2020, Sec. 2.3), batched kornia ops on image tensors.

FedDB (feddb.txt 5.1: "The data augmentation operation is consistent with those
described in FixMatch") and its baselines train the labeled images and label the
unlabeled ones on the *weak* view alpha(x), and train the pseudo-labeled images on the
*strong* view A(x) (Eq. 2-5):

- weak: random horizontal flip (p = 0.5; off for digits-like data such as SVHN, as
  the FedDB code does) and a random translation by up to 12.5% of the side, done as
  FixMatch's code does it, a random crop of the reflect-padded image
  (``kornia.augmentation.RandomCrop(padding=..., padding_mode="reflect")``);
- strong: the weak view, then RandAugment with ``n = 2`` operations of magnitude
  ``m = 10`` (kornia's ``RandAugment`` and its default operation list), then Cutout, a
  square of half the side filled with gray (``kornia.augmentation.RandomErasing``).

Value ranges. fedprior standardizes pixels per channel (``experiments/build.py``),
while kornia's colour operations (contrast, solarize, posterize, equalize ...) expect
images in [0, 1]. Every view is therefore made on the *un-standardized* image:
``x * std + mean`` -> ops -> clamp to [0, 1] -> ``(x - mean) / std``, with the
training set's mean and std that the model inputs were standardized with.

Where kornia does not fit FixMatch, and what is done instead:

- kornia's ``RandAugment`` draws its ``n`` operations once per call, for the whole
  batch; FixMatch draws them per image. Here each image draws its own ``n``
  operations (without replacement, uniformly), and every operation is applied, by a
  one-operation kornia ``RandAugment``, to the images that drew it: per-image
  RandAugment with ~``n x 15`` kornia calls per batch, whatever the batch size.
- kornia's magnitude scale runs over (0, 30), RandAugment's (and the FedDB code's)
  over 0..10 with 10 the strongest: ``m`` is mapped to ``min(3 m, 29)`` (kornia
  rejects 30), so m = 10 is 29/30 of each operation's range.
- kornia's colour (saturation) operation needs RGB: a one-channel image goes through
  RandAugment as three equal channels and comes back as the first (every operation
  keeps equal channels equal, and saturation leaves a gray image unchanged).
- FixMatch's Cutout box may be cut by the border; kornia's ``RandomErasing`` keeps it
  inside the image (same size, fully visible).

Randomness: kornia draws from torch's global generator, so every call runs in
:func:`fedprior.data.augment.seeded` with a seed drawn from the caller's generator
(the client's stream for the round): the same client, round and seed give the same
views in every runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fedprior.data.augment import seed_from, seeded

RANDAUGMENT_OPS = 15
"""Operations in kornia's default RandAugment list (auto_contrast ... translate_y)."""


@dataclass(frozen=True)
class FixMatchAugment:
    """Weak and strong views of standardized images ``(N, C, H, W)``.

    ``mean``/``std`` are the per-channel statistics the images were standardized with;
    ``flip`` turns the horizontal flip of both views on or off; ``pad_fraction`` is the
    largest translation as a fraction of the side (FixMatch: 0.125, 4 pixels at 32);
    ``n``/``m`` are RandAugment's; ``cutout`` is the side of the Cutout square as a
    fraction of the image side (FixMatch: 0.5; 0 turns Cutout off).
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    flip: bool = True
    pad_fraction: float = 0.125
    n: int = 2
    m: float = 10.0
    cutout: float = 0.5
    _ops: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or not self.mean:
            raise ValueError(f"mean and std need one value per channel, got {self.mean} and {self.std}")
        if not 1 <= self.n <= RANDAUGMENT_OPS:
            raise ValueError(f"RandAugment n must be in 1..{RANDAUGMENT_OPS}, got {self.n}")
        if not 0 < self.m <= 10:
            raise ValueError(f"RandAugment m must be in (0, 10], got {self.m}")

    # -- building blocks (kornia modules hold no state that carries between calls) --

    def _modules(self, height: int, width: int) -> dict:
        key = (height, width)
        if key not in self._ops:
            import kornia.augmentation as K
            from kornia.augmentation.auto import RandAugment
            from kornia.augmentation.auto.rand_augment.rand_augment import default_policy

            pad = max(1, round(self.pad_fraction * min(height, width)))
            weak: list[torch.nn.Module] = [K.RandomHorizontalFlip(p=0.5)] if self.flip else []
            weak.append(K.RandomCrop((height, width), padding=pad, padding_mode="reflect"))
            magnitude = min(3.0 * self.m, 29.0)
            self._ops[key] = {
                "weak": torch.nn.Sequential(*weak),
                "randaugment": [RandAugment(n=1, m=magnitude, policy=[op]) for op in default_policy],  # type: ignore[arg-type]
                "cutout": K.RandomErasing(scale=(self.cutout**2, self.cutout**2), ratio=(1.0, 1.0), value=0.5, p=1.0),
            }
        return self._ops[key]

    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        return x * std + mean

    def _standard(self, x: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        return (x.clamp(0.0, 1.0) - mean) / std

    def _weak_unit(self, x: torch.Tensor) -> torch.Tensor:
        return self._modules(x.shape[-2], x.shape[-1])["weak"](x)

    def _randaugment_unit(self, x: torch.Tensor) -> torch.Tensor:
        """Per-image RandAugment: each image draws ``n`` distinct operations, applied in the order drawn."""
        ops = self._modules(x.shape[-2], x.shape[-1])["randaugment"]
        choice = torch.argsort(torch.rand(x.shape[0], len(ops), device=x.device), dim=1)[:, : self.n]
        gray = x.shape[1] == 1
        out = x.expand(-1, 3, -1, -1).clone() if gray else x.clone()
        for position in range(self.n):
            for index, op in enumerate(ops):
                rows = torch.nonzero(choice[:, position] == index).flatten()
                if rows.numel():
                    out[rows] = op(out[rows]).clamp(0.0, 1.0)
        return out[:, :1] if gray else out

    # -- the views --

    def weak(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """alpha(x): flip and translate (FixMatch's weak augmentation)."""
        if x.shape[0] == 0:
            return x
        with seeded(seed_from(generator), x.device):
            return self._standard(self._weak_unit(self._unit(x)))

    def strong(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """A(x): the weak view, then RandAugment(n, m), then Cutout (FixMatch's strong augmentation)."""
        if x.shape[0] == 0:
            return x
        with seeded(seed_from(generator), x.device):
            out = self._randaugment_unit(self._weak_unit(self._unit(x)))
            if self.cutout > 0:
                out = self._modules(x.shape[-2], x.shape[-1])["cutout"](out)
            return self._standard(out)
