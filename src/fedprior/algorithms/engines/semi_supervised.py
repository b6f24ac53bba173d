"""The semi-supervised FL client and server that FedDB and its baselines share (the FedDB
paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 3.2 and 4).

A client holds a few labeled images ``x_labeled, y_labeled`` and many unlabeled ones
``x_unlabeled``; it never receives ``y_unlabeled`` for training. Each round
(Algorithm 3, ``ClientUpdate``):

1. the received model labels the weak view of every unlabeled image: APP-U (Eq. 8) and
   hard pseudo-labels where the (optionally debiased, Eq. 14) prediction reaches tau
   (Eq. 3-4, Algorithm 1);
2. ``E`` local epochs, each one step on *all* local data at once (the FedDB paper, Sec. 5.1, "we
   feed all training data simultaneously"): the supervised cross-entropy on the weak view
   of the labeled images (Eq. 2) plus lambda times the cross-entropy of the strong view of
   the pseudo-labeled images (Eq. 4-6); each epoch also refreshes APP-U with a moving
   average (Algorithm 3, lines 14 and 20);
3. the client sends its model and its APP-U.

Two choices follow the authors' code (github.com/GuogangZhu/FedDB) as options, the paper
by default:

- ``unlabeled_mean``: Eq. (4) sums the strong-view cross-entropy over the confident
  images and divides by the number of *all* unlabeled images (``all``, FixMatch's mean);
  the code divides by the number of confident ones (``confident``): its ``Client.train``
  (``src/modules/modules.py``) trains on a dataset holding only the pseudo-labeled images
  (``Client.make_dataset``) and ``loss_fn`` (``src/models/utils.py``) takes the mean over
  it. ``all`` scales the term by the share of confident images (a few percent), so it
  hardly acts: in the feddb preset it is 12 times smaller than with ``confident``, and
  ``confident`` costs 4 points there (docs/feddb.md has the measurement).
- ``fallback_batch_size``: when no unlabeled image passes tau, the code's
  ``Client.make_dataset`` returns ``None`` and ``Client.train`` takes its other branch:
  ``cfg['client']['num_epochs']`` (= E) epochs over the labeled images in shuffled
  mini-batches of ``cfg['client']['batch_size']['train']`` = 64 (``src/utils.py``), the
  supervised loss only, gradient clipping at 1, and no APP-U update. ``0`` (the default)
  keeps the paper's loop: E full-batch steps of Eq. (6) with L_u = 0.

The server weights the client models (uniformly, Eq. 7 with beta = 1; by DMA in FedDB,
Eq. 17; by groups in FedRGD), optionally with the code's server momentum (FedAvgM's step, :func:`server_momentum`), and records
what the report draws. A baseline changes one step through a :class:`Method`; the rest
is this module. The optimizer state (momentum buffers) of a client stays in its client
State between the rounds it is sampled in (the code). The learning rate follows the
code's cosine schedule over ``lr_decay_rounds`` rounds.

Diagnostics, and why labels do not leak: with ``diagnostics`` on, the runtime also gives
the client ``y_unlabeled`` (``Algorithm.diagnostics``). It is read once, after the
pseudo-labels are fixed, to report their accuracy and coverage (Figures 6-7) for the
plain and the debiased rule; no training step, label or APP-U depends on it (a test
trains with the true and with shuffled ``y_unlabeled`` and gets identical models).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.pieces.bias import bias_diagnostics
from fedprior.algorithms.pieces.dma import uniform_distance
from fedprior.algorithms.pieces.hyperparameters import SEMI_SUPERVISED_DEFAULTS, SemiSupervisedFields
from fedprior.algorithms.pieces.metrics import logit_metrics, read_once
from fedprior.algorithms.pieces.optimizer_kernels import fused_on_cuda
from fedprior.algorithms.pieces.optimizer_state import load_optimizer_state, optimizer_state
from fedprior.algorithms.pieces.precision import autocast, float32
from fedprior.algorithms.pieces.pseudo_labels import (
    app_u,
    debias,
    hard_labels,
    label_quality_tensors,
    masked_cross_entropy,
    moving_average,
    without_missing_accuracy,
)
from fedprior.algorithms.pieces.server_optimizers import ServerOptimizer, with_server_optimizer
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, model_arrays, weighted_mean, with_prefix
from fedprior.data.augment import device_generator
from fedprior.data.augment.fixmatch import FixMatchAugment
from fedprior.errors import ConfigError

LABELED = ("x_labeled", "y_labeled")
UNLABELED = ("x_unlabeled",)
HIDDEN = ("y_unlabeled",)
"""Given to a client for diagnostics only (see the module docstring)."""

APPU = "appu"
LABEL_COUNTS = "diag.labeled"
DIAG = "diag."
EVAL_BATCH = 1024


@dataclass(frozen=True, kw_only=True)
class Training(SemiSupervisedFields):
    """The local training every semi-supervised algorithm shares: the shared fields (:class:`~fedprior.algorithms.pieces.hyperparameters.SemiSupervisedFields`,
    declared once there) and what the factory sets beside them."""

    epochs: int
    """E, the run's local epochs (``runtime.local_epochs``)."""
    labeled_batch_size: int = 0
    """FixMatch's own mini-batches (fixmatch and fedavg-labeled): :meth:`SemiSupervised._train_minibatches`; 0 = the paper's full-batch steps."""
    unlabeled_ratio: int = 7
    local_steps: int = 0
    dpl: bool = False
    use_unlabeled: bool = True

    def lr_at(self, round_: int) -> float:
        """The code's CosineAnnealingLR(T_max = lr_decay_rounds, eta_min = 0), stepped after each round (round 1: lr)."""
        if self.lr_decay_rounds <= 0:
            return self.lr
        t = min(round_ - 1, self.lr_decay_rounds)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * t / self.lr_decay_rounds))


