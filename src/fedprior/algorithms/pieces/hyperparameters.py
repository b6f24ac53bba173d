"""The hyperparameters more than one algorithm takes, declared once; the one way algorithms share them.

A hyperparameter is a keyword-only parameter of an algorithm's factory, annotated with its
type, bounds and description (``Annotated[float, Field(gt=0, description=...)]``) and with a
default: the registry reads the ``[algorithm]`` config fields, their validation and the help
of ``fedprior algorithms`` from the signature (:mod:`fedprior.algorithms.registry`).

- A declaration that two or more methods use is an alias here (``Lr``, ``Dpl``,
  ``ProjectionDim``, ...), imported by each; no method imports another's.
- A family whose methods all take the same set is given that set once, here, as the fields of a frozen
  dataclass: :class:`LocalSgd` (FedAvg's local SGD: fedavg, fedprox, moon, scaffold, central, the head
  baselines), :class:`SemiSupervisedFields` (FedDB and its baselines; their engine's ``Training`` extends it),
  :class:`BodyTraining` (FedBM and the baselines of its tables). A factory declares the set as one keyword
  parameter (``sgd: LocalSgd``) and takes it with :func:`with_fields`: its signature, which the registry reads,
  shows the set's fields in that parameter's place (those it names, with its own defaults where it says so),
  and the factory is called with their values as one dataclass. An option a factory passes on whole (server
  optimizers, robust aggregation) is a group of parameters taken with :func:`with_shared` into ``**shared``.

Defaults of the semi-supervised set follow the FedDB paper ("Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning",
Sec. 5.1) and, where it is
silent, the authors' code (docs/feddb.md); those of the FedBM set the
authors' code (docs/fedbm.md); each description says which.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import torch
from pydantic import Field

from fedprior.data.augment.fixmatch import STRONG_AUGMENTS
from fedprior.errors import ConfigError

CPU = torch.device("cpu")
"""The default ``device`` of every factory (the runtime passes ``run.device``)."""

# Supervised training of a whole network or a head (FedAvg and the algorithms built like it).
Lr = Annotated[float, Field(gt=0, description="client SGD learning rate")]
Momentum = Annotated[float, Field(ge=0, lt=1, description="client SGD momentum (fresh each round)")]
WeightDecay = Annotated[float, Field(ge=0, description="client SGD weight decay")]
LrDecay = Annotated[float, Field(gt=0, le=1, description="the client learning rate is lr * lr_decay^(round - 1) (FedBM's code: 0.99)")]
ModelName = Annotated[
    Literal["cnn", "linear", "convnet", "convnet-small", "resnet18", "resnet18-imagenet"],
    Field(
        description="the network: 'cnn', 'convnet', 'convnet-small', 'resnet18' (CIFAR stem) or 'resnet18-imagenet' (ImageNet stem, for large images) on images, 'linear' on encoder features"
    ),
]
HeadInitField = Annotated[
    Literal["random", "text"], Field(description="linear head start: 'random', or 'text' (W = class text features, b = 0; needs a vision-language encoder)")
]
# Self-supervised representation learning (MFCL and its baselines).
NormGroupChannels = Annotated[
    int,
    Field(
        ge=1,
        description="Lambda of PN and GN: channels per group (the MFCL paper's Sec. 2.2, Eq. 3); a layer of C channels has C / Lambda groups, "
        "so Lambda must divide the width. Not given by the paper; 2 = GroupNorm's 32 groups at Table 5's 64 channels",
    ),
]
ClientLr = Annotated[float, Field(gt=0, description="phase 1 Adam learning rate on the clients (Appendix C.3: 1e-3)")]
Temperature = Annotated[float, Field(gt=0, description="NT-Xent temperature tau (Eq. 5; SimCLR's 0.5 for CIFAR)")]
ProjectionDim = Annotated[int, Field(ge=1, description="output size of the projection head (Table 6; SimCLR's 128)")]
EvalFeatures = Annotated[
    Literal["projection", "backbone"],
    Field(description="features the linear evaluation reads: after the projection head (the paper) or the backbone's pooled output"),
]
MinScale = Annotated[float, Field(gt=0, le=1, description="smallest area fraction of SimCLR's random resized crop")]
Width = Annotated[int, Field(ge=1, description="width of the ResNet-18 backbone (64 is the standard network)")]
LinearEval = Annotated[
    Literal["train-test", "test-2fold"],
    Field(
        description="linear evaluation: train-test (the MFCL paper's, Sec. 3: a dense layer trained on the training set's frozen features, "
        "scored on the test set) or test-2fold (a logistic regression cross-fitted on two halves of the test set)"
    ),
]
# Semi-supervised learning (FedDB and its baselines).
Dpl = Annotated[bool, Field(description="debiased pseudo-labeling (DPL, the FedDB paper, Eq. 14 / Algorithm 1): the X-FedDPL variant")]
# FixMatch's own mini-batches (fixmatch and fedavg-labeled: the FedDB tables' central capability and budget controls).
LabeledBatchSize = Annotated[
    int,
    Field(
        ge=0,
        description="0 = the paper's local training, E full-batch steps a round (the FedDB paper, Sec. 5.1); B > 0 = FixMatch's own mini-batches "
        "(Sohn et al. 2020, Sec. 4: B = 64): local_steps steps a round, each on B labeled and unlabeled_ratio x B unlabeled images "
        "drawn at random, the unlabeled ones pseudo-labeled from the batch's weak view by the current model",
    ),
]
UnlabeledRatio = Annotated[int, Field(ge=1, description="mu: unlabeled images per labeled image of a mini-batch, with labeled_batch_size > 0 (FixMatch: 7)")]
LocalSteps = Annotated[int, Field(ge=0, description="optimizer steps a round with labeled_batch_size > 0 (at least 1 there); unused otherwise")]
# Training a whole network under FedBM's common settings (FedBM and its baselines).
OptimizerName = Annotated[Literal["sgd", "adam"], Field(description="client optimizer: 'sgd' (FedBM's code, the default) or 'adam' (FedBM's paper)")]
LrDecayEvery = Annotated[
    Literal["round", "epoch"],
    Field(
        description="lr_decay per 'round' (FedBM's code: lr * lr_decay^(round - 1)) or per 'epoch' (FedBM's paper, Sec. IV-A2: "
        "local epoch e of round r trains at lr * lr_decay^((r - 1) E + e), E the round's local epochs)"
    ),
]
BodyModel = Annotated[
    Literal["convnet", "convnet-small", "resnet18", "resnet18-imagenet"],
    Field(
        description="the network: 'convnet' / 'convnet-small' (embedded settings), 'resnet18' (CIFAR stem, 32x32 images) or 'resnet18-imagenet' (the FedBM authors' ResNet-18 for 128x128 images)"
    ),
]


# Asynchronous aggregation on the simulated clock (FedBuff and FedAsync: pieces/async_schedule.py).
Concurrency = Annotated[
    int,
    Field(ge=1, description="C: clients training at once, each that finishes replaced by one drawn uniformly from those idle (at most federation.num_clients)"),
]
Staleness = Annotated[
    Literal["constant", "polynomial", "hinge"],
    Field(
        description="the staleness weight s(tau) of an update tau model versions old (FedAsync, Xie et al. 2019): 'constant' 1, "
        "'polynomial' (tau + 1)^(-staleness_a) (a = 0.5: FedBuff's 1 / sqrt(1 + tau)), 'hinge' 1 up to tau = staleness_b, then 1 / (staleness_a (tau - staleness_b) + 1)"
    ),
]
StalenessA = Annotated[float, Field(ge=0, description="a of the staleness weight: the polynomial's exponent, or the hinge's slope")]
StalenessB = Annotated[float, Field(ge=0, description="b of the 'hinge' staleness weight: the staleness up to which updates keep weight 1")]


LABELS_TOO = "labels_too"
"""The field metadata key that marks a shared semi-supervised field an algorithm trained on the labels alone also takes."""


def labels_too(default: Any) -> Any:
    """A field of :class:`SemiSupervisedFields` that fedavg-labeled (the labeled data alone) takes too, with its default."""
    return dataclasses.field(default=default, metadata={LABELS_TOO: True})


@dataclasses.dataclass(frozen=True, kw_only=True)
class SemiSupervisedFields:
    """What every semi-supervised algorithm (feddb, fixmatch, fedmatch, fedrgd, semifl) shares: the network, its local optimizer,
    the pseudo-labels. Declared once: its fields are the algorithms' config fields (:func:`with_fields`; :data:`SUPERVISED`:
    those marked :func:`labels_too`) and the fields of their engine's ``Training``, which extends it."""

    model: Annotated[
        Literal["convnet", "wrn28-2"],
        Field(description="the network: 'wrn28-2' (the paper's WRN-28-2) or 'convnet' (the small CNN of the embedded settings)"),
    ] = labels_too("wrn28-2")
    norm: Annotated[
        Literal["bn-batch", "bn", "gn", "none"],
        Field(description="normalization layers: 'bn-batch' (BatchNorm without running statistics, the authors' code), 'bn', 'gn' (GroupNorm, FedRGD), 'none'"),
    ] = labels_too("bn-batch")
    width: Annotated[int, Field(ge=1, description="convnet only: channels of its first block (then 2x, 4x)")] = labels_too(32)
    optimizer: Annotated[Literal["sgd", "adam"], Field(description="local optimizer: 'sgd' (the FedDB paper, Sec. 5.1; FedMatch's code too) or 'adam'")] = (
        labels_too("sgd")
    )
    lr: Annotated[float, Field(gt=0, description="local learning rate eta (the FedDB paper, Sec. 5.1: 0.03)")] = labels_too(0.03)
    momentum: Annotated[float, Field(ge=0, lt=1, description="SGD momentum (the FedDB paper, Sec. 5.1: 0.9)")] = labels_too(0.9)
    weight_decay: Annotated[float, Field(ge=0, description="weight decay (the code: 5e-4)")] = labels_too(5e-4)
    nesterov: Annotated[bool, Field(description="Nesterov momentum (the code: true)")] = labels_too(True)
    clip: Annotated[float, Field(ge=0, description="clip the local gradient to this norm, 0 = off (the code: 1)")] = labels_too(1.0)
    lr_decay_rounds: Annotated[
        int,
        Field(
            ge=0,
            description="cosine decay of the local lr over this many rounds, as the code's scheduler over its 800 rounds (set it to federation.rounds); 0 = constant lr",
        ),
    ] = labels_too(800)
    keep_optimizer_state: Annotated[
        bool, Field(description="each client keeps its optimizer state (momentum buffers) between the rounds it is sampled in (the code)")
    ] = labels_too(True)
    flip: Annotated[bool, Field(description="random horizontal flip in the weak and strong views (the code: on for CIFAR, off for SVHN)")] = labels_too(True)
    server_momentum: Annotated[
        float,
        Field(
            ge=0,
            lt=1,
            description="FedAvgM's server momentum beta with server lr 1: v = beta v + Delta, w = w + v, Delta = average - w (the code: 0.5); 0 = plain averaging (the paper, Eq. 17)",
        ),
    ] = labels_too(0.0)
    strong_augment: Annotated[
        Literal[STRONG_AUGMENTS],  # type: ignore[valid-type]  # typing expands the tuple at run time (pydantic reads it); mypy wants literals
        Field(
            description="the strong view's RandAugment: 'fixmatch' (FixMatch's: 2 ops per image at random magnitudes, PIL semantics, then Cutout), 'feddb-code' (the FedDB code's: each of 2 ops with p = 0.5 at m = 10, Cutout among them), 'kornia-fixed' (fedprior's former kornia ops at 29/30 of each range)"
        ),
    ] = "fixmatch"
    weak_shift: Annotated[
        float,
        Field(
            gt=0,
            lt=0.5,
            description="the weak view's largest translation, as a fraction of the image side (reflect-padded crop; FixMatch: 0.125, 4 pixels at 32; at least 1 pixel)",
        ),
    ] = labels_too(0.125)
    strong_ops: Annotated[
        int,
        Field(ge=1, le=14, description="RandAugment operations per strong view (FixMatch and the FedDB code: 2; 'fixmatch' and 'kornia-fixed' recipes)"),
    ] = 2
    cutout: Annotated[
        float,
        Field(
            ge=0,
            lt=1,
            description="the side of the strong view's Cutout square, as a fraction of the image side (FixMatch: 0.5; 0 = off; 'feddb-code' has Cutout among its operations instead)",
        ),
    ] = 0.5
    threshold: Annotated[float, Field(gt=0, le=1, description="confidence threshold tau of the pseudo-labels (the FedDB paper, Sec. 5.1: 0.95)")] = 0.95
    unlabeled_weight: Annotated[float, Field(ge=0, description="lambda, the weight of the unlabeled loss (Eq. 6; the code: 1)")] = 1.0
    unlabeled_mean: Annotated[
        Literal["all", "confident"],
        Field(
            description="the unlabeled loss (Eq. 4) is summed over the confident images and divided by the number of all unlabeled images ('all', the paper and FixMatch) or of the confident ones ('confident', the code)"
        ),
    ] = "all"
    fallback_batch_size: Annotated[
        int,
        Field(
            ge=0,
            description="when no unlabeled image passes tau: 0 = the usual E full-batch steps with L_u = 0 (Eq. 6, the paper); B > 0 = E epochs of shuffled labeled-only mini-batches of B images (the code: 64)",
        ),
    ] = 0
    appu_subset: Annotated[
        Literal["all", "confident"],
        Field(description="each local epoch's APP-U (Algorithm 3, line 14) over all unlabeled images (the paper) or over the pseudo-labeled ones (the code)"),
    ] = "all"
    appu_gamma: Annotated[
        float, Field(ge=0, le=1, description="gamma, the momentum of APP-U's moving average over the local epochs (Algorithm 3, line 20; the code: 0.5)")
    ] = 0.5
    eval_batch_size: Annotated[
        int,
        Field(
            ge=1,
            description="images per forward pass where the model predicts without training (DPL's pseudo-labels and APP-U, the test set); "
            "with norm = bn-batch each pass normalizes by its own batch's statistics (fedprior: 1024; the code: 250, its 'global' loader)",
        ),
    ] = labels_too(1024)
    diagnostics: Annotated[
        bool,
        Field(
            description="clients report pseudo-label accuracy (from labels the training never sees) and their labeled class counts, for the report's figures"
        ),
    ] = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalSgd:
    """The network and FedAvg's local SGD (McMahan et al., AISTATS 2017, Algorithm 1), with FedAvg's defaults: what fedavg,
    fedprox, moon, scaffold, central and the linear-head baselines take (:func:`with_fields`, each the fields it uses)."""

    model: ModelName = "cnn"
    lr: Lr = 0.05
    momentum: Momentum = 0.0
    weight_decay: WeightDecay = 0.0
    lr_decay: LrDecay = 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfSupervisedFields:
    """What the self-supervised baselines of the MFCL paper's tables (fedsimclr, fedswav, orchestra) share: the views' crop and
    the linear evaluation (the MFCL paper's Sec. 3)."""

    eval_features: EvalFeatures = "projection"
    linear_eval: LinearEval = "train-test"
    min_scale: MinScale = 0.08


