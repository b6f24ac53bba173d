"""SemiFL's client-side training (Diao, Ding & Tarokh, "SemiFL: Semi-Supervised Federated Learning for Unlabeled
Clients with Alternate Training", NeurIPS 2022), as FedDB compares with it (the FedDB
paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 5.1: "we adopt its
client-side training due to the lack of training samples on the server").

On top of FixMatch's client (:mod:`fedprior.algorithms.engines.semi_supervised`), the SemiFL
client adds a MixUp loss (its code's ``fix-mix`` mode, ``src/modules/modules.py``): each
epoch, lambda ~ Beta(a, a) with a = 0.75; every confident image's weak view is mixed
with the weak view of an unlabeled image drawn at random (with replacement) from all
of the client's unlabeled images, x_mix = lambda x + (1 - lambda) x', and

    L_mix = lambda CE(f(x_mix), y_hat) + (1 - lambda) CE(f(x_mix), y_hat'),

where y_hat' is the argmax pseudo-label of x' (confident or not, as in the code's
``MixDataset``). As in its code the FixMatch part is averaged over the confident
images (``unlabeled_mean = confident``). The server's alternate training (fine-tuning on
server labels, static BatchNorm) has no labels to use in FedDB's setting and is left out.
``dpl = true`` gives SemiFL-FedDPL: both pseudo-labels come from the debiased prediction.

Equations (Diao, Ding & Tarokh, NeurIPS 2022), and where each is computed: the FixMatch part (hard
pseudo-labels, strong-view cross-entropy), :func:`~fedprior.algorithms.pieces.pseudo_labels.hard_labels` and
:class:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised`; the MixUp loss L_mix, :func:`mixup_loss`;
the average, :meth:`~fedprior.algorithms.engines.semi_supervised.SemiSupervised.aggregate`.
Where it departs from the paper: the server's alternate training is left out (above).
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Runtime, Task, runtime_options
from fedprior.algorithms.engines.semi_supervised import Context, Method, confident_rows, semi_supervised_algorithm
from fedprior.algorithms.pieces.hyperparameters import Dpl, SemiSupervisedFields, with_fields
from fedprior.data.augment import device_generator, seed_from, seeded

MixAlpha = Annotated[float, Field(gt=0, description="a of the MixUp coefficient lambda ~ Beta(a, a) (SemiFL's code: 0.75)")]
MixWeight = Annotated[float, Field(ge=0, description="weight of the MixUp loss (SemiFL's code: 1)")]


def mixup_loss(alpha: float, weight: float):
    """SemiFL's MixUp term on the confident images, one lambda per epoch (see the module docstring)."""

    def extra(ctx: Context, epoch: int) -> torch.Tensor:
        assert ctx.mask is not None and ctx.labels is not None  # pseudo-labeled before any unlabeled loss
        confident = confident_rows(ctx)  # fixed for the update: no host sync per epoch
        if confident.numel() == 0 or weight == 0:
            return torch.zeros((), device=ctx.device)
        with seeded(seed_from(ctx.generator)):  # lambda is drawn on the host (a number, never read from the device)
            lam = float(torch.distributions.Beta(alpha, alpha).sample())
        partners = torch.randint(0, ctx.x_unlabeled.shape[0], (confident.numel(),), generator=device_generator(ctx.generator, ctx.device), device=ctx.device)
        x = lam * ctx.augment.weak(ctx.x_unlabeled[confident], ctx.generator) + (1 - lam) * ctx.augment.weak(ctx.x_unlabeled[partners], ctx.generator)
        logits = ctx.model(x)
        loss = lam * F.cross_entropy(logits, ctx.labels[confident]) + (1 - lam) * F.cross_entropy(logits, ctx.labels[partners])
        return weight * loss

    return extra


@runtime_options("precision", "compile")
@with_fields("shared", SemiSupervisedFields, unlabeled_mean="confident")
def semifl(
    task: Task, runtime: Runtime, *, dpl: Dpl = False, mix_alpha: MixAlpha = 0.75, mix_weight: MixWeight = 1.0, shared: SemiSupervisedFields
) -> Algorithm:
    """SemiFL's client-side training (Diao et al. 2022): FixMatch plus MixUp; dpl = true gives SemiFL-FedDPL."""
    return semi_supervised_algorithm(
        "semifl",
        task,
        shared,
        runtime,
        dpl=dpl,
        method=Method(extra_loss=mixup_loss(mix_alpha, mix_weight)),  # MixUp's lambda comes from the global generator: clients one at a time
    )
