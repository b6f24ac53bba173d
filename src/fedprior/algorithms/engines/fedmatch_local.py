"""FedMatch's local training as its authors' code runs it (labels-at-client): mini-batches, pseudo-labels per batch.

From github.com/wyjeong/FedMatch, ``modules/train.py`` (``TrainModule.train_one_round``)
and ``models/fedmatch/client.py`` (``Client.loss_fn_s``, ``Client.loss_fn_u``):

- an epoch has ``round(n_labeled / B)`` steps (B = ``batch_size_client`` = 10 in
  ``config.py``); the unlabeled images go in batches of ``ceil(n_unlabeled / steps)``;
- each step first moves sigma on ``lambda_s * CE`` of the labeled batch (plain images,
  no augmentation; lambda_s = 10), then psi on the unlabeled batch's loss: the current
  local model predicts the plain images; those whose top probability reaches the
  confidence (0.75) are labeled by agreement with the helpers (the most voted argmax of
  its own and the helpers' predictions), and
  ``L_u = lambda_a CE(model(strong view), label)`` (mean over the confident images)
  ``+ lambda_i mean_h KL(p_helper_h || p_local)`` (on the confident images, the local
  prediction keeping its gradient) ``+ lambda_l1 |psi|_1 + lambda_l2 |sigma - psi|^2``.

Where this differs from the code: a client with fewer than B/2 labeled images takes one
step (the code's ``round`` gives 0 steps and it trains nothing); the images are shuffled
each epoch with the client's generator (the code walks them in the stored order); the
strong view is FixMatch's RandAugment (:mod:`fedprior.data.augment.fixmatch`; the code:
its own RandAugment with magnitude 2-5). With ``dpl`` the confidence and the votes use
predictions debiased by the APP-U of the round's start (Eq. 14, FedMatch-FedDPL).

No host sync inside the loop (docs/runtime.md, "No host sync inside a training loop"): the confident images of a batch change at
every step, so instead of being selected (a ``nonzero`` and a count read back per step)
they are a mask over the whole batch. The helpers predict, and the strong view is made
and forwarded for, every image of the batch; the KL and the cross-entropy are summed over
the confident rows only (masked), which gives the value and the gradients of the selected
images' loss when the network treats images independently (the code's ResNet-9 has no
normalization layer). With BatchNorm on batch statistics (``norm = "bn-batch"``, the
default here) the layers now normalize the strong views (and the helpers' inputs) of the
whole unlabeled batch rather than of its confident images, and the strong views draw
their parameters for every image: FedMatch's numbers differ from a loop over the selected
images.
The shuffles are drawn on the device; the losses and the confident counts are summed
there and read once per update with the other metrics.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.engines.semi_supervised import Context, Metrics
from fedprior.algorithms.pieces.pseudo_labels import debias, masked_cross_entropy
from fedprior.data.augment import device_generator
from fedprior.models.decomposed import sigma_psi_pairs


def batch_plan(labeled: int, unlabeled: int, batch_size: int) -> tuple[int, int]:
    """(steps per epoch, unlabeled batch size): the code's ``round(n_l / B)`` (at least 1) and ``ceil(n_u / steps)``."""
    steps = max(1, round(labeled / batch_size))
    return steps, math.ceil(unlabeled / steps)


def vote(own: torch.Tensor, helpers: list[torch.Tensor]) -> torch.Tensor:
    """Agreement-based labels (``Client.agreement_based_labeling``): the most voted argmax; ties go to the lower class."""
    k = own.shape[1]
    votes = sum((F.one_hot(p.argmax(1), k) for p in helpers), F.one_hot(own.argmax(1), k))
    return votes.argmax(1)