@dataclasses.dataclass(frozen=True, kw_only=True)
class BodyTraining:
    """What every algorithm of FedBM's tables shares, with the defaults of the authors' code (the run's epochs, batches,
    device and precision come as the factory's ``runtime``; ``engines.body_training.local_training`` joins the two)."""

    model: BodyModel = "convnet"
    optimizer: OptimizerName = "sgd"
    lr: Lr = 0.01
    momentum: Momentum = 0.9
    weight_decay: WeightDecay = 5e-4
    lr_decay: LrDecay = 0.99
    lr_decay_every: LrDecayEvery = "round"


def parameters(declaration: Callable[..., None], names: Sequence[str] | None = None) -> tuple[inspect.Parameter, ...]:
    """The keyword parameters of a set's ``declaration`` (those of ``names`` only, in that order, if given)."""
    every = inspect.signature(declaration, eval_str=True).parameters
    return tuple(every.values()) if names is None else tuple(every[name] for name in names)


def field_parameters(declaration: type) -> tuple[inspect.Parameter, ...]:
    """The fields of a dataclass ``declaration`` as keyword parameters (annotation and default), for :func:`with_shared`."""
    hints = typing.get_type_hints(declaration, include_extras=True)
    return tuple(
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name]) for f in dataclasses.fields(declaration)
    )


