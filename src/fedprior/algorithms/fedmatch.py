"""FedMatch (Jeong, Yoon, Yang & Hwang, "Federated Semi-Supervised Learning with Inter-Client Consistency &
Disjoint Learning", ICLR 2021), labels-at-client scenario, as a baseline of FedDB (the FedDB paper,
"Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 5.1).

Its two ideas, on the shared semi-supervised client (:mod:`fedprior.algorithms.engines.semi_supervised`):

- **Parameter decomposition / disjoint learning** (Sec. 4.2): every parameter is
  theta = sigma + psi (:mod:`fedprior.models.decomposed`); the supervised loss, weighted
  by ``supervised_weight`` (lambda_s = 10), trains sigma only, the unlabeled loss trains
  psi only, with ``l1_weight * |psi|_1`` (sparse psi) and ``l2_weight * |sigma - psi|^2``
  on psi (lambda_l1 = 1e-4, lambda_l2 = 10).
- **Inter-client consistency** (Sec. 4.1): every ``helper_interval`` rounds (10) the
  server broadcasts the psi of the previous round's clients with an embedding of each
  (its prediction on one fixed random input); a client that has been trained before
  picks the ``helpers`` (2) closest to its own last embedding, and (a) labels by
  agreement: the pseudo-label of a confident image is the class most voted by its own
  prediction and the helpers' (sigma + psi_helper), and (b) adds
  ``consistency_weight * mean_j KL(p_helper_j || p_local)`` on the confident images
  (lambda_i = 1e-2).

The defaults are its authors' code (github.com/wyjeong/FedMatch), field by field, with the deviations left
and why, in docs/feddb.md, "Baselines: what each one is here". ``labeled_batch_size`` = 10 is the code's
mini-batch loop, each batch labeled by the current local model (:mod:`fedprior.algorithms.engines.fedmatch_local`);
``labeled_batch_size = 0`` gives the FedDB-style variant: E full-batch steps with pseudo-labels fixed once per round
from the received model (Algorithm 1 of the FedDB paper).
``dpl = true`` gives FedMatch-FedDPL: every prediction (own and helpers') is debiased by
the client's APP-U (Eq. 14) before the threshold and the vote.

Equations (Jeong et al., ICLR 2021), and where each is computed:

- parameter decomposition theta = sigma + psi (Sec. 4.2): :func:`~fedprior.models.decomposed.decompose`;
- disjoint learning, the supervised loss on sigma and the unlabeled loss on psi: :func:`disjoint`
  (in the code's mini-batch loop: :func:`~fedprior.algorithms.engines.fedmatch_local.code_training`);
- the inter-client consistency KL (Sec. 4.1) and psi's regularizers lambda_l1 |psi|_1 + lambda_l2 |sigma - psi|^2:
  :func:`consistency_and_regularizers` (per mini-batch: :func:`~fedprior.algorithms.engines.fedmatch_local.unlabeled_batch_loss`);
- agreement-based pseudo-labels: :func:`agreement_labels` (per mini-batch: :func:`~fedprior.algorithms.engines.fedmatch_local.vote`);
- helpers chosen by the distance between model embeddings: :func:`embedding`, :func:`keep_helpers`, :func:`choose_helpers`;
- the code's upload cut and lr decay: :func:`cut_upload`, :func:`adaptive_lr_decay`.

Where it departs from the paper and its code: docs/feddb.md, "Baselines: what each one is here".
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Sequence
from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.fedmatch_local import code_training, set_gradients
from fedprior.algorithms.engines.semi_supervised import Context, Method, confident_rows, predict, semi_supervised_algorithm
from fedprior.algorithms.pieces.hyperparameters import Dpl, SemiSupervisedFields, with_fields
from fedprior.algorithms.pieces.pseudo_labels import debias, hard_labels
from fedprior.algorithms.pieces.tensors import MODEL
from fedprior.models.decomposed import decompose, is_psi, is_sigma, sigma_psi_pairs
from fedprior.seeding import torch_generator

HELPERS = "helpers."
EMBEDDING = "fedmatch.embedding"
LR_SCALE = "fedmatch.lr_scale"
BEST_LOSS = "fedmatch.best_loss"
PATIENCE = "fedmatch.patience"

ConsistencyWeight = Annotated[float, Field(ge=0, description="lambda_i, weight of the inter-client consistency KL (FedMatch's code: 1e-2)")]
L1Weight = Annotated[float, Field(ge=0, description="lambda_l1, sparsity of psi (FedMatch's code: 1e-4)")]
L2Weight = Annotated[float, Field(ge=0, description="lambda_l2, weight of |sigma - psi|^2 on psi (FedMatch's code: 10)")]
HelperCount = Annotated[int, Field(ge=0, description="helper models per client (FedMatch's code: 2); 0 = no inter-client consistency")]
HelperInterval = Annotated[int, Field(ge=1, description="helpers are sent every this many rounds (FedMatch's code: 10)")]
SupervisedWeight = Annotated[float, Field(gt=0, description="lambda_s, weight of the supervised loss on sigma (FedMatch's code: 10)")]
PsiFactor = Annotated[float, Field(ge=0, description="psi starts at this times sigma (FedMatch's code: psi_factor = 0.2); 0 = psi starts at zero")]
L1Threshold = Annotated[
    float, Field(ge=0, description="psi entries with |psi| <= this count as zero at inference and in the upload (FedMatch's code: l1_thres = 5e-6); 0 = off")
]
DeltaThreshold = Annotated[
    float,
    Field(
        ge=0,
        description="entries of sigma and psi that moved by no more than this are reset to the received value before the upload (FedMatch's code: delta_thres = 5e-5); 0 = off",
    ),
]
LabeledBatchSize = Annotated[
    int,
    Field(
        ge=0,
        description="labeled images per mini-batch, the unlabeled ones split into as many batches and pseudo-labeled per batch by the current model (FedMatch's code: 10); 0 = E full-batch steps with labels fixed once per round (FedDB's loop)",
    ),
]
LrPatience = Annotated[
    int,
    Field(ge=0, description="a client's lr is divided by lr_factor after this many of its rounds without a lower labeled loss (FedMatch's code: 5); 0 = off"),
]
LrFactor = Annotated[float, Field(gt=1, description="the divisor of that decay (FedMatch's code: 3)")]


def noise_input(task: Task, seed: int) -> torch.Tensor:
    """The fixed random input whose prediction embeds a model (FedMatch's server: one Gaussian image)."""
    return torch.randn((1, *task.input_shape), generator=torch_generator(seed, "fedmatch", "noise"))


def embedding(model: torch.nn.Module, task: Task, seed: int, device: torch.device) -> torch.Tensor:
    return torch.softmax(predict(model, noise_input(task, seed).to(device)), dim=1)[0].cpu()


def keep_helpers(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
    """Server: the round's clients' psi and embeddings become the next helper pool."""
    out = {k: v for k, v in state.items() if not k.startswith(HELPERS)}
    for j, reply in enumerate(replies):
        out.update({f"{HELPERS}{j}.{k}": v for k, v in reply.arrays.items() if k.startswith(MODEL) and is_psi(k)})
    out[f"{HELPERS}embedding"] = torch.stack([r.arrays[EMBEDDING] for r in replies])
    out[f"{HELPERS}ids"] = torch.tensor([r.client_id for r in replies])
    return out


def send_helpers(interval: int):
    def extra(state: State, info: RoundInfo) -> dict[str, torch.Tensor]:
        if info.round % interval or f"{HELPERS}ids" not in state:
            return {}
        return {k: v for k, v in state.items() if k.startswith(HELPERS)}

    return extra


RECEIVED = "fedmatch.received"
"""``Context.extra`` key: the received sigma and psi, copied on the device before training (for :func:`cut_upload`)."""


def keep_received(ctx: Context) -> None:
    """Client: a copy of the received sigma and psi, where the model is (the upload cut compares with it on the device)."""
    ctx.extra[RECEIVED] = {k: v.detach().clone() for k, v in ctx.model.state_dict().items() if is_sigma(k) or is_psi(k)}


def choose_helpers(count: int):
    """Client: the ``count`` helpers nearest to its own last embedding, as models sigma + psi_helper."""

    def start(ctx: Context) -> None:
        arrays = ctx.message.arrays
        if count == 0 or f"{HELPERS}ids" not in arrays or EMBEDDING not in ctx.state:
            return
        ids = arrays[f"{HELPERS}ids"]
        distance = torch.linalg.vector_norm(arrays[f"{HELPERS}embedding"] - ctx.state[EMBEDDING], dim=1)
        distance[ids == ctx.info.client_id] = float("inf")
        chosen = [int(j) for j in torch.argsort(distance, stable=True)[:count] if torch.isfinite(distance[j])]
        helpers = []
        for j in chosen:
            prefix = f"{HELPERS}{j}.{MODEL}"
            psi = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            helper = copy.deepcopy(ctx.model)
            helper.load_state_dict({**helper.state_dict(), **psi})
            helpers.append(helper.eval())
        ctx.extra["helpers"] = helpers

    return start


def agreement_labels(ctx: Context) -> tuple[torch.Tensor, torch.Tensor]:
    """FedMatch's agreement-based labels: the most voted class of the own and the helpers' argmax; confidence from the own."""
    assert ctx.probabilities is not None and ctx.appu is not None and ctx.weak_unlabeled is not None  # set by _label
    own = debias(ctx.probabilities, ctx.appu) if ctx.training.dpl else ctx.probabilities
    labels, mask = hard_labels(own, ctx.training.threshold)
    helpers = ctx.extra.get("helpers", [])
    if not helpers or ctx.probabilities.shape[0] == 0:
        return labels, mask
    raw = [torch.softmax(predict(h, ctx.weak_unlabeled, batch=ctx.training.eval_batch_size), dim=1) for h in helpers]
    ctx.extra["helper_probabilities"] = raw
    k = own.shape[1]
    votes = sum((F.one_hot((debias(p, ctx.appu) if ctx.training.dpl else p).argmax(1), k) for p in raw), F.one_hot(labels, k))
    return votes.argmax(1), mask


def consistency_and_regularizers(consistency: float, l1: float, l2: float):
    """psi's extra loss: lambda_i mean_j KL(p_helper_j || p_local) on confident images, lambda_l1 |psi|_1, lambda_l2 |sigma - psi|^2."""

    def extra(ctx: Context, epoch: int) -> torch.Tensor:
        loss = torch.zeros((), device=ctx.device)
        assert ctx.mask is not None and ctx.weak_unlabeled is not None  # pseudo-labeled before any unlabeled loss
        confident = confident_rows(ctx)  # fixed for the update: no host sync per epoch
        helper_probabilities = ctx.extra.get("helper_probabilities", [])
        if helper_probabilities and confident.numel() and consistency > 0:
            local = F.log_softmax(ctx.model(ctx.weak_unlabeled[confident]), dim=1)
            kl = [F.kl_div(local, p[confident], reduction="batchmean") for p in helper_probabilities]
            loss = loss + consistency * torch.stack(kl).mean()
        for sigma, psi in sigma_psi_pairs(ctx.model):
            loss = loss + l1 * psi.abs().sum() + l2 * (sigma.detach() - psi).pow(2).sum()
        return loss

    return extra


def disjoint(supervised_weight: float = 1.0):
    """Disjoint learning: ``supervised_weight`` times the supervised loss reaches sigma only, the unlabeled loss psi only."""

    def backward(ctx: Context, loss_labeled: torch.Tensor, loss_unlabeled: torch.Tensor) -> None:
        pairs = sigma_psi_pairs(ctx.model)
        for parameters, loss in (([s for s, _ in pairs], supervised_weight * loss_labeled), ([p for _, p in pairs], loss_unlabeled)):
            if loss.requires_grad:
                set_gradients(loss, parameters)

    return backward


disjoint_backward = disjoint(1.0)


def cut_upload(trained: dict[str, torch.Tensor], received: dict[str, torch.Tensor], l1_threshold: float, delta: float) -> dict[str, torch.Tensor]:
    """``TrainModule.cal_c2s``: an entry of sigma or psi that moved by at most ``delta`` from the received one is reset to it.

    For psi the move is measured from the sparsified psi (entries with ``|psi| <= l1_threshold`` as zero), as the code does.
    """
    out = {}
    for name, value in trained.items():
        if not (is_sigma(name) or is_psi(name)) or name not in received:
            continue
        moved = (value * (value.abs() > l1_threshold) if is_psi(name) else value) - received[name]
        out[name] = torch.where(moved.abs() > delta, value, received[name])
    return out


def adaptive_lr_decay(loss: float, best: float, wait: int, scale: float, patience: int, factor: float) -> tuple[float, int, float]:
    """``TrainModule.adaptive_lr_decay``: (best loss, patience left, lr scale) after one more local epoch."""
    if loss < best:
        return loss, patience, scale
    wait -= 1
    if wait <= 0:
        return best, patience, scale / factor
    return best, wait, scale


def lr_scale(ctx: Context) -> float:
    return float(ctx.state.get(LR_SCALE, torch.tensor(1.0)))


def start_round(helpers: int, delta: float):
    """Before training: the received weights kept for the upload cut (when ``delta`` > 0), then the helpers chosen."""
    choose = choose_helpers(helpers)

    def start(ctx: Context) -> None:
        if delta > 0:
            keep_received(ctx)
        choose(ctx)

    return start


def finish_round(task: Task, l1_threshold: float, delta: float, patience: int, factor: float):
    """The upload (thresholded as the code's ``cal_c2s``), the model's embedding and the lr-decay state.

    The cut runs where the model is, against the received weights kept there by :func:`keep_received` (no copy of the
    model to the host and back); the cut entries replace the reply's, on that device as the rest of the reply.
    """

    def finish(ctx: Context) -> tuple[dict[str, torch.Tensor], State]:
        cut: dict[str, torch.Tensor] = {}
        if delta > 0:
            weights = ctx.model.state_dict()
            cut = cut_upload({k: v.detach() for k, v in weights.items()}, ctx.extra[RECEIVED], l1_threshold, delta)
            with torch.no_grad():
                for name, value in cut.items():
                    weights[name].copy_(value)
        e = embedding(ctx.model, task, ctx.info.seed, ctx.device)
        state: State = {EMBEDDING: e}
        if patience > 0 and ctx.x_labeled.shape[0]:
            loss = float(F.cross_entropy(predict(ctx.model, ctx.x_labeled, batch=ctx.training.eval_batch_size), ctx.y_labeled))
            best, wait, scale = adaptive_lr_decay(
                loss,
                float(ctx.state.get(BEST_LOSS, torch.tensor(math.inf))),
                int(ctx.state.get(PATIENCE, torch.tensor(patience))),
                lr_scale(ctx),
                patience,
                factor,
            )
            state.update({BEST_LOSS: torch.tensor(best), PATIENCE: torch.tensor(wait), LR_SCALE: torch.tensor(scale)})
        return {EMBEDDING: e, **{MODEL + k: v for k, v in cut.items()}}, state

    return finish


@with_fields(
    "shared",
    SemiSupervisedFields,
    lr=1e-3,
    momentum=0.0,
    weight_decay=0.0,
    nesterov=False,
    clip=0.0,
    lr_decay_rounds=0,
    keep_optimizer_state=False,
    threshold=0.75,
    unlabeled_weight=1e-2,
    unlabeled_mean="confident",
)
def fedmatch(
    task: Task,
    runtime: Runtime,
    *,
    dpl: Dpl = False,
    consistency_weight: ConsistencyWeight = 1e-2,
    l1_weight: L1Weight = 1e-4,
    l2_weight: L2Weight = 10.0,
    helpers: HelperCount = 2,
    helper_interval: HelperInterval = 10,
    supervised_weight: SupervisedWeight = 10.0,
    psi_factor: PsiFactor = 0.2,
    l1_threshold: L1Threshold = 5e-6,
    delta_threshold: DeltaThreshold = 5e-5,
    labeled_batch_size: LabeledBatchSize = 10,
    lr_patience: LrPatience = 5,
    lr_factor: LrFactor = 3.0,
    shared: SemiSupervisedFields,
) -> Algorithm:
    """FedMatch (Jeong et al. 2021): inter-client consistency and disjoint learning, as its code runs; dpl = true gives FedMatch-FedDPL."""
    train = code_training(labeled_batch_size, supervised_weight, consistency_weight, l1_weight, l2_weight) if labeled_batch_size > 0 else None
    method = Method(
        start=start_round(helpers, delta_threshold),
        lr_scale=lr_scale,
        pseudo_labels=agreement_labels,
        train=train,
        extra_loss=consistency_and_regularizers(consistency_weight, l1_weight, l2_weight),
        backward=disjoint(supervised_weight),
        finish=finish_round(task, l1_threshold, delta_threshold, lr_patience, lr_factor),
        after_aggregate=keep_helpers,
        broadcast_extra=send_helpers(helper_interval),
    )
    wrap = functools.partial(decompose, psi_factor=psi_factor, threshold=l1_threshold)
    return semi_supervised_algorithm("fedmatch", task, shared, runtime, dpl=dpl, method=method, wrap=wrap)
