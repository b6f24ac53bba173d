"""Whether a setting's strong views keep the class: a network trained on clean images, scored on strong views of test images.

FixMatch and every FedDB-family row train the unlabeled images on their strong view
A(x) against the pseudo-label of their weak view (the FedDB paper,
"Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Eq. 5-6, FixMatch's Eq. 4).
That asks the network to find the class in A(x); if a network trained on clean images
cannot (the control's rule: it must keep at least 60% accuracy on the strong views), the
unlabeled loss teaches what the images no longer show, and the table cannot tell the
semi-supervised methods apart by what they do with the unlabeled images.

:func:`train_clean` and :func:`accuracy` are what ``benchmarks/strong_views.py`` trains and
scores with; :func:`strong_view_accuracy` applies them in a table cell's own setting (its
data, its network, its weak and strong views) for the FedDB tables' control
(``papers/feddb/tables.py``): a few hundred Adam steps, seconds on a CPU for the embedded
setting's small CNN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from fedprior.data.augment.fixmatch import FixMatchAugment

if TYPE_CHECKING:
    from fedprior.experiments.config import ExperimentConfig

STEPS, TEST_IMAGES, SEED = 400, 2000, 0
"""The control's budget: Adam steps of 64 clean images, the test images the views are made of, the seed."""
AT_LEAST = 60.0
"""The control's rule: the clean-trained network keeps at least this accuracy (%) on the strong views."""


def train_clean(build: Callable[[], nn.Module], x: torch.Tensor, y: torch.Tensor, steps: int, seed: int, weak: FixMatchAugment | None = None) -> nn.Module:
    """``build()`` (under ``torch.manual_seed(seed)``) trained on clean images ``x`` (or on their weak views): Adam (lr 1e-3), batches of 64 drawn with ``seed``."""
    torch.manual_seed(seed)
    model = build().to(x.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = torch.randint(0, x.shape[0], (64,), generator=generator).to(x.device)
        images = x[batch] if weak is None else weak.weak(x[batch], generator)
        optimizer.zero_grad()
        F.cross_entropy(model(images), y[batch]).backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Accuracy (%) of ``model`` on ``x``, rounded to 2 decimals."""
    return round(100.0 * float((model(x).argmax(1).cpu() == y.cpu()).float().mean()), 2)


def strong_views(augment: FixMatchAugment, x: torch.Tensor, recipe: str, seed: int) -> torch.Tensor:
    """The strong view of ``recipe`` of every image of ``x``, drawn with a generator seeded with ``seed``."""
    return replace(augment, strong_augment=recipe).strong(x, torch.Generator(device=x.device).manual_seed(seed))


def view_summary(augment: FixMatchAugment) -> str:
    """The views in a few words, e.g. 'fixmatch, 2 ops, Cutout 0.5, shift 0.125, flip'."""
    flip = "flip" if augment.flip else "no flip"
    return f"{augment.strong_augment}, {augment.n} ops, Cutout {augment.cutout}, shift {augment.pad_fraction}, {flip}"


_MEASURED: dict[str, tuple[float, str]] = {}
""":func:`strong_view_accuracy` by what it depends on (a table's columns often share their data, network and views)."""


def strong_view_accuracy(name: str, config: ExperimentConfig) -> tuple[float, str]:
    """The FedDB tables' strong-view control in the setting of ``config`` (a table cell's): (accuracy %, what it measured).

    The cell's network (``algorithm.model``, ``norm``, ``width``) is trained by :func:`train_clean`
    for :data:`STEPS` steps on the clean training images of the cell's data, then scored on the
    strong views (the cell's views: ``algorithm.strong_augment``, ``strong_ops`` and ``cutout`` after its weak view, ``flip`` and ``weak_shift``)
    of the first :data:`TEST_IMAGES` test images. Computed once per distinct setting in a process.
    """
    from fedprior.algorithms.engines.semi_supervised import VIEW_FIELDS, views
    from fedprior.experiments.build import build_experiment
    from fedprior.models import build_model

    hyperparameters = config.algorithm.hyperparameters()
    model, norm, width = hyperparameters["model"], hyperparameters["norm"], hyperparameters["width"]
    shape = "|".join(str(hyperparameters.get(k)) for k in VIEW_FIELDS)
    key = f"{config.data.model_dump_json()}|{model}|{norm}|{width}|{shape}|{config.run.device}"
    if key not in _MEASURED:
        experiment = build_experiment(name, config)
        task, test = experiment.task, experiment.test
        options = {"norm": norm, **({"width": width} if model == "convnet" else {})}
        x, y = experiment.train["x"].to(experiment.device), experiment.train["y"].to(experiment.device)
        trained = train_clean(lambda: build_model(model, task, **options), x, y, STEPS, SEED)
        test_x, test_y = test["x"][:TEST_IMAGES].to(experiment.device), test["y"][:TEST_IMAGES]
        augment = views(task, hyperparameters)
        strong = accuracy(trained, strong_views(augment, test_x, augment.strong_augment, SEED + 2), test_y)
        clean = accuracy(trained, test_x, test_y)
        _MEASURED[key] = (
            strong,
            f"{model} trained {STEPS} steps on clean images: {clean:.1f}% clean, {strong:.1f}% on strong views ({view_summary(augment)})",
        )
    return _MEASURED[key]
