"""Local training of many linear heads at once, as batched tensor operations.

The linear-head methods (FST-CBDG and the supervised baselines on frozen features)
train B clients' heads together: the heads are stacked into W (B, K, d), b (B, K);
each step gathers every client's next mini-batch into one (B, bs, d) tensor; the
loss is the sum over clients of each client's own mean loss. For a linear head the
gradient is dL/dW = sum_n g_n x_n^T, g_n = dL/dlogits_n, so autograd differentiates
the loss w.r.t. the logits only and one einsum gives every client its own W and b
gradients; an objective may add gradient terms it computes itself (FST-CBDG's
synthetic features). SGD with momentum and weight decay updates the stacked heads,
leaving untouched the clients that have finished their epoch (their data is smaller). Each client draws its randomness from its own generator in the
same order whatever B is, so training one client alone (B = 1, the per-client path)
gives the same numbers as training it among others (a test checks this).

The heads and the features live on the run's device (moved there once per update);
the clients' generators are CPU generators, so the batches an epoch visits are drawn
on the CPU and moved to the device once per epoch. Replies hold CPU tensors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from fedprior.algorithms.base import Broadcast, ClientData, Reply, RoundInfo, State, Task
from fedprior.algorithms.pieces.tensors import MODEL
from fedprior.errors import ConfigError

WEIGHT, BIAS = MODEL + "weight", MODEL + "bias"


@dataclass(frozen=True)
class Sgd:
    """SGD as torch.optim.SGD computes it: g = grad + wd * p; buf = momentum * buf + g; p -= lr * buf."""

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0


class HeadObjective(Protocol):
    """The per-method part of local training (the loss); the trainer does the rest."""

    def start_epoch(self, run: HeadTraining, epoch: int) -> None:
        """Called before each local epoch (e.g. to plan synthetic samples)."""

    def loss(self, run: HeadTraining, step: int, logits: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sum over clients of each client's mean loss on its mini-batch, as a function of ``logits``.

        ``logits`` (B, bs, K) of the batch (a leaf requiring grad); ``rows`` (B, bs)
        positions into ``run.x``; ``mask`` (B, bs) marks real (not padding) rows.
        """

    def add_gradients(self, run: HeadTraining, step: int, weight_grad: torch.Tensor, bias_grad: torch.Tensor) -> None:
        """Add, in place, gradient terms that do not go through the batch's logits."""


