"""Record-level differential privacy on one client: DP-SGD with Opacus, and that client's own accountant.

Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning with Differential Privacy", CCS 2016,
Algorithm 1, as Opacus carries it out (Yousefpour et al., "Opacus: User-Friendly Differential Privacy Library
in PyTorch", 2021), on a client's n examples with the run's batch size B:

- a lot is drawn by Poisson sampling: each example joins it independently with probability q = 1 / ceil(n / B),
  and an epoch is ceil(n / B) lots (Opacus's ``DPDataLoader``: its ``UniformWithReplacementSampler`` at the rate
  1 / (batches of the plain loader));
- each example's gradient g_i is clipped to L2 norm C over all parameters as one vector,
  g_i min(1, C / (||g_i|| + 1e-6)) (Algorithm 1's "clip gradient"; Opacus's flat clipping, :func:`clip_factors`);
- the lot's gradient is (sum_i clip(g_i) + N(0, sigma^2 C^2 I)) / L with the fixed denominator L = int(q n), the
  expected lot size (Algorithm 1's "add noise"; Opacus's ``expected_batch_size``): noise of std sigma C / L on the mean;
- the client's optimizer (FedAvg's SGD with its learning rate, momentum and weight decay) steps on it.

The privacy of the client's examples is accounted by Opacus's RDP accountant of the Poisson-subsampled Gaussian
mechanism (Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism", 2019), under
add-or-remove-one-example neighbouring: each step composes one SGM of (sigma, q); the accountant's history, rows
(sigma, q, steps), is the client's persistent state (:data:`HISTORY`), so the steps of every round the client takes
part in compose. Client sampling could amplify it further; that amplification is not claimed.

The lots and the noise are drawn from the client's own stream for the round (``ClientInfo``): the lots from a CPU
generator, the noise from a generator on the training device seeded from that stream (Opacus's ``secure_mode=False``
takes a ``generator``), so the same config and seed give the same numbers, on resume too.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.errors import ConfigError

INSTALL = 'pip install -c requirements.lock -e ".[opacus]"'
ACCOUNTANT = "rdp"
"""Opacus's accountant of the clients' examples (``opacus.accountants.RDPAccountant``)."""
ACCOUNTANT_NAME = "Opacus RDP accountant, Poisson-sampled lots, add-or-remove-one-example"
"""How the report names it."""


def import_opacus() -> Any:
    """The ``opacus`` package, or one ConfigError line with the install command."""
    try:
        import opacus
    except ImportError:
        raise ConfigError(f"privacy.dp: 'sample' trains with Opacus's DP-SGD; install it: {INSTALL}") from None
    return opacus


@dataclass(frozen=True)
class DpSgd:
    """DP-SGD's settings: sigma (``privacy.noise_multiplier``), C (``privacy.clip_norm``), and the client's local SGD."""

    noise_multiplier: float
    clip_norm: float
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0


def lots(n: int, batch_size: int) -> tuple[int, float, int]:
    """(lots per epoch ceil(n / B), Poisson rate q = 1 / that, expected lot size L = int(q n)): Opacus's ``DPDataLoader``'s."""
    per_epoch = -(-n // batch_size)
    q = 1.0 / per_epoch
    return per_epoch, q, max(1, int(n * q))


def accountant(history: torch.Tensor) -> Any:
    """Opacus's RDP accountant holding ``history`` (rows sigma, q, steps; float64)."""
    from opacus.accountants import RDPAccountant

    accounted = RDPAccountant()
    accounted.history = [(float(z), float(q), int(s)) for z, q, s in history.tolist()]
    return accounted


def history_of(accounted: Any) -> torch.Tensor:
    """An Opacus accountant's history as a float64 tensor (rows sigma, q, steps): what the client keeps between rounds."""
    return torch.tensor([list(row) for row in accounted.history], dtype=torch.float64).reshape(-1, 3)


def epsilon(history: torch.Tensor, delta: float) -> float:
    """The client's epsilon at ``delta`` after the steps of ``history`` (0 before any)."""
    if history.shape[0] == 0:
        return 0.0
    return float(accountant(history).get_epsilon(delta=delta))


def clip_factors(grad_samples: Sequence[torch.Tensor], clip_norm: float) -> torch.Tensor:
    """min(1, C / (||g_i|| + 1e-6)) per example, ||g_i|| the L2 norm of example i's gradient over all parameters (Opacus's flat clipping)."""
    norms = torch.stack([g.reshape(len(g), -1).norm(2, dim=-1) for g in grad_samples], dim=1).norm(2, dim=1)
    return (clip_norm / (norms + 1e-6)).clamp(max=1.0)


def check_model(model: nn.Module, name: str) -> None:
    """ConfigError (one line) where Opacus cannot compute ``model``'s per-example gradients (its ModuleValidator: BatchNorm, ...)."""
    from opacus.validators import ModuleValidator

    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        reason = str(errors[0]).strip().split(". ")[0].rstrip(".")  # Opacus's first sentence
        raise ConfigError(
            f"privacy.dp: 'sample' needs per-example gradients, which Opacus refuses for algorithm.model = '{name}': {reason} "
            "(BatchNorm mixes the examples of a batch); accepted: 'cnn'"
        )


def train_private(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    dp: DpSgd,
    epochs: int,
    batch_size: int,
    history: torch.Tensor,
    lots_generator: torch.Generator,
    noise_generator: torch.Generator,
) -> tuple[dict[str, float], torch.Tensor]:
    """``epochs`` epochs of DP-SGD (the module docstring) on ``model`` in place; (metrics, the accountant's history after them).

    ``x``, ``y`` and ``model`` are on the training device; the lots come from the CPU ``lots_generator``, the noise from
    ``noise_generator`` (on the device). Metrics: the mean loss of the non-empty lots, the steps and the lots' mean size.
    """
    opacus = import_opacus()
    from opacus.optimizers import DPOptimizer
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    n = x.shape[0]
    per_epoch, q, expected = lots(n, batch_size)
    private = opacus.GradSampleModule(model, loss_reduction="mean")
    optimizer = DPOptimizer(
        torch.optim.SGD(model.parameters(), lr=dp.lr, momentum=dp.momentum, weight_decay=dp.weight_decay),
        noise_multiplier=dp.noise_multiplier,
        max_grad_norm=dp.clip_norm,
        expected_batch_size=expected,
        loss_reduction="mean",
        generator=noise_generator,
        secure_mode=False,
    )
    accounted = accountant(history)
    optimizer.attach_step_hook(accounted.get_optimizer_hook_fn(sample_rate=q))
    sampler = UniformWithReplacementSampler(num_samples=n, sample_rate=q, generator=lots_generator, steps=per_epoch)
    model.train()
    losses, sizes = [], 0
    try:
        with warnings.catch_warnings():  # torch warns that Opacus's backward hooks fire on module outputs (the images need no grad)
            warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
            for _ in range(epochs):
                for indices in sampler:
                    batch = torch.tensor(indices, dtype=torch.long).to(x.device)
                    optimizer.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(private(x[batch]), y[batch])
                    loss.backward()  # an empty lot: per-example gradients of none, its step is the noise alone
                    optimizer.step()
                    if len(indices):
                        losses.append(loss.detach())
                    sizes += len(indices)
    finally:
        private._close()  # the hooks off the caller's model
    steps = epochs * per_epoch
    train_loss = float(torch.stack(losses).double().mean()) if losses else math.nan
    return {"train_loss": train_loss, "steps": float(steps), "dp_lot_size": sizes / steps}, history_of(accounted)
