"""The hyperparameters FedDB and its baselines share, declared once.

Every semi-supervised algorithm (feddb, fixmatch, fedavg-labeled, fedmatch, fedrgd,
semifl) trains the same network with the same local optimizer; only its own step
differs. Instead of each factory repeating ~20 keyword parameters, a factory takes
``**shared`` and is wrapped by :func:`with_shared`, which gives it a real signature
(the factory's own parameters plus the shared ones, with per-algorithm defaults): the
registry reads config fields, validation and ``fedprior algorithms`` help from it, as
for every other algorithm.

Defaults follow the FedDB paper (feddb.txt 5.1) and, where it is silent, the authors'
code (IMPLEMENTATION-NOTES.md, FedDB); each description says which.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from fedprior.data.augment.fixmatch import STRONG_AUGMENTS

SHARED: dict[str, tuple[Any, Any]] = {
    "model": (
        Annotated[
            Literal["convnet", "wrn28-2"],
            Field(description="the network: 'wrn28-2' (the paper's WRN-28-2) or 'convnet' (the small CNN of the embedded settings)"),
        ],
        "wrn28-2",
    ),
    "norm": (
        Annotated[
            Literal["bn-batch", "bn", "gn", "none"],
            Field(
                description="normalization layers: 'bn-batch' (BatchNorm without running statistics, the authors' code), 'bn', 'gn' (GroupNorm, FedRGD), 'none'"
            ),
        ],
        "bn-batch",
    ),
    "width": (Annotated[int, Field(ge=1, description="convnet only: channels of its first block (then 2x, 4x)")], 32),
    "optimizer": (Annotated[Literal["sgd", "adam"], Field(description="local optimizer: 'sgd' (feddb.txt 5.1; FedMatch's code too) or 'adam'")], "sgd"),
    "lr": (Annotated[float, Field(gt=0, description="local learning rate eta (feddb.txt 5.1: 0.03)")], 0.03),
    "momentum": (Annotated[float, Field(ge=0, lt=1, description="SGD momentum (feddb.txt 5.1: 0.9)")], 0.9),
    "weight_decay": (Annotated[float, Field(ge=0, description="weight decay (the code: 5e-4)")], 5e-4),
    "nesterov": (Annotated[bool, Field(description="Nesterov momentum (the code: true)")], True),
    "clip": (Annotated[float, Field(ge=0, description="clip the local gradient to this norm, 0 = off (the code: 1)")], 1.0),
    "lr_decay_rounds": (
        Annotated[
            int,
            Field(
                ge=0,
                description="cosine decay of the local lr over this many rounds, as the code's scheduler over its 800 rounds (set it to federation.rounds); 0 = constant lr",
            ),
        ],
        800,
    ),
    "keep_optimizer_state": (
        Annotated[bool, Field(description="each client keeps its optimizer state (momentum buffers) between the rounds it is sampled in (the code)")],
        True,
    ),
    "flip": (Annotated[bool, Field(description="random horizontal flip in the weak and strong views (the code: on for CIFAR, off for SVHN)")], True),
    "strong_augment": (
        Annotated[
            Literal[STRONG_AUGMENTS],
            Field(
                description="the strong view's RandAugment: 'fixmatch' (FixMatch's: 2 ops per image at random magnitudes, PIL semantics, then Cutout), 'feddb-code' (the FedDB code's: each of 2 ops with p = 0.5 at m = 10, Cutout among them), 'kornia-fixed' (fedprior's former kornia ops at 29/30 of each range)"
            ),
        ],
        "fixmatch",
    ),
    "server_momentum": (
        Annotated[
            float,
            Field(ge=0, lt=1, description="server momentum on the averaged update (the code: 0.5, FedAvgM-like); 0 = plain averaging (the paper, Eq. 17)"),
        ],
        0.0,
    ),
    "threshold": (Annotated[float, Field(gt=0, le=1, description="confidence threshold tau of the pseudo-labels (feddb.txt 5.1: 0.95)")], 0.95),
    "unlabeled_weight": (Annotated[float, Field(ge=0, description="lambda, the weight of the unlabeled loss (Eq. 6; the code: 1)")], 1.0),
    "unlabeled_mean": (
        Annotated[
            Literal["all", "confident"],
            Field(
                description="the unlabeled loss (Eq. 4) is summed over the confident images and divided by the number of all unlabeled images ('all', the paper and FixMatch) or of the confident ones ('confident', the code)"
            ),
        ],
        "all",
    ),
    "fallback_batch_size": (
        Annotated[
            int,
            Field(
                ge=0,
                description="when no unlabeled image passes tau: 0 = the usual E full-batch steps with L_u = 0 (Eq. 6, the paper); B > 0 = E epochs of shuffled labeled-only mini-batches of B images (the code: 64)",
            ),
        ],
        0,
    ),
    "appu_subset": (
        Annotated[
            Literal["all", "confident"],
            Field(
                description="each local epoch's APP-U (Algorithm 3, line 14) over all unlabeled images (the paper) or over the pseudo-labeled ones (the code)"
            ),
        ],
        "all",
    ),
    "appu_gamma": (
        Annotated[
            float, Field(ge=0, le=1, description="gamma, the momentum of APP-U's moving average over the local epochs (Algorithm 3, line 20; the code: 0.5)")
        ],
        0.5,
    ),
    "diagnostics": (
        Annotated[
            bool,
            Field(
                description="clients report pseudo-label accuracy (from labels the training never sees) and their labeled class counts, for the report's figures"
            ),
        ],
        True,
    ),
}
"""Shared hyperparameter -> (annotated type, default)."""

SUPERVISED = (
    "model",
    "norm",
    "width",
    "optimizer",
    "lr",
    "momentum",
    "weight_decay",
    "nesterov",
    "clip",
    "lr_decay_rounds",
    "keep_optimizer_state",
    "flip",
    "server_momentum",
)
"""What an algorithm trained on the labeled data alone uses."""

SEMI_SUPERVISED = (
    *SUPERVISED,
    "strong_augment",
    "threshold",
    "unlabeled_weight",
    "unlabeled_mean",
    "fallback_batch_size",
    "appu_subset",
    "appu_gamma",
    "diagnostics",
)
"""What a pseudo-labeling algorithm uses."""


def with_shared(names: tuple[str, ...], **defaults: Any) -> Callable[[Callable], Callable]:
    """Give a factory ``f(task, *, ..., **shared)`` the keyword parameters ``names`` of :data:`SHARED`.

    ``defaults`` overrides a shared default for this algorithm (e.g. FedRGD's ``norm='gn'``).
    The wrapped factory fills in the defaults, so ``f(task, local_epochs=1)`` works as well
    as a call through the registry.
    """
    unknown = set(defaults) - set(names)
    if unknown:
        raise ValueError(f"defaults for parameters not shared here: {sorted(unknown)}")

    def wrap(factory: Callable) -> Callable:
        signature = inspect.signature(factory, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        shared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults.get(name, SHARED[name][1]), annotation=SHARED[name][0]) for name in names
        ]
        full = signature.replace(parameters=[*own, *shared])

        @functools.wraps(factory)
        def wrapped(*args: Any, **kwargs: Any):
            bound = full.bind(*args, **kwargs)
            bound.apply_defaults()
            return factory(*bound.args, **bound.kwargs)

        wrapped.__signature__ = full  # type: ignore[attr-defined]
        return wrapped

    return wrap