SEMI_SUPERVISED = field_parameters(SemiSupervisedFields)
SUPERVISED = tuple(f.name for f in dataclasses.fields(SemiSupervisedFields) if f.metadata.get(LABELS_TOO))
"""Of :class:`SemiSupervisedFields`, what an algorithm trained on the labeled data alone (fedavg-labeled) uses."""
SEMI_SUPERVISED_DEFAULTS: dict[str, Any] = {p.name: p.default for p in SEMI_SUPERVISED}


def with_fields(name: str, declaration: type, names: Sequence[str] | None = None, **defaults: Any) -> Callable[[Callable], Callable]:
    """Give a factory that declares the keyword parameter ``name: declaration`` (a frozen dataclass of hyperparameters, a set
    more than one algorithm takes) the dataclass's fields in its place, and call it with their values as one ``declaration``.

    ``names`` picks the fields this algorithm takes, in that order (the others keep the dataclass's defaults); ``defaults``
    overrides a default for this algorithm (e.g. central's ``lr=0.01``). The wrapped factory fills in the defaults, so
    ``f(task, runtime, lr=0.1)`` works as well as a call through the registry, which reads the fields from its signature.
    """
    group = [p.replace(default=defaults.get(p.name, p.default)) for p in field_parameters(declaration) if names is None or p.name in names]
    if names is not None:
        group.sort(key=lambda p: list(names).index(p.name))
    unknown = set(defaults) - {p.name for p in group}
    if unknown or (names is not None and len(group) != len(names)):
        raise ValueError(f"{declaration.__name__}: not among its fields taken here: {sorted(unknown | set(names or ()) - {p.name for p in group})}")

    def wrap(factory: Callable) -> Callable:
        signature = inspect.signature(factory, eval_str=True)
        params = list(signature.parameters.values())
        at = [p.name for p in params].index(name)
        full = signature.replace(parameters=[*params[:at], *group, *params[at + 1 :]])

        @functools.wraps(factory)
        def wrapped(*args: Any, **kwargs: Any):
            bound = full.bind(*args, **kwargs)
            bound.apply_defaults()
            values = declaration(**{p.name: bound.arguments.pop(p.name) for p in group})
            return factory(*bound.args, **bound.kwargs, **{name: values})

        wrapped.__signature__ = full  # type: ignore[attr-defined]
        return wrapped

    return wrap