@dataclass
class Context:
    """What one client update works with; ``extra`` holds a method's own per-update objects (e.g. helper models)."""

    model: nn.Module
    message: Broadcast
    state: State
    info: ClientInfo
    training: Training
    augment: FixMatchAugment
    generator: torch.Generator
    device: torch.device
    x_labeled: torch.Tensor
    y_labeled: torch.Tensor
    x_unlabeled: torch.Tensor
    weak_unlabeled: torch.Tensor | None = None
    probabilities: torch.Tensor | None = None
    appu: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    precision: str = "fp32"
    """``run.precision``: forward passes and losses run under ``autocast(device, precision)`` (``fedprior.algorithms.pieces.precision``)."""
    rows: torch.Tensor | None = None
    """The indices of the confident images (``mask``), found once per pseudo-labeling: :func:`confident_rows`."""
    rows_of: torch.Tensor | None = None
    """The ``mask`` that ``rows`` was found from."""


Metrics = dict[str, float | torch.Tensor]
"""A client update's metrics while it trains: floats, or 0-dim tensors left on the device and read once at its end."""


def confident_rows(ctx: Context) -> torch.Tensor:
    """The indices of the images that passed tau, in order, found once per pseudo-labeling.

    The pseudo-labels are fixed for the whole client update (Algorithm 3 labels once,
    before the local epochs), so the confident subset is a constant of the update: its
    size is read once, outside the training loop (one ``nonzero``), and every epoch forwards
    the same number of images with no further host sync.
    """
    assert ctx.mask is not None  # set by _label
    if ctx.rows is None or ctx.rows_of is not ctx.mask:
        ctx.rows, ctx.rows_of = ctx.mask.nonzero().flatten(), ctx.mask
    return ctx.rows