def unlabeled_batch_loss(ctx: Context, x: torch.Tensor, consistency: float, l1: float, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``Client.loss_fn_u`` on one unlabeled batch: (loss, number of confident images as a device tensor).

    The confident images are a mask, not a selection (see the module docstring): the KL
    (``batchmean`` over the confident images) and the cross-entropy (over the confident
    images, divided per ``unlabeled_mean``) are sums over the masked rows; no confident
    image gives a zero term, as the code's skipped one.
    """
    t = ctx.training
    loss = torch.zeros((), device=ctx.device)
    confident = torch.zeros((), dtype=torch.long, device=ctx.device)
    if x.shape[0]:
        local = torch.softmax(ctx.model(x), dim=1)
        rule = debias(local.detach(), ctx.appu) if t.dpl and ctx.appu is not None else local.detach()
        mask = rule.max(1).values >= t.threshold
        confident = mask.sum()
        helpers = [torch.softmax(h(x), dim=1).detach() for h in ctx.extra.get("helpers", [])]
        if helpers and consistency > 0:
            log_local = torch.log(local.clamp_min(1e-7))
            zero = torch.zeros((), dtype=local.dtype, device=ctx.device)
            rows = mask.view(-1, 1)  # KL's batchmean over the confident rows: their elements summed, over their count
            kl = [torch.where(rows, F.kl_div(log_local, p, reduction="none"), zero).sum() / confident.clamp_min(1) for p in helpers]
            loss = loss + consistency * torch.stack(kl).mean()
        votes = [debias(p, ctx.appu) for p in helpers] if t.dpl and ctx.appu is not None else helpers
        labels = vote(rule, votes)
        logits = ctx.model(ctx.augment.strong(x, ctx.generator))
        loss = loss + t.unlabeled_weight * masked_cross_entropy(logits, labels, mask, t.unlabeled_mean, x.shape[0])
    for sigma, psi in sigma_psi_pairs(ctx.model):
        loss = loss + l1 * psi.abs().sum() + l2 * (sigma.detach() - psi).pow(2).sum()
    return loss, confident


def set_gradients(loss: torch.Tensor, parameters: list[torch.Tensor]) -> None:
    """``parameters``' gradients of ``loss`` only (disjoint learning: the other parameters' gradients are left as they are)."""
    grads = torch.autograd.grad(loss, parameters, allow_unused=True)
    for parameter, grad in zip(parameters, grads, strict=True):
        parameter.grad = grad


def step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters: list[torch.Tensor], clip: float) -> None:
    """One optimizer step moving only ``parameters`` (the others get no gradient, so SGD leaves them)."""
    optimizer.zero_grad(set_to_none=True)
    set_gradients(loss, parameters)
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(parameters, clip)
    optimizer.step()


def code_training(batch_size: int, supervised_weight: float, consistency: float, l1: float, l2: float):
    """The :class:`~fedprior.algorithms.engines.semi_supervised.Method` ``train`` step: E epochs of the code's mini-batch loop."""

    def train(ctx: Context, optimizer: torch.optim.Optimizer, parameters: list[nn.Parameter]) -> Metrics:
        t = ctx.training
        pairs = sigma_psi_pairs(ctx.model)
        sigmas, psis = [s for s, _ in pairs], [p for _, p in pairs]
        n_l, n_u = ctx.x_labeled.shape[0], ctx.x_unlabeled.shape[0]
        steps, size_u = batch_plan(n_l, n_u, batch_size)
        sums = {key: torch.zeros((), dtype=torch.float64, device=ctx.device) for key in ("loss_labeled", "loss_unlabeled", "confident")}
        shuffle = device_generator(ctx.generator, ctx.device)  # the orders are drawn on the device (on the CPU: the client's stream)
        for _ in range(t.epochs):
            order_l = torch.randperm(n_l, generator=shuffle, device=ctx.device)
            order_u = torch.randperm(n_u, generator=shuffle, device=ctx.device)
            for i in range(steps):
                rows = order_l[i * batch_size : (i + 1) * batch_size]
                if rows.numel():  # a shape, known on the host
                    loss_s = supervised_weight * F.cross_entropy(ctx.model(ctx.x_labeled[rows]), ctx.y_labeled[rows])
                    step(optimizer, loss_s, sigmas, t.clip)
                    sums["loss_labeled"] += loss_s.detach().double()
                loss_u, count = unlabeled_batch_loss(ctx, ctx.x_unlabeled[order_u[i * size_u : (i + 1) * size_u]], consistency, l1, l2)
                step(optimizer, loss_u, psis, t.clip)
                sums["loss_unlabeled"] += loss_u.detach().double()
                sums["confident"] += count
        n = t.epochs * steps
        return {"loss_labeled": sums["loss_labeled"] / n, "loss_unlabeled": sums["loss_unlabeled"] / n, "pl_confident_batches": sums["confident"] / t.epochs}

    return train
