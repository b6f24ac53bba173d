"""Debiased model aggregation (DMA): aggregation weights that make the weighted APP-U uniform.

the FedDB paper ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning"),
Sec. 4.4, Eq. (15)-(17) and Algorithm 2. Given the APP-Us ``p_bar_m`` of the
clients of a round (rows of ``P``, shape (M, K)), the aggregated APP-U is
``p_bar_aggr = sum_m beta_m p_bar_m`` (Eq. 15) and DMA looks for weights on the simplex
minimizing ``L_aggr = || p_bar_aggr - u ||`` with ``u`` uniform over the K classes
(Eq. 16); the global model is then ``sum_m beta_m w_m`` (Eq. 17).

Two solvers:

- ``algorithm2`` (the paper's, the default): beta starts uniform; ``E_aggr`` times,
  ``beta <- softmax(beta - eta grad L_aggr)`` (Algorithm 2, lines 1-6), with ``L_aggr``
  the Euclidean norm of Eq. (16) (``loss="norm"``, the paper), the mean squared error of
  the authors' code with a plain gradient step (``loss="mse"``), or that error with the
  code's step (``loss="mse-code"``). The code (github.com/GuogangZhu/FedDB,
  ``src/modules/modules.py``, ``Server.update``) re-creates
  ``torch.optim.SGD([weight], lr=1.0, momentum=0.9, weight_decay=0.9, nesterov=True)``
  before every one of its 100 steps. A fresh SGD's first step starts its momentum buffer
  at ``d = grad + 0.9 beta`` and, with Nesterov, moves by ``d + 0.9 d``, so each step is
  ``beta <- softmax(beta - eta (1 + 0.9) (grad + 0.9 beta))``: the momentum never carries
  over between steps, but it scales the step by 1.9, and the weight decay pulls beta
  toward 0 before the softmax. ``mse`` leaves both out; on 10 Dirichlet(0.3) APP-Us over
  10 classes its weights differ from the code's by up to 6e-4 (``mse-code`` matches the
  code's loop to 1e-6, tests/algorithms/test_feddb.py).
- ``simplex``: the exact minimizer of Eq. (16) over the simplex (SciPy's SLSQP with
  ``beta >= 0``, ``sum beta = 1``), for comparison.

What the measurements show (tests/algorithms/test_feddb.py, docs/feddb.md): because
Algorithm 2 maps its iterate through a softmax every step, its fixed points satisfy
``beta = softmax(beta - eta g)``; with the norm loss the gradient keeps unit size near
the optimum and the iterate cycles around it instead of settling, and with the MSE
loss the gradient is so small (order 1/K) that beta stays within about 1% of uniform
(with the code's step too: 0.098-0.102 on the example above).
The ``simplex`` solver reaches a uniform weighted APP-U whenever one exists.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

DmaLoss = Literal["norm", "mse", "mse-code"]
CODE_MOMENTUM = 0.9
CODE_WEIGHT_DECAY = 0.9
"""The authors' DMA optimizer: SGD(lr, momentum 0.9, weight_decay 0.9, nesterov), re-created every step."""
DmaSolver = Literal["algorithm2", "simplex"]


def uniform_distance(appus: torch.Tensor, weights: torch.Tensor) -> float:
    """``|| sum_m beta_m p_bar_m - u ||``, Eq. (16) (Euclidean, over the K classes)."""
    k = appus.shape[1]
    return float(torch.linalg.vector_norm(weights.to(appus.dtype) @ appus - 1.0 / k))


def _loss(aggregated: torch.Tensor, loss: DmaLoss) -> torch.Tensor:
    gap = aggregated - 1.0 / aggregated.shape[0]
    return torch.linalg.vector_norm(gap) if loss == "norm" else gap.pow(2).mean()


def _direction(beta: torch.Tensor, grad: torch.Tensor, loss: DmaLoss) -> torch.Tensor:
    """The step direction: the gradient, or for ``mse-code`` a fresh Nesterov SGD's first step (see the module docstring)."""
    if loss != "mse-code":
        return grad
    d = grad + CODE_WEIGHT_DECAY * beta
    return d + CODE_MOMENTUM * d


def algorithm2(appus: torch.Tensor, steps: int = 100, lr: float = 1.0, loss: DmaLoss = "norm") -> torch.Tensor:
    """Algorithm 2 of the FedDB paper: ``steps`` (E_aggr) gradient steps on beta, each followed by ``beta = softmax(beta)``."""
    appus = appus.detach().to(torch.float64)
    beta = torch.full((appus.shape[0],), 1.0 / appus.shape[0], dtype=torch.float64)
    for _ in range(steps):
        beta.requires_grad_(True)
        (grad,) = torch.autograd.grad(_loss(beta @ appus, loss), beta)
        if not bool(torch.isfinite(grad).all()):  # the norm's gradient at exactly zero distance: stop there
            beta = beta.detach()
            break
        beta = torch.softmax(beta.detach() - lr * _direction(beta.detach(), grad, loss), dim=0)
    return beta.detach().float()


def simplex_optimum(appus: torch.Tensor) -> torch.Tensor:
    """The weights on the simplex minimizing Eq. (16) exactly (SciPy SLSQP on the squared distance)."""
    from scipy.optimize import minimize

    p = appus.detach().to(torch.float64).numpy()
    m, k = p.shape
    u = np.full(k, 1.0 / k)

    def objective(beta: np.ndarray) -> tuple[float, np.ndarray]:
        gap = beta @ p - u
        return float(gap @ gap), 2.0 * p @ gap

    result = minimize(
        objective,
        np.full(m, 1.0 / m),
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * m,
        constraints=[{"type": "eq", "fun": lambda b: b.sum() - 1.0, "jac": lambda b: np.ones_like(b)}],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    beta = np.clip(result.x, 0.0, None)
    return torch.from_numpy(beta / beta.sum()).float()


def dma_weights(appus: torch.Tensor, *, solver: DmaSolver = "algorithm2", steps: int = 100, lr: float = 1.0, loss: DmaLoss = "norm") -> torch.Tensor:
    """The aggregation weights beta (M,) of DMA for the clients' APP-Us (M, K)."""
    if appus.shape[0] == 1:
        return torch.ones(1)
    if solver == "simplex":
        return simplex_optimum(appus)
    return algorithm2(appus, steps=steps, lr=lr, loss=loss)