def default_pseudo_labels(ctx: Context) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. (3)-(4) on p, or with DPL (``training.dpl``) Algorithm 1 on the debiased p (Eq. 14)."""
    assert ctx.probabilities is not None and ctx.appu is not None  # set by _label before it asks for labels
    p = debias(ctx.probabilities, ctx.appu) if ctx.training.dpl else ctx.probabilities
    return hard_labels(p, ctx.training.threshold)


def plain_backward(ctx: Context, loss_labeled: torch.Tensor, loss_unlabeled: torch.Tensor) -> None:
    """Eq. (6): one backward pass of L_s + lambda L_u (the unlabeled part already weighted)."""
    (loss_labeled + loss_unlabeled).backward()


def uniform_weights(state: State, replies: Sequence[Reply], info: RoundInfo) -> torch.Tensor:
    """Eq. (7) with beta_m = 1: every client model counts the same (the code's averaging)."""
    return torch.full((len(replies),), 1.0 / len(replies))


@dataclass(frozen=True)
class Method:
    """The steps a semi-supervised algorithm may change; the defaults are FixMatch within FedAvg.

    - ``start(ctx)``: after the model is loaded (FedMatch: build the helper models);
    - ``lr_scale(ctx) -> float``: multiplies the round's learning rate (FedMatch: its plateau decay);
    - ``pseudo_labels(ctx) -> (labels, mask)``: after APP-U (FedMatch: agreement with helpers);
    - ``train(ctx, optimizer, parameters) -> metrics``: the local training, instead of the shared
      full-batch steps (FedMatch: its code's mini-batches with per-batch pseudo-labels);
    - ``extra_loss(ctx, epoch) -> tensor``: added to lambda L_u each epoch (SemiFL: MixUp; FedMatch: consistency);
    - ``backward(ctx, loss_s, loss_u)``: how the losses reach the parameters (FedMatch: disjoint);
    - ``finish(ctx) -> (reply arrays, client state)``: extra uploads and state (FedMatch: its embedding);
    - ``weights(state, replies, info)``: the aggregation weights (FedDB: DMA; FedRGD: groups);
    - ``after_aggregate(state, replies, info) -> state`` and ``broadcast_extra(state, info) -> arrays``: server-side extras;
    - ``thread_safe``: the client-side steps given here (``start`` to ``finish``) may run for several clients at once in
      threads (``Algorithm.thread_safe_updates``): they draw only from ``ctx.generator`` (never from torch's global
      generator: no ``data.augment.seeded``) and keep nothing between calls. Left False, an algorithm whose method changes a
      client-side step trains its clients one at a time; the default steps are thread-safe.
    """

    start: Callable[[Context], None] | None = None
    lr_scale: Callable[[Context], float] | None = None
    pseudo_labels: Callable[[Context], tuple[torch.Tensor, torch.Tensor]] = default_pseudo_labels
    train: Callable[[Context, torch.optim.Optimizer, list[nn.Parameter]], Metrics] | None = None
    extra_loss: Callable[[Context, int], torch.Tensor] | None = None
    backward: Callable[[Context, torch.Tensor, torch.Tensor], None] = plain_backward
    finish: Callable[[Context], tuple[dict[str, torch.Tensor], State]] | None = None
    weights: Callable[[State, Sequence[Reply], RoundInfo], torch.Tensor] = uniform_weights
    after_aggregate: Callable[[State, Sequence[Reply], RoundInfo], State] | None = None
    broadcast_extra: Callable[[State, RoundInfo], dict[str, torch.Tensor]] | None = None
    thread_safe: bool = False

    def client_steps_thread_safe(self) -> bool:
        """Whether the client-side steps may run in threads: declared so, or all of them the defaults."""
        defaults = Method()
        steps = ("start", "lr_scale", "pseudo_labels", "train", "extra_loss", "backward", "finish")
        return self.thread_safe or all(getattr(self, step) is getattr(defaults, step) for step in steps)


# -- small pieces ---------------------------------------------------------------------------------


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch: int = EVAL_BATCH, precision: str = "fp32") -> torch.Tensor:
    """Float32 logits of ``x`` in batches, in eval mode (the model is put back in train mode), forward passes in ``precision``."""
    was_training = model.training
    model.eval()
    with autocast(x.device, precision):
        out = torch.cat([model(x[i : i + batch]) for i in range(0, x.shape[0], batch)]) if x.shape[0] else torch.zeros(0)
    model.train(was_training)
    return float32(out)


def make_optimizer(parameters: list[nn.Parameter], training: Training, lr: float) -> torch.optim.Optimizer:
    """The local optimizer (fused kernels on CUDA: :func:`~fedprior.algorithms.pieces.optimizer_kernels.fused_on_cuda`)."""
    fused = fused_on_cuda(parameters)
    if training.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=lr, weight_decay=training.weight_decay, fused=fused)
    return torch.optim.SGD(
        parameters, lr=lr, momentum=training.momentum, weight_decay=training.weight_decay, nesterov=training.nesterov and training.momentum > 0, fused=fused
    )