class HeadTraining:
    """One round of local training for B clients' linear heads, started from the same global head."""

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor,
        xs: Sequence[torch.Tensor],
        generators: Sequence[torch.Generator],
        batch_size: int,
        sgd: Sgd,
        device: torch.device = torch.device("cpu"),
    ) -> None:
        self.device = device
        self.num_clients = len(xs)
        self.sizes = torch.tensor([x.shape[0] for x in xs])
        if bool((self.sizes == 0).any()):
            raise ValueError("every client needs at least one example")
        self.offsets = torch.cumsum(self.sizes, 0) - self.sizes
        self.x = torch.cat(list(xs)).to(device)
        self.generators = list(generators)
        self.steps = [math.ceil(int(n) / batch_size) for n in self.sizes]
        # a batch never holds more rows than the largest client has: padding every client to a
        # batch_size of 10^8 would allocate terabytes for the same steps and the same numbers
        self.batch_size = min(batch_size, int(self.sizes.max()))
        self.sgd = sgd
        self.weight = weight.detach().to(device).expand(self.num_clients, *weight.shape).clone()
        self.bias = bias.detach().to(device).expand(self.num_clients, *bias.shape).clone()
        self._buffers = [torch.zeros_like(self.weight), torch.zeros_like(self.bias)]
        self.epochs_done = 0

    @functools.cached_property
    def padded(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every client's data side by side: features (B, n_max, d), rows into ``x`` (B, n_max), mask (B, n_max)."""
        width = int(self.sizes.max()) if self.num_clients else 0
        positions = torch.arange(width)[None, :]
        mask = positions < self.sizes[:, None]
        rows = torch.where(mask, self.offsets[:, None] + positions, torch.zeros_like(positions)).to(self.device)
        return self.x[rows], rows, mask.to(self.device)

    @torch.no_grad()
    def all_predictions(self) -> torch.Tensor:
        """softmax(W x + b) of every example of every client under its own current head, (B, n_max, K)."""
        return torch.softmax(self.logits(self.padded[0]), dim=-1)

    def client_rows(self, client: int) -> torch.Tensor:
        """Positions in ``self.x`` of client ``client``'s examples."""
        start = int(self.offsets[client])
        return torch.arange(start, start + int(self.sizes[client]), device=self.device)

    def active(self, step: int) -> torch.Tensor:
        return torch.tensor([step < s for s in self.steps], device=self.device)

    def _batches(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, mask) of every step of one epoch: (steps, B, bs), each client shuffled by its own generator."""
        total = max(self.steps)
        rows = torch.zeros(total, self.num_clients, self.batch_size, dtype=torch.long)
        mask = torch.zeros(total, self.num_clients, self.batch_size, dtype=torch.bool)
        for c, generator in enumerate(self.generators):
            n = int(self.sizes[c])
            order = torch.randperm(n, generator=generator) + self.offsets[c]
            padded = torch.zeros(self.steps[c] * self.batch_size, dtype=torch.long)
            padded[:n] = order
            rows[: self.steps[c], c] = padded.view(self.steps[c], self.batch_size)
            valid = torch.zeros(self.steps[c] * self.batch_size, dtype=torch.bool)
            valid[:n] = True
            mask[: self.steps[c], c] = valid.view(self.steps[c], self.batch_size)
        return rows.to(self.device), mask.to(self.device)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n, K) logits of features x (B, n, d) under each client's own head."""
        return torch.baddbmm(self.bias[:, None, :], x, self.weight.transpose(1, 2))

    def _sgd_step(self, grads: tuple[torch.Tensor, torch.Tensor], active: torch.Tensor) -> None:
        for param, grad, buf in zip((self.weight, self.bias), grads, self._buffers, strict=True):
            grad = grad + self.sgd.weight_decay * param
            new_buf = self.sgd.momentum * buf + grad
            keep = active.view(-1, *([1] * (param.dim() - 1)))
            buf.copy_(torch.where(keep, new_buf, buf))
            param.sub_(torch.where(keep, self.sgd.lr * new_buf, torch.zeros_like(param)))

    def run(self, epochs: int, objective: HeadObjective) -> None:
        for epoch in range(epochs):
            rows, mask = self._batches()
            objective.start_epoch(self, epoch)
            for step in range(rows.shape[0]):
                x = self.x[rows[step]]
                logits = self.logits(x).requires_grad_(True)
                with torch.enable_grad():
                    loss = objective.loss(self, step, logits, rows[step], mask[step])
                if loss.requires_grad:
                    (g,) = torch.autograd.grad(loss, logits)
                    weight_grad, bias_grad = torch.bmm(g.transpose(1, 2), x), g.sum(1)
                else:
                    weight_grad, bias_grad = torch.zeros_like(self.weight), torch.zeros_like(self.bias)
                objective.add_gradients(self, step, weight_grad, bias_grad)
                self._sgd_step((weight_grad, bias_grad), self.active(step))
            self.epochs_done += 1

    def replies(self) -> list[Reply]:
        """Each client's trained head, its example count and its number of local steps."""
        return [
            Reply(
                {WEIGHT: self.weight[c].to("cpu", copy=True), BIAS: self.bias[c].to("cpu", copy=True)},
                int(self.sizes[c]),
                {"steps": float(self.steps[c] * self.epochs_done)},
            )
            for c in range(self.num_clients)
        ]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-client mean over the real rows: values, mask (B, n) -> (B,)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum(1) / mask.sum(1).clamp(min=1)


def text_head(task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    """W = [T_1, ..., T_K]^T, b = 0: the head that predicts CLIP's zero-shot classes (the FST-CBDG
    paper, "Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model", Sec. 3.1, Algorithm 1 line 6)."""
    if "text_features" not in task.prior:
        raise ConfigError(
            "algorithm.init: 'text' needs class text features from a vision-language encoder (set encoder.name to locked-text, openclip:ARCH or hf-clip:FOLDER)"
        )
    weight = task.prior["text_features"].float().clone()
    return weight, torch.zeros(weight.shape[0])


def random_head(task: Task, info: RoundInfo) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.Linear's default initialization, seeded by the run's init stream."""
    from fedprior.seeding import derived_seed

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derived_seed(info.seed, "init", "model"))
        layer = torch.nn.Linear(task.input_shape[0], task.num_classes)
    return layer.weight.detach().clone(), layer.bias.detach().clone()


@torch.inference_mode()
def head_accuracy(state: State, data: ClientData, device: torch.device = torch.device("cpu")) -> dict[str, float | list[float]]:
    """Accuracy, cross-entropy, macro-F1 and per-class accuracy of the head on (x, y), computed on ``device``."""
    from fedprior.algorithms.pieces.metrics import logit_metrics

    x = data["x"].to(device)
    return logit_metrics(x @ state[WEIGHT].to(device).T + state[BIAS].to(device), data["y"])


def head_evaluation(device: torch.device):
    """``evaluate`` of a linear-head algorithm on ``device``."""
    return functools.partial(head_accuracy, device=device)


def broadcast_head(state: State, info: RoundInfo) -> Broadcast:
    return Broadcast({WEIGHT: state[WEIGHT], BIAS: state[BIAS]})


def check_features(task: Task, field: str = "encoder.name") -> None:
    """A ConfigError naming ``field`` unless the inputs are feature vectors (a frozen encoder is set)."""
    if len(task.input_shape) != 1:
        raise ConfigError(
            f"{field}: this algorithm trains a linear head on feature vectors of a frozen encoder, but the data are "
            f"images of shape {task.input_shape}; set encoder.name to locked-text, openclip:ARCH or hf-clip:FOLDER"
        )
