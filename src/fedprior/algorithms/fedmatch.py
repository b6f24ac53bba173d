"""FedMatch (Jeong, Yoon, Yang & Hwang, "Federated Semi-Supervised Learning with Inter-Client Consistency &
Disjoint Learning", ICLR 2021), labels-at-client scenario, as a baseline of FedDB (feddb.txt 5.1).

Its two ideas, on the shared semi-supervised client (:mod:`fedprior.algorithms.semi_supervised`):

- **Parameter decomposition / disjoint learning** (Sec. 4.2): every parameter is
  theta = sigma + psi (:mod:`fedprior.models.decomposed`); the supervised loss trains
  sigma only, the unlabeled loss trains psi only, with ``l1_weight * |psi|_1`` (sparse
  psi) and ``l2_weight * |sigma - psi|^2`` on psi (the authors' code,
  ``models/fedmatch/client.py``: lambda_l1 = 1e-4, lambda_l2 = 10).
- **Inter-client consistency** (Sec. 4.1): every ``helper_interval`` rounds (code: 10)
  the server broadcasts the psi of the previous round's clients with an embedding of
  each (its prediction on one fixed random input); a client that has been trained
  before picks the ``helpers`` (code: 2) closest to its own last embedding, and
  (a) labels by agreement: the pseudo-label of a confident image is the class most
  voted by its own prediction and the helpers' (sigma + psi_helper), and (b) adds
  ``consistency_weight * mean_j KL(p_helper_j || p_local)`` on the confident images
  (code: lambda_i = 1e-2).

The rest follows its code where FedDB's paper is silent: Adam with lr 1e-3 and weight
decay 1e-4, confidence 0.75, the pseudo-label loss weighted lambda_a = 1e-2 and averaged
over the confident images. Where this differs from the code: pseudo-labels (own and
helpers') are fixed once per round from the received model, like every method here
(Algorithm 1 of feddb.txt), where the code relabels each mini-batch with the current
local model; the helper pool is the previous round's clients (the code keeps every
client ever seen, which would put 100 models in the server state); helper models and
the communication savings of sparse psi are not counted (uploads are dense).
``dpl = true`` gives FedMatch-FedDPL: every prediction (own and helpers') is debiased by
the client's APP-U (Eq. 14) before the threshold and the vote.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Annotated

import torch
import torch.nn.functional as F
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Reply, RoundInfo, State, Task
from fedprior.algorithms.fixmatch import CPU, Dpl
from fedprior.algorithms.pseudo_labels import debias, hard_labels
from fedprior.algorithms.semi_supervised import Context, Method, predict, semi_supervised_algorithm
from fedprior.algorithms.ssl_hyperparameters import SEMI_SUPERVISED, with_shared
from fedprior.algorithms.tensors import MODEL
from fedprior.models.decomposed import decompose, is_psi, sigma_psi_pairs
from fedprior.seeding import torch_generator

HELPERS = "helpers."
EMBEDDING = "fedmatch.embedding"

ConsistencyWeight = Annotated[float, Field(ge=0, description="lambda_i, weight of the inter-client consistency KL (FedMatch's code: 1e-2)")]
L1Weight = Annotated[float, Field(ge=0, description="lambda_l1, sparsity of psi (FedMatch's code: 1e-4)")]
L2Weight = Annotated[float, Field(ge=0, description="lambda_l2, weight of |sigma - psi|^2 on psi (FedMatch's code: 10)")]
HelperCount = Annotated[int, Field(ge=0, description="helper models per client (FedMatch's code: 2); 0 = no inter-client consistency")]
HelperInterval = Annotated[int, Field(ge=1, description="helpers are sent every this many rounds (FedMatch's code: 10)")]


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
    raw = [torch.softmax(predict(h, ctx.weak_unlabeled), dim=1) for h in helpers]
    ctx.extra["helper_probabilities"] = raw
    k = own.shape[1]
    votes = sum((F.one_hot((debias(p, ctx.appu) if ctx.training.dpl else p).argmax(1), k) for p in raw), F.one_hot(labels, k))
    return votes.argmax(1), mask


def consistency_and_regularizers(consistency: float, l1: float, l2: float):
    """psi's extra loss: lambda_i mean_j KL(p_helper_j || p_local) on confident images, lambda_l1 |psi|_1, lambda_l2 |sigma - psi|^2."""

    def extra(ctx: Context, epoch: int) -> torch.Tensor:
        loss = torch.zeros((), device=ctx.device)
        assert ctx.mask is not None and ctx.weak_unlabeled is not None  # pseudo-labeled before any unlabeled loss
        confident = ctx.mask.nonzero().flatten()
        helper_probabilities = ctx.extra.get("helper_probabilities", [])
        if helper_probabilities and confident.numel() and consistency > 0:
            local = F.log_softmax(ctx.model(ctx.weak_unlabeled[confident]), dim=1)
            kl = [F.kl_div(local, p[confident], reduction="batchmean") for p in helper_probabilities]
            loss = loss + consistency * torch.stack(kl).mean()
        for sigma, psi in sigma_psi_pairs(ctx.model):
            loss = loss + l1 * psi.abs().sum() + l2 * (sigma.detach() - psi).pow(2).sum()
        return loss

    return extra


def disjoint_backward(ctx: Context, loss_labeled: torch.Tensor, loss_unlabeled: torch.Tensor) -> None:
    """Disjoint learning: the supervised loss reaches sigma only, the unlabeled loss psi only."""
    pairs = sigma_psi_pairs(ctx.model)
    for parameters, loss in (([s for s, _ in pairs], loss_labeled), ([p for _, p in pairs], loss_unlabeled)):
        if not loss.requires_grad:
            continue
        grads = torch.autograd.grad(loss, parameters, allow_unused=True)
        for parameter, grad in zip(parameters, grads, strict=True):
            parameter.grad = grad


def report_embedding(task: Task):
    def finish(ctx: Context) -> tuple[dict[str, torch.Tensor], State]:
        e = embedding(ctx.model, task, ctx.info.seed, ctx.device)
        return {EMBEDDING: e}, {EMBEDDING: e}

    return finish


@with_shared(SEMI_SUPERVISED, optimizer="adam", lr=1e-3, weight_decay=1e-4, threshold=0.75, unlabeled_weight=1e-2, unlabeled_mean="confident")
def fedmatch(
    task: Task,
    *,
    local_epochs: int,
    device: torch.device = CPU,
    dpl: Dpl = False,
    consistency_weight: ConsistencyWeight = 1e-2,
    l1_weight: L1Weight = 1e-4,
    l2_weight: L2Weight = 10.0,
    helpers: HelperCount = 2,
    helper_interval: HelperInterval = 10,
    **shared,
) -> Algorithm:
    """FedMatch (Jeong et al. 2021): inter-client consistency and disjoint learning; dpl = true gives FedMatch-FedDPL."""
    method = Method(
        start=choose_helpers(helpers),
        pseudo_labels=agreement_labels,
        extra_loss=consistency_and_regularizers(consistency_weight, l1_weight, l2_weight),
        backward=disjoint_backward,
        finish=report_embedding(task),
        after_aggregate=keep_helpers,
        broadcast_extra=send_helpers(helper_interval),
    )
    return semi_supervised_algorithm("fedmatch", task, shared, local_epochs=local_epochs, device=device, dpl=dpl, method=method, wrap=decompose)