def class_counts(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return torch.bincount(labels.cpu().long(), minlength=num_classes).float()


# -- the algorithm ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SemiSupervised:
    """Builds an :class:`Algorithm` from the shared client and server and a :class:`Method`."""

    task: Task
    net: GlobalModel
    training: Training
    method: Method = Method()
    device: torch.device = torch.device("cpu")
    precision: str = "fp32"

    @property
    def augment(self) -> FixMatchAugment:
        if not self.task.pixel_mean:
            raise ConfigError("encoder.name: the semi-supervised algorithms train on images; set encoder.name = 'none'")
        return views(self.task, vars(self.training))

    def algorithm(self, name: str) -> Algorithm:
        t = self.training
        if t.labeled_batch_size > 0:
            self._check_minibatches(name)
        inputs = (*LABELED, *UNLABELED) if t.use_unlabeled else LABELED
        hidden = HIDDEN if (t.use_unlabeled and t.diagnostics) else ()
        augment = self.augment
        algorithm = Algorithm(
            name=name,
            inputs=inputs,
            diagnostics=hidden,
            init=self.net.init,
            broadcast=self.broadcast,
            client_update=lambda m, s, d, i: self.client_update(m, s, d, i, augment),
            aggregate=self.aggregate,
            evaluate=self.evaluate,
            # the views are drawn from the client's generators, but for kornia-fixed's (torch's global generator, seeded per call)
            thread_safe_updates=t.strong_augment != "kornia-fixed" and self.method.client_steps_thread_safe(),
            batch_shapes="varying",  # full-batch steps on each client's data and confident subset (FedMatch's too: per-batch subsets)
        )
        if t.server_momentum == 0:  # plain averaging (Eq. 17); the parameter names are found only where a step needs them
            return algorithm
        return with_server_optimizer(algorithm, server_momentum(t.server_momentum), self.net.parameter_names())

    def _check_minibatches(self, name: str) -> None:
        """ConfigError unless FixMatch's mini-batches (``labeled_batch_size`` > 0) can run: steps to take, and no step of a method changed."""
        if self.training.local_steps < 1:
            raise ConfigError(
                f"algorithm.local_steps: {self.training.local_steps}; with algorithm.labeled_batch_size = {self.training.labeled_batch_size} "
                "(FixMatch's mini-batches) give the optimizer steps a round, at least 1"
            )
        if self.method != Method() or self.training.dpl:
            raise ConfigError(
                f"algorithm.labeled_batch_size: {self.training.labeled_batch_size}; FixMatch's mini-batches are FixMatch's own training "
                f"(fixmatch, fedavg-labeled), and {name} changes a step of it: set algorithm.labeled_batch_size = 0"
            )

    # -- server --

    def broadcast(self, state: State, info: RoundInfo) -> Broadcast:
        arrays = {k: v for k, v in state.items() if k.startswith(MODEL)}
        if self.method.broadcast_extra is not None:
            arrays.update(self.method.broadcast_extra(state, info))
        return Broadcast(arrays=arrays)

    def aggregate(self, state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        """w = sum_m beta_m w_m (Eq. 7 / 17); records what the report draws. The code's server momentum, if set, steps from
        here (:func:`server_momentum`, in :meth:`algorithm`)."""
        beta = self.method.weights(state, replies, info).float()
        mean = weighted_mean([with_prefix(r.arrays, MODEL) for r in replies], beta)
        out = {**state, **add_prefix(mean, MODEL)}
        if APPU in replies[0].arrays:
            appus = torch.stack([r.arrays[APPU] for r in replies])
            uniform = torch.full_like(beta, 1.0 / len(replies))
            out.update(
                {
                    f"{DIAG}appu": appus,
                    f"{DIAG}weights": beta,
                    f"{DIAG}distance_uniform": torch.tensor(uniform_distance(appus, uniform)),
                    f"{DIAG}distance": torch.tensor(uniform_distance(appus, beta)),
                }
            )
            if all(LABEL_COUNTS in r.arrays for r in replies):
                out[f"{DIAG}labeled"] = torch.stack([r.arrays[LABEL_COUNTS] for r in replies])
        if self.method.after_aggregate is not None:
            out = self.method.after_aggregate(out, replies, info)
        return out

    def evaluate(self, state: State, data: ClientData) -> dict[str, Any]:
        """Test metrics of the global model, and the last aggregation's diagnostics (DMA weights, Figure 3's JS)."""
        model = self.net.receive(state, "evaluate")
        logits = predict(model, data["x"].to(self.device), batch=self.training.eval_batch_size, precision=self.precision).cpu()
        metrics: dict[str, Any] = logit_metrics(logits, data["y"])
        if f"{DIAG}weights" in state:
            weights = state[f"{DIAG}weights"]
            metrics["aggregation_weights"] = [round(float(w), 6) for w in weights]
            metrics["appu_distance_uniform"] = float(state[f"{DIAG}distance_uniform"])
            metrics["appu_distance"] = float(state[f"{DIAG}distance"])
            labeled = state.get(f"{DIAG}labeled")
            if labeled is not None:
                metrics.update(bias_diagnostics(metrics["class_accuracy"], state[f"{DIAG}appu"].numpy(), labeled.numpy(), weights.numpy()))
        return metrics

    # -- client --

    def client_update(self, message: Broadcast, state: State, data: ClientData, info: ClientInfo, augment: FixMatchAugment) -> tuple[Reply, State]:
        t, device = self.training, self.device
        model = self.net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        model.train()
        x_l = data["x_labeled"].to(device)
        y_l = data["y_labeled"].to(device)
        x_u = data["x_unlabeled"].to(device) if t.use_unlabeled else x_l[:0]
        ctx = Context(model, message, state, info, t, augment, info.generator("augment"), device, x_l, y_l, x_u, precision=self.precision)
        if self.method.start is not None:
            self.method.start(ctx)
        metrics: Metrics = {}
        if t.use_unlabeled:
            metrics.update(self._label(ctx, data.get("y_unlabeled")))
        lr = t.lr_at(info.round) * (self.method.lr_scale(ctx) if self.method.lr_scale is not None else 1.0)
        parameters = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer(parameters, t, lr)
        if t.keep_optimizer_state:
            load_optimizer_state(optimizer, model, state)
        metrics.update((self.method.train or self._train)(ctx, optimizer, parameters))
        arrays = model_arrays(model, resident=True)  # on the run's device: the server aggregates them there
        new_state: State = optimizer_state(optimizer, model) if t.keep_optimizer_state else {}
        if t.use_unlabeled:
            assert ctx.appu is not None  # set by _label
            arrays[APPU] = ctx.appu.cpu().float()
            if t.diagnostics:
                arrays[LABEL_COUNTS] = class_counts(y_l, self.task.num_classes)
        if self.method.finish is not None:
            more_arrays, more_state = self.method.finish(ctx)
            arrays.update(more_arrays)
            new_state.update(more_state)
        read = read_once(metrics)
        for tag in ("", "_plain", "_dpl"):
            read = without_missing_accuracy(read, f"pl_accuracy{tag}")
        return Reply(arrays, num_examples=int(x_l.shape[0] + x_u.shape[0]), metrics=read), new_state

    def _label(self, ctx: Context, truth: torch.Tensor | None) -> Metrics:
        """Algorithm 1: APP-U and pseudo-labels of the received model on one weak view of the unlabeled images."""
        t = ctx.training
        ctx.weak_unlabeled = ctx.augment.weak(ctx.x_unlabeled, ctx.generator)
        ctx.probabilities = (
            torch.softmax(predict(ctx.model, ctx.weak_unlabeled, batch=t.eval_batch_size, precision=ctx.precision), dim=1)
            if ctx.x_unlabeled.shape[0]
            else torch.zeros(0, self.task.num_classes, device=ctx.device)
        )
        ctx.appu = app_u(ctx.probabilities)
        ctx.labels, ctx.mask = self.method.pseudo_labels(ctx)
        metrics: Metrics = {"pl_confident": float(confident_rows(ctx).numel())}
        if not t.diagnostics:
            return metrics
        truth = truth.to(ctx.device) if truth is not None and truth.shape[0] else None
        for tag, labeling in (
            ("", (ctx.labels, ctx.mask)),
            ("_plain", hard_labels(ctx.probabilities, t.threshold)),
            ("_dpl", hard_labels(debias(ctx.probabilities, ctx.appu), t.threshold)),
        ):
            metrics.update({f"pl_{k}{tag}": v for k, v in label_quality_tensors(*labeling, truth).items()})
        return metrics

    def _train(self, ctx: Context, optimizer: torch.optim.Optimizer, parameters: list[nn.Parameter]) -> Metrics:
        """``E`` full-batch steps of Eq. (6), refreshing APP-U each epoch (Algorithm 3, lines 13-20).

        With ``fallback_batch_size`` > 0 and no confident image, the code's labeled-only
        mini-batches instead (:meth:`_train_labeled_batches`). The mean losses are summed
        on the device (float64) and read with the other metrics at the end of the update.
        """
        t, model = ctx.training, ctx.model
        if t.labeled_batch_size > 0:
            return self._train_minibatches(ctx, optimizer, parameters)
        if t.use_unlabeled and t.fallback_batch_size > 0 and confident_rows(ctx).numel() == 0:
            return self._train_labeled_batches(ctx, optimizer, parameters)
        totals = {key: torch.zeros((), dtype=torch.float64, device=ctx.device) for key in ("loss_labeled", "loss_unlabeled")}
        zero = torch.zeros((), device=ctx.device)
        for epoch in range(t.epochs):
            refreshed = None
            optimizer.zero_grad(set_to_none=True)
            with autocast(ctx.device, ctx.precision):  # the forward passes and losses; backward and step outside
                loss_s = F.cross_entropy(model(ctx.augment.weak(ctx.x_labeled, ctx.generator)), ctx.y_labeled) if ctx.x_labeled.shape[0] else zero
                loss_u = zero
                if t.use_unlabeled:
                    loss_u = t.unlabeled_weight * self._unlabeled_loss(ctx)
                    refreshed = self._epoch_appu(ctx)
                    if self.method.extra_loss is not None:
                        loss_u = loss_u + self.method.extra_loss(ctx, epoch)
            if loss_s.requires_grad or loss_u.requires_grad:
                self.method.backward(ctx, loss_s, loss_u)
                if t.clip > 0:
                    torch.nn.utils.clip_grad_norm_(parameters, t.clip)
                optimizer.step()
            if refreshed is not None:
                assert ctx.appu is not None  # set by _label (refreshed only with unlabeled data)
                ctx.appu = moving_average(ctx.appu, refreshed, t.appu_gamma)
            totals["loss_labeled"] += loss_s.detach().double() / t.epochs
            totals["loss_unlabeled"] += loss_u.detach().double() / t.epochs
        metrics: Metrics = dict(totals)
        if t.use_unlabeled and t.fallback_batch_size > 0:
            metrics["labeled_only"] = 0.0  # the round's mean is the share of clients that fell back
        return metrics

    def _train_minibatches(self, ctx: Context, optimizer: torch.optim.Optimizer, parameters: list[nn.Parameter]) -> Metrics:
        """FixMatch's own training (Sohn et al. 2020, Algorithm 1 and Sec. 4): ``local_steps`` steps of random mini-batches.

        Each step draws ``labeled_batch_size`` = B labeled images and mu B unlabeled ones (``unlabeled_ratio`` = mu), at random
        with replacement; forwards their weak views and the unlabeled images' strong views in one batch (as FixMatch's
        code: BatchNorm sees the whole batch); pseudo-labels the unlabeled batch from its weak view under the current
        model (Eq. 3-4 of the FedDB paper, per step here, where the paper's client labels once a round); and takes one step of
        Eq. (6), L_s + lambda L_u, with L_u divided per ``unlabeled_mean`` (``all``: by mu B, FixMatch's mean). Labels
        only (``use_unlabeled`` false): B labeled images and L_s alone a step, the unlabeled images never read. A client
        with no labeled image trains on L_u alone. APP-U keeps the round's first estimate (no epochs to refresh it by).
        """
        t, model = ctx.training, ctx.model
        draw = device_generator(ctx.generator, ctx.device)
        n_labeled, n_unlabeled = ctx.x_labeled.shape[0], ctx.x_unlabeled.shape[0]
        b = t.labeled_batch_size if n_labeled else 0
        mu_b = t.unlabeled_ratio * t.labeled_batch_size if t.use_unlabeled and n_unlabeled else 0
        totals = {key: torch.zeros((), dtype=torch.float64, device=ctx.device) for key in ("loss_labeled", "loss_unlabeled", "batch_coverage")}
        zero = torch.zeros((), device=ctx.device)
        for _ in range(t.local_steps if b + mu_b else 0):
            labeled = torch.randint(n_labeled, (b,), generator=draw, device=ctx.device) if b else None
            views = [ctx.augment.weak(ctx.x_labeled[labeled], ctx.generator)] if labeled is not None else []
            if mu_b:
                unlabeled = ctx.x_unlabeled[torch.randint(n_unlabeled, (mu_b,), generator=draw, device=ctx.device)]
                views += [ctx.augment.weak(unlabeled, ctx.generator), ctx.augment.strong(unlabeled, ctx.generator)]
            optimizer.zero_grad(set_to_none=True)
            with autocast(ctx.device, ctx.precision):
                logits = model(torch.cat(views))
                loss_s = F.cross_entropy(logits[:b], ctx.y_labeled[labeled]) if labeled is not None else zero
                loss_u, coverage = zero, zero
                if mu_b:
                    weak, strong = logits[b : b + mu_b], logits[b + mu_b :]
                    labels, mask = hard_labels(torch.softmax(weak.detach().float(), dim=1), t.threshold)
                    loss_u = t.unlabeled_weight * masked_cross_entropy(strong, labels, mask, t.unlabeled_mean, mu_b)
                    coverage = mask.float().mean()
            self.method.backward(ctx, loss_s, loss_u)
            if t.clip > 0:
                torch.nn.utils.clip_grad_norm_(parameters, t.clip)
            optimizer.step()
            for key, value in (("loss_labeled", loss_s), ("loss_unlabeled", loss_u), ("batch_coverage", coverage)):
                totals[key] += value.detach().double() / t.local_steps
        return dict(totals)

    def _train_labeled_batches(self, ctx: Context, optimizer: torch.optim.Optimizer, parameters: list[nn.Parameter]) -> Metrics:
        """The code's fallback: ``E`` epochs of shuffled labeled mini-batches (weak view, supervised loss only), APP-U kept."""
        t, model = ctx.training, ctx.model
        n, size = ctx.x_labeled.shape[0], ctx.training.fallback_batch_size
        zero = torch.zeros((), device=ctx.device)
        losses = []
        shuffle = device_generator(ctx.generator, ctx.device)  # the order is drawn on the device: no copy from the host per epoch
        for _ in range(t.epochs):
            order = torch.randperm(n, generator=shuffle, device=ctx.device)
            for start in range(0, n, size):
                rows = order[start : start + size]
                optimizer.zero_grad(set_to_none=True)
                with autocast(ctx.device, ctx.precision):
                    loss_s = F.cross_entropy(model(ctx.augment.weak(ctx.x_labeled[rows], ctx.generator)), ctx.y_labeled[rows])
                self.method.backward(ctx, loss_s, zero)
                if t.clip > 0:
                    torch.nn.utils.clip_grad_norm_(parameters, t.clip)
                optimizer.step()
                losses.append(loss_s.detach())
        mean = torch.stack(losses).mean() if losses else 0.0
        return {"loss_labeled": mean, "loss_unlabeled": 0.0, "labeled_only": 1.0}

    def _unlabeled_loss(self, ctx: Context) -> torch.Tensor:
        """Eq. (4): CE of the strong view against the pseudo-label, summed over the confident images, divided per ``unlabeled_mean``.

        The strong views of the confident images only are forwarded (as the FedDB code
        trains on the pseudo-labeled images alone, so BatchNorm sees those), gathered by
        :func:`confident_rows`, which is fixed for the update; the loss is the masked
        :func:`~fedprior.algorithms.pieces.pseudo_labels.masked_cross_entropy`, so nothing here
        reads a value back or selects by a mask.
        """
        assert ctx.mask is not None and ctx.labels is not None  # set by _label
        rows = confident_rows(ctx)
        if rows.numel() == 0:
            return torch.zeros((), device=ctx.device)
        logits = ctx.model(ctx.augment.strong(ctx.x_unlabeled[rows], ctx.generator))
        return masked_cross_entropy(logits, ctx.labels[rows], ctx.mask[rows], ctx.training.unlabeled_mean, ctx.x_unlabeled.shape[0])

    def _epoch_appu(self, ctx: Context) -> torch.Tensor | None:
        """Algorithm 3, line 14: APP-U of the current local model on a fresh weak view (all, or the confident images)."""
        x = ctx.x_unlabeled if ctx.training.appu_subset == "all" else ctx.x_unlabeled[confident_rows(ctx)]
        if x.shape[0] == 0:
            return None
        weak = ctx.augment.weak(x, ctx.generator)
        return app_u(torch.softmax(predict(ctx.model, weak, batch=ctx.training.eval_batch_size, precision=ctx.precision), dim=1))


def server_momentum(momentum: float) -> ServerOptimizer:
    """``algorithm.server_momentum`` of the semi-supervised algorithms: FedAvgM's step (Hsu et al. 2019) with server lr 1,
    v = momentum v + Delta, w = w + v, on Delta = aggregate - w, the parameters only (BatchNorm's running statistics take the
    aggregate as it is, as with every server optimizer: :func:`~fedprior.algorithms.pieces.server_optimizers.with_server_optimizer`).

    The FedDB authors' code applies the averaged update this way with momentum 0.5 (docs/feddb.md, D10); its velocity
    is fedprior's -v (velocity = momentum velocity + (w - aggregate), w = w - velocity), the same steps.
    """
    return ServerOptimizer("avgm", lr=1.0, momentum=momentum)


def network(task: Task, model: str, norm: str, width: int, wrap: Callable[[nn.Module], nn.Module] | None = None) -> Callable[[], nn.Module]:
    """A builder of the algorithm's network (checked once here, so a wrong input shape fails before training)."""
    from fedprior.models import build_model

    options: dict[str, Any] = {"norm": norm, **({"width": width} if model == "convnet" else {})}
    build_model(model, task, **options)

    def build() -> nn.Module:
        net = build_model(model, task, **options)
        return wrap(net) if wrap is not None else net

    return build


VIEW_FIELDS = ("flip", "weak_shift", "strong_ops", "cutout", "strong_augment")
"""The hyperparameters that shape the weak and strong views."""


def views(task: Task, settings: Mapping[str, Any]) -> FixMatchAugment:
    """The weak and strong views for ``task``'s images, from ``settings`` (hyperparameters or a :class:`Training`'s fields; defaults where absent)."""
    view = {k: settings.get(k, SEMI_SUPERVISED_DEFAULTS[k]) for k in VIEW_FIELDS}
    return FixMatchAugment(
        task.pixel_mean,
        task.pixel_std,
        flip=bool(view["flip"]),
        pad_fraction=float(view["weak_shift"]),
        n=int(view["strong_ops"]),
        cutout=float(view["cutout"]),
        strong_augment=str(view["strong_augment"]),
    )


def semi_supervised_algorithm(
    name: str,
    task: Task,
    shared: SemiSupervisedFields,
    runtime: Runtime,
    *,
    method: Method = Method(),
    dpl: bool = False,
    use_unlabeled: bool = True,
    wrap: Callable[[nn.Module], nn.Module] | None = None,
    minibatches: dict[str, Any] | None = None,
) -> Algorithm:
    """The algorithm ``name`` from the shared hyperparameters (:class:`~fedprior.algorithms.pieces.hyperparameters.SemiSupervisedFields`) and a method's steps.

    Of the ``runtime``: ``local_epochs`` (E), the device, ``precision``, and ``compile`` (the network the clients train and the
    server evaluates is compiled, ``GlobalModel.receive``); the batches are the algorithm's own: ``minibatches`` sets FixMatch's
    (:class:`Training`'s ``labeled_batch_size``, ``unlabeled_ratio``, ``local_steps``).
    """
    training = Training(epochs=runtime.local_epochs, dpl=dpl, use_unlabeled=use_unlabeled, **asdict(shared), **(minibatches or {}))
    build = network(task, training.model, training.norm, training.width, wrap)
    net = GlobalModel(build, device=runtime.device, compile=runtime.compile)
    return SemiSupervised(task, net, training, method, runtime.device, runtime.precision).algorithm(name)