def with_shared(group: Sequence[inspect.Parameter], *, first: bool = False, **defaults: Any) -> Callable[[Callable], Callable]:
    """Give a factory ``f(task, *, own..., **shared)`` the keyword parameters of ``group``, after its own (``first``: before them).

    ``defaults`` overrides a shared default for this algorithm (e.g. FedRGD's ``norm='gn'``).
    The wrapped factory fills in the defaults, so ``f(task, local_epochs=1)`` works as well as
    a call through the registry; ``shared`` holds every parameter of the group.
    """
    names = [p.name for p in group]
    unknown = set(defaults) - set(names)
    if unknown:
        raise ValueError(f"defaults for parameters not shared here: {sorted(unknown)}")

    def wrap(factory: Callable) -> Callable:
        signature = inspect.signature(factory, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        shared = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, default=defaults.get(p.name, p.default)) for p in group]
        positional, keywords = [p for p in own if p.kind is not p.KEYWORD_ONLY], [p for p in own if p.kind is p.KEYWORD_ONLY]
        full = signature.replace(parameters=[*positional, *shared, *keywords] if first else [*own, *shared])

        @functools.wraps(factory)
        def wrapped(*args: Any, **kwargs: Any):
            bound = full.bind(*args, **kwargs)
            bound.apply_defaults()
            return factory(*bound.args, **bound.kwargs)

        wrapped.__signature__ = full  # type: ignore[attr-defined]
        return wrapped

    return wrap


def check_group_channels(field: str, width: int, norm: str, group_channels: int) -> None:
    """ConfigError unless Lambda (``algorithm.norm_group_channels``) divides the ``width`` channels its PN or GN layers normalize."""
    if norm in ("pn", "pn-eq3", "gn") and width % group_channels:
        divisors = [d for d in range(1, width + 1) if width % d == 0]
        raise ConfigError(
            f"algorithm.norm_group_channels: Lambda = {group_channels} channels per group does not divide algorithm.{field} = {width} "
            f"(the MFCL paper's Sec. 2.2: a layer of C channels has C / Lambda groups); accepted with this width: {', '.join(map(str, divisors))}"
        )
