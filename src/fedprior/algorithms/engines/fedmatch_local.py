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
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.engines.semi_supervised import Context
from fedprior.algorithms.pieces.pseudo_labels import debias
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


def unlabeled_batch_loss(ctx: Context, x: torch.Tensor, consistency: float, l1: float, l2: float) -> tuple[torch.Tensor, int]:
    """``Client.loss_fn_u`` on one unlabeled batch: (loss, number of confident images)."""
    t = ctx.training
    loss = torch.zeros((), device=ctx.device)
    confident = 0
    if x.shape[0]:
        local = torch.softmax(ctx.model(x), dim=1)
        rule = debias(local.detach(), ctx.appu) if t.dpl and ctx.appu is not None else local.detach()
        mask = rule.max(1).values >= t.threshold
        confident = int(mask.sum())
        if confident:
            rows = mask.nonzero().flatten()
            helpers = [torch.softmax(h(x[rows]), dim=1).detach() for h in ctx.extra.get("helpers", [])]
            if helpers and consistency > 0:
                log_local = torch.log(local[rows].clamp_min(1e-7))
                loss = loss + consistency * torch.stack([F.kl_div(log_local, p, reduction="batchmean") for p in helpers]).mean()
            votes = [debias(p, ctx.appu) for p in helpers] if t.dpl and ctx.appu is not None else helpers
            labels = vote(rule[rows], votes)
            total = F.cross_entropy(ctx.model(ctx.augment.strong(x[rows], ctx.generator)), labels, reduction="sum")
            loss = loss + t.unlabeled_weight * total / (confident if t.unlabeled_mean == "confident" else x.shape[0])
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

    def train(ctx: Context, optimizer: torch.optim.Optimizer, parameters: list[nn.Parameter]) -> dict[str, float]:
        t = ctx.training
        pairs = sigma_psi_pairs(ctx.model)
        sigmas, psis = [s for s, _ in pairs], [p for _, p in pairs]
        n_l, n_u = ctx.x_labeled.shape[0], ctx.x_unlabeled.shape[0]
        steps, size_u = batch_plan(n_l, n_u, batch_size)
        loss_s_sum = loss_u_sum = 0.0
        confident = 0
        for _ in range(t.epochs):
            order_l = torch.randperm(n_l, generator=ctx.generator).to(ctx.device)
            order_u = torch.randperm(n_u, generator=ctx.generator).to(ctx.device)
            for i in range(steps):
                rows = order_l[i * batch_size : (i + 1) * batch_size]
                if rows.numel():
                    loss_s = supervised_weight * F.cross_entropy(ctx.model(ctx.x_labeled[rows]), ctx.y_labeled[rows])
                    step(optimizer, loss_s, sigmas, t.clip)
                    loss_s_sum += float(loss_s.detach())
                loss_u, count = unlabeled_batch_loss(ctx, ctx.x_unlabeled[order_u[i * size_u : (i + 1) * size_u]], consistency, l1, l2)
                step(optimizer, loss_u, psis, t.clip)
                loss_u_sum += float(loss_u.detach())
                confident += count
        n = t.epochs * steps
        return {"loss_labeled": loss_s_sum / n, "loss_unlabeled": loss_u_sum / n, "pl_confident_batches": confident / t.epochs}

    return train
