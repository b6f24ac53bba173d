"""FST-CBDG: Federated Self-Training with Class-Balanced Data Generation (Yan & Guo, the FST-CBDG
paper: "Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model").

Unsupervised federated learning of a linear head on a frozen CLIP image encoder.
The head f(z) = softmax(Wz + b) starts from the class text features (W = T, b = 0,
section 3.1), so the initial model is CLIP's zero-shot classifier (Eq. 2: no logit
scale, hence near-uniform predictions). Each sampled client, with unlabeled image
features I_j only (Algorithm 1):

- keeps soft pseudo-labels q_j, initially the zero-shot prediction p_j (Eq. 2), and
  updates them by the moving average q_j <- beta q_j + (1 - beta) f(I_j) (Eq. 4;
  :func:`~fedprior.algorithms.pieces.pseudo_labels.moving_average`);
- minimizes the self-training loss L_iST = -E_j[q_j . log f(I_j)] (Eq. 3)
- plus lambda times the synthetic loss L_tSamp = -sum 1_k . log f(z_kj) (Eq. 6, 8) on
  features z_kj ~ N(T_k, sigma^2 I) (Eq. 5), n_k per class by the balancing equation
  m_k + n_k = (1 + gamma) m_k* (Eq. 7), m_k counting the client's images whose
  pseudo-label argmax is k;
- and the server averages the heads (Algorithm 1, line 22: W <- E_c[W_c]).

What the paper leaves open is a hyperparameter here, with the default in brackets
(docs/fst-cbdg.md walks Algorithm 1 line by line and gives each choice's measured effect):
sigma [0.1]; the batch size (federation.batch_size; presets use 50, the setting of
Lee et al. 2022 that the paper follows); when q is refreshed (label_refresh: ['all']
the client's images at every iteration, as Algorithm 1 line 14 reads, or 'batch' only
the images of the iteration's mini-batch); whether q persists across rounds on a
client (keep_labels [true], client state); where m_k comes from (count_source:
['labels'] the pseudo-labels q^t, as the paper says, or 'model' the current model's
predictions); when Eq. 7 is applied (count_every: ['iteration'] every iteration, after
line 14 has refreshed the labels, as Algorithm 1 lines 14-16 read, drawing that
iteration's n_k samples; or 'epoch', the count made once at the start of each local
epoch and its samples spread evenly over the epoch's mini-batches, which in a client's
first round counts the zero-shot labels and under IID made every client push the head
the same way: docs/fst-cbdg.md).
One departure, kept on purpose: Eq. (6) is a sum; we take the mean over the synthetic
samples of a step (Eq. 7 asks for ~4x more synthetic than real samples, and all of them
every iteration, so a sum would swamp L_iST whatever lambda).

How the synthetic features are drawn (noise ['projected'] or 'direct'): the loss sees
z only through Wz + b. Split z = T_y + Q a + e_perp with Q an orthonormal basis of
W's row space: the logits need only the K numbers a ~ N(0, sigma^2 I_K), and e_perp
enters only the gradient of W, as sum_j g_j e_perp_j^T, which given the logit
gradients g_j is Gaussian with row covariance G^T G and column covariance
sigma^2 (I - Q Q^T): we draw it with K x d numbers per step instead of S x d.
'projected' is exact in distribution (a test compares gradient moments with
'direct'), and it is what makes 1024-d CLIP features fast: drawing the S x d
Gaussians is otherwise most of the run time.

Equations (the FST-CBDG paper), and where each is computed:

- Eq. 2, CLIP's zero-shot prediction and the text-initialized head: :func:`zero_shot_probabilities`,
  :func:`~fedprior.algorithms.engines.linear_heads.text_head`;
- Eq. 3, the self-training loss: :func:`self_training_loss` (per client: :meth:`FstObjective.loss`);
- Eq. 4, the soft pseudo-labels' moving average: :func:`~fedprior.algorithms.pieces.pseudo_labels.moving_average`
  (in :meth:`FstObjective.loss`);
- Eq. 5, the Gaussian class samples around T_k: :meth:`FstObjective.synthetic_batch`;
- Eq. 6 and 8, the synthetic loss and its gradient: :meth:`FstObjective.synthetic_loss`, :meth:`FstObjective.add_gradients`;
- Eq. 7, the class-balancing counts: :func:`balanced_counts`;
- the server's average of the heads: :func:`~fedprior.algorithms.pieces.tensors.weighted_mean`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.linear_heads import (
    BIAS,
    WEIGHT,
    HeadTraining,
    Sgd,
    broadcast_head,
    check_features,
    head_evaluation,
    masked_mean,
    text_head,
)
from fedprior.algorithms.pieces.pseudo_labels import moving_average
from fedprior.algorithms.pieces.tensors import to_device, weighted_mean

LABELS = "labels"

Beta = Annotated[float, Field(ge=0, le=1, description="moving-average rate beta of the soft pseudo-labels (Eq. 4)")]
Gamma = Annotated[float, Field(ge=0, description="gamma of the balancing equation (Eq. 7)")]
Lam = Annotated[float, Field(ge=0, description="trade-off lambda between L_iST and L_tSamp (Eq. 8)")]
Sigma = Annotated[float, Field(ge=0, description="standard deviation sigma of the synthetic features N(T_k, sigma^2 I) (Eq. 5)")]


def zero_shot_probabilities(features: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """p_j = softmax([I_j . T_1, ..., I_j . T_K]) (Eq. 2): CLIP's zero-shot prediction, no logit scale."""
    return torch.softmax(features @ text.T, dim=1)


def balanced_counts(pseudo_label_counts: torch.Tensor, gamma: float) -> torch.Tensor:
    """n_k with m_k + n_k = (1 + gamma) m_k*, k* the most frequent pseudo-class (Eq. 7).

    (1 + gamma) m_k* is rounded down to an integer; works on (K,) or batched (B, K) counts.
    """
    top = pseudo_label_counts.max(dim=-1, keepdim=True).values
    target = torch.floor((1.0 + gamma) * top.double()).long()
    return (target - pseudo_label_counts).clamp(min=0)


def equal_counts(total: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The same number for every class ("equal sampling", Table 4), with the total of the balanced rule.

    total (B,) -> (B, K): total // K each, the remainder to the first classes.
    """
    base = total // num_classes
    extra = (torch.arange(num_classes)[None, :] < (total % num_classes)[:, None]).long()
    return base[:, None] + extra


def self_training_loss(logits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """L_iST per row: -q . log f(I) (Eq. 3), before the mean."""
    return -(q * F.log_softmax(logits, dim=-1)).sum(-1)


class FstObjective:
    """Eq. (3)-(8) for a batch of clients (see the module docstring)."""

    def __init__(
        self, task: Task, text: torch.Tensor, q: torch.Tensor, *, beta, gamma, lam, sigma, sampling, losses, label_refresh, count_source, count_every, noise
    ) -> None:
        self.text, self.q, self.k = text, q, task.num_classes
        self.beta, self.gamma, self.lam, self.sigma = beta, gamma, lam, sigma
        self.sampling, self.losses, self.label_refresh = sampling, losses, label_refresh
        self.count_source, self.count_every, self.noise = count_source, count_every, noise
        self.synthetic_labels: list[list[torch.Tensor]] = []
        self.synthetic_drawn: torch.Tensor | None = None

    # -- how many synthetic samples of each class (Eq. 7) ------------------------------------
    def start_epoch(self, run: HeadTraining, epoch: int) -> None:
        """With count_every='epoch', plan the epoch's synthetic labels from the labels at its start."""
        self.synthetic_labels = [[torch.zeros(0, dtype=torch.long)] * s for s in run.steps]
        if self.synthetic_drawn is None:
            self.synthetic_drawn = torch.zeros(run.num_clients, dtype=torch.long)
        if self.losses == "self-training" or self.count_every == "iteration":
            return
        n = self._synthetic_counts(run)
        self.synthetic_drawn += n.sum(1)
        for c, generator in enumerate(run.generators):
            labels = torch.repeat_interleave(torch.arange(self.k), n[c])
            labels = labels[torch.randperm(labels.numel(), generator=generator)]
            self.synthetic_labels[c] = list(torch.tensor_split(labels, run.steps[c]))

    def _synthetic_counts(self, run: HeadTraining) -> torch.Tensor:
        """n_k per client (B, K) from the current pseudo-labels: Eq. 7, or the same total split equally (Table 4)."""
        n = balanced_counts(self._pseudo_counts(run), self.gamma)
        return equal_counts(n.sum(1), self.k) if self.sampling == "equal" else n

    def _step_labels(self, run: HeadTraining, step: int) -> list[torch.Tensor | None]:
        """The classes of each client's synthetic samples at this step (None: the client has finished its epoch).

        count_every='iteration' (Algorithm 1, lines 14-16): n_k by Eq. 7 from the labels this
        iteration has just refreshed, all of them drawn now; 'epoch': this step's share of the
        epoch's plan (:meth:`start_epoch`).
        """
        if self.count_every == "epoch":
            return [self.synthetic_labels[c][step] if step < run.steps[c] else None for c in range(run.num_clients)]
        n = self._synthetic_counts(run)
        active = torch.tensor([step < s for s in run.steps])
        assert self.synthetic_drawn is not None  # set by start_epoch
        self.synthetic_drawn += n.sum(1) * active
        return [torch.repeat_interleave(torch.arange(self.k), n[c]) if active[c] else None for c in range(run.num_clients)]

    @torch.no_grad()
    def _pseudo_counts(self, run: HeadTraining) -> torch.Tensor:
        """m_k per client (B, K) on the CPU: its images whose pseudo-label (or, with count_source='model', prediction) is k."""
        _, rows, mask = run.padded
        scores = run.all_predictions() if self.count_source == "model" else self.q[rows]
        hits = F.one_hot(scores.argmax(-1), self.k) * mask[..., None]
        return hits.sum(1).cpu()

    # -- one step ---------------------------------------------------------------------------
    def loss(self, run: HeadTraining, step: int, logits: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """L_iST of each client's mini-batch (Eq. 3), after refreshing its soft labels (Eq. 4)."""
        self._refresh_labels(run, logits.detach(), rows, mask)
        if self.losses == "synthetic":
            return logits.new_zeros(())
        return masked_mean(self_training_loss(logits, self.q[rows]), mask).sum()

    def add_gradients(self, run: HeadTraining, step: int, weight_grad: torch.Tensor, bias_grad: torch.Tensor) -> None:
        """Add the gradient of lambda L_tSamp (Eq. 6, 8) on this step's synthetic features."""
        if self.losses == "self-training":
            return
        batch = self.synthetic_batch(run, step)
        if batch is None:
            return
        g = self.logit_gradients(batch)
        bias_grad += g.sum(1)
        weight_grad += self.span_gradient(batch, g)
        if self.noise == "projected":
            weight_grad += self.orthogonal_gradient(batch, g)

    @torch.no_grad()
    def _refresh_labels(self, run: HeadTraining, logits: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor) -> None:
        if self.label_refresh == "all":
            _, all_rows, all_mask = run.padded
            all_mask = all_mask & mask.any(1, keepdim=True)  # clients still training at this step
            real = all_rows[all_mask]
            self.q[real] = moving_average(self.q[real], run.all_predictions()[all_mask], self.beta)
            return
        real = rows[mask]
        self.q[real] = moving_average(self.q[real], torch.softmax(logits[mask], dim=-1), self.beta)

    # -- the synthetic features of a step (Eq. 5) ------------------------------------------------
    def synthetic_batch(self, run: HeadTraining, step: int) -> dict[str, torch.Tensor] | None:
        """This step's synthetic samples of every client, padded to (B, S), with their logits.

        'direct' draws z = T_y + sigma e, e ~ N(0, I_d); 'projected' draws only a ~ N(0, sigma^2 I_K)
        (the coordinates of the noise in an orthonormal basis Q of W's rows, which set the
        logits) and a K x d standard normal Z for the orthogonal part (see the module docstring).
        Only the draws run client by client, each from the client's own (CPU) generator; the
        batch then moves to the run's device in one go.
        """
        planned = self._step_labels(run, step)
        sizes = torch.tensor([0 if y is None else y.numel() for y in planned])
        width = int(sizes.max())
        if width == 0:
            return None
        dim = self.text.shape[1]
        y = torch.zeros(run.num_clients, width, dtype=torch.long)
        for c, labels in enumerate(planned):
            if labels is not None:
                y[c, : labels.numel()] = labels
        batch = {"y": y, "sizes": sizes, "mask": torch.arange(width)[None, :] < sizes[:, None]}
        if self.noise == "direct":
            noise = torch.zeros(run.num_clients, width, dim)
            for c, generator in enumerate(run.generators):
                if sizes[c]:
                    noise[c, : sizes[c]] = torch.randn(int(sizes[c]), dim, generator=generator)
            batch = to_device({**batch, "noise": noise}, run.device)
            batch["z"] = self.text[batch["y"]] + self.sigma * batch.pop("noise")
            batch["logits"] = run.logits(batch["z"])
            return batch
        a = torch.zeros(run.num_clients, width, self.k)
        z_perp = torch.zeros(run.num_clients, self.k, dim)
        for c, generator in enumerate(run.generators):
            if sizes[c]:
                a[c, : sizes[c]] = self.sigma * torch.randn(int(sizes[c]), self.k, generator=generator)
                z_perp[c] = torch.randn(self.k, dim, generator=generator)
        batch = to_device({**batch, "a": a, "z_perp": z_perp}, run.device)
        y, a = batch["y"], batch["a"]
        basis = torch.linalg.qr(run.weight.transpose(1, 2)).Q  # (B, d, K)
        at_prototypes = torch.einsum("bkd,cd->bck", run.weight, self.text)  # row c: the logits of T_c
        batch["basis"] = basis
        batch["logits"] = (
            torch.gather(at_prototypes, 1, y[..., None].expand(-1, -1, self.k))
            + torch.bmm(a, torch.bmm(run.weight, basis).transpose(1, 2))
            + run.bias[:, None, :]
        )
        return batch

    def synthetic_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """L_tSamp per client: the mean cross-entropy of its synthetic samples (Eq. 6, as a mean)."""
        ce = F.cross_entropy(batch["logits"].flatten(0, 1), batch["y"].flatten(), reduction="none")
        return masked_mean(ce.view(batch["y"].shape), batch["mask"])

    def logit_gradients(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """d(lambda L_tSamp)/d logits: lambda (softmax - onehot) / S_c on real samples, 0 on padding."""
        g = torch.softmax(batch["logits"], dim=-1) - F.one_hot(batch["y"], self.k).to(batch["logits"].dtype)
        return g * (self.lam * batch["mask"] / batch["sizes"].clamp(min=1)[:, None])[..., None]

    def span_gradient(self, batch: dict[str, torch.Tensor], g: torch.Tensor) -> torch.Tensor:
        """sum_s g_s z_s^T over the part of z_s the logits see (all of z for 'direct')."""
        if self.noise == "direct":
            return torch.bmm(g.transpose(1, 2), batch["z"])
        per_class = torch.bmm(g.transpose(1, 2), F.one_hot(batch["y"], self.k).to(g.dtype))  # (B, K, C)
        return per_class @ self.text + torch.bmm(torch.bmm(g.transpose(1, 2), batch["a"]), batch["basis"].transpose(1, 2))

    def orthogonal_gradient(self, batch: dict[str, torch.Tensor], g: torch.Tensor) -> torch.Tensor:
        """sum_s g_s e_perp_s^T, drawn as (G^T G)^(1/2) Z sigma (I - Q Q^T): exact in distribution given G."""
        basis, z = batch["basis"], batch["z_perp"]
        z_perp = z - torch.bmm(torch.bmm(z, basis), basis.transpose(1, 2))
        return self.sigma * torch.bmm(_psd_sqrt(torch.bmm(g.transpose(1, 2), g)), z_perp)


def _psd_sqrt(matrix: torch.Tensor) -> torch.Tensor:
    """The symmetric square root of (a batch of) positive semi-definite matrices.

    A matrix holding NaN or inf (training has diverged) gets a NaN root instead of
    ``eigh``'s LinAlgError, so the client returns a non-finite head and the round loop
    reports the divergence with the round and the client (``runtime/divergence.py``).
    """
    finite = torch.isfinite(matrix).flatten(-2).all(-1)
    values, vectors = torch.linalg.eigh(torch.where(finite[..., None, None], matrix, torch.zeros_like(matrix)))
    root = (vectors * values.clamp(min=0).sqrt()[..., None, :]) @ vectors.transpose(-1, -2)
    return torch.where(finite[..., None, None], root, torch.full_like(root, float("nan")))


def fst_cbdg(
    task: Task,
    runtime: Runtime,
    *,
    lr: Annotated[float, Field(gt=0, description="client SGD learning rate (paper: 0.01)")] = 0.01,
    momentum: Annotated[float, Field(ge=0, lt=1, description="client SGD momentum (paper: 0.9)")] = 0.9,
    weight_decay: Annotated[float, Field(ge=0, description="client SGD weight decay (paper: 1e-5)")] = 1e-5,
    beta: Beta = 0.9,
    gamma: Gamma = 0.0,
    lam: Lam = 1.0,
    sigma: Sigma = 0.1,
    sampling: Annotated[Literal["balanced", "equal"], Field(description="synthetic counts per class: 'balanced' (Eq. 7) or 'equal' (Table 4)")] = "balanced",
    losses: Annotated[
        Literal["both", "self-training", "synthetic"], Field(description="ablation (Table 3): both losses, L_iST only, or L_tSamp only")
    ] = "both",
    label_refresh: Annotated[
        Literal["batch", "all"],
        Field(
            description="Eq. 4 each iteration on all the client's images ('all', Algorithm 1 line 14; costs a pass over the client's data per iteration) or on the mini-batch's images only ('batch')"
        ),
    ] = "all",
    count_source: Annotated[
        Literal["labels", "model"], Field(description="m_k of Eq. 7 from the soft pseudo-labels (paper) or the current model's predictions")
    ] = "labels",
    count_every: Annotated[
        Literal["iteration", "epoch"],
        Field(
            description="when Eq. 7 counts m_k and draws the n_k synthetic samples: every iteration from the labels it has just refreshed "
            "(Algorithm 1, lines 14-16) or once at the start of each local epoch, spread over its mini-batches"
        ),
    ] = "iteration",
    keep_labels: Annotated[bool, Field(description="a client keeps its soft pseudo-labels between the rounds it is sampled in")] = True,
    noise: Annotated[
        Literal["projected", "direct"],
        Field(description="how N(T_k, sigma^2 I) is drawn: 'projected' (exact in distribution, fast) or 'direct' (d numbers per sample)"),
    ] = "projected",
    aggregation: Annotated[
        Literal["mean", "weighted"], Field(description="server average of the heads: plain mean (Algorithm 1, line 22) or example-weighted (FedAvg)")
    ] = "mean",
) -> Algorithm:
    """FST-CBDG: self-training with moving-average soft labels plus class-balanced synthetic text features (the FST-CBDG paper)."""
    check_features(task)
    text, _ = text_head(task)
    text = text.to(runtime.device)
    sgd = Sgd(lr, momentum, weight_decay)
    settings = dict(
        beta=beta,
        gamma=gamma,
        lam=lam,
        sigma=sigma,
        sampling=sampling,
        losses=losses,
        label_refresh=label_refresh,
        count_source=count_source,
        count_every=count_every,
        noise=noise,
    )

    def init(info: RoundInfo) -> State:
        weight, bias = text_head(task)
        return {WEIGHT: weight, BIAS: bias}

    def client_update_many(message: Broadcast, states: Sequence[State], datas: Sequence[ClientData], infos: Sequence[ClientInfo]) -> list[tuple[Reply, State]]:
        run = HeadTraining(
            message.arrays[WEIGHT], message.arrays[BIAS], [d["x"] for d in datas], [i.generator() for i in infos], runtime.batch_size, sgd, runtime.device
        )
        q = zero_shot_probabilities(run.x, text)  # q^0 = p (Eq. 2), replaced below by the labels a client kept
        for c, s in enumerate(states):
            if keep_labels and LABELS in s:
                q[run.client_rows(c)] = s[LABELS].to(runtime.device)
        objective = FstObjective(task, text, q, **settings)
        run.run(runtime.local_epochs, objective)
        drawn = objective.synthetic_drawn
        assert drawn is not None  # set by start_epoch; local_epochs >= 1
        out = []
        for c, reply in enumerate(run.replies()):
            reply.metrics["synthetic_samples"] = float(drawn[c])
            new_state = {LABELS: q[run.client_rows(c)].to("cpu", copy=True)} if keep_labels else {}
            out.append((reply, new_state))
        return out

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        return client_update_many(message, [state], [data], [info])[0]

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        weights = [r.num_examples for r in replies] if aggregation == "weighted" else [1.0] * len(replies)
        return weighted_mean([{WEIGHT: r.arrays[WEIGHT], BIAS: r.arrays[BIAS]} for r in replies], weights)

    return Algorithm(
        name="fst-cbdg",
        inputs=("x",),
        init=init,
        broadcast=broadcast_head,
        client_update=client_update,
        aggregate=aggregate,
        evaluate=head_evaluation(runtime.device),
        client_update_many=client_update_many,
    )
