"""The algorithm registry: name -> factory; hyperparameters come from the factory's signature.

A factory's keyword-only parameters after ``task`` are its hyperparameters, each
annotated with its type, bounds and description (``Annotated[float, Field(gt=0,
description=...)]``). From them come the ``[algorithm]`` config fields, their
validation, and the help of ``fedprior algorithms``. ``local_epochs``,
``batch_size`` and ``device`` are not algorithm fields: the runtime passes the
``[federation]`` values and the run's torch device to a factory that declares them,
so these keys mean the same for every algorithm. Every factory declares ``device``
(the registry refuses one that does not, :func:`require_device`): an algorithm that
left it out would train on the CPU whatever ``run.device`` says. ``precision``
(``run.precision``, :mod:`fedprior.algorithms.precision`) reaches the factories that
declare it the same way; asking another algorithm for ``'bf16'`` is a ConfigError
(:meth:`AlgorithmSpec.build`), never a silent float32 run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from fedprior.algorithms.base import Algorithm, Task
from fedprior.algorithms.baselines import linear_probe, zero_shot
from fedprior.algorithms.central import central
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.fedbm import fedbm
from fedprior.algorithms.feddb import feddb
from fedprior.algorithms.feddyn import feddyn
from fedprior.algorithms.fedetf import fedetf
from fedprior.algorithms.fedmatch import fedmatch
from fedprior.algorithms.fednh import fednh
from fedprior.algorithms.fedntd import fedntd
from fedprior.algorithms.fedproto import fedproto
from fedprior.algorithms.fedprox import fedprox
from fedprior.algorithms.fedrep import fedrep
from fedprior.algorithms.fedrgd import fedrgd
from fedprior.algorithms.fedrod import fedrod
from fedprior.algorithms.fedsimclr import fedsimclr
from fedprior.algorithms.fedswav import fedswav
from fedprior.algorithms.fixmatch import fedavg_labeled, fixmatch
from fedprior.algorithms.fst_cbdg import fst_cbdg
from fedprior.algorithms.mfcl import mfcl
from fedprior.algorithms.moon import moon
from fedprior.algorithms.orchestra import orchestra
from fedprior.algorithms.raw_pixels import raw_pixels
from fedprior.algorithms.scaffold import scaffold
from fedprior.algorithms.semifl import semifl
from fedprior.errors import ConfigError
from fedprior.validation import CheckedModel, describe_validation_error

RUNTIME_PROVIDED = ("local_epochs", "batch_size", "device", "precision")

DEVICE_PARAMETER = 'device: torch.device = torch.device("cpu")'


RETIRED_FIELDS = {
    "norm_groups": (
        "algorithm.norm_groups was the number of channel groups of PN and GN; it is now algorithm.norm_group_channels, the paper's "
        "Lambda = channels per group (mfcl.md Sec. 2.2, Eq. 3), and a layer of C channels has C / Lambda groups. The old default of "
        "32 groups was Lambda = 2 at 64 channels but Lambda = 1 (InstanceNorm) at 16; replace norm_groups = G by norm_group_channels = "
        "width / G (default 2)"
    ),
}
"""Fields an algorithm no longer has -> what replaces them (a config or run directory that still names one fails with this)."""


class Hyperparameters(CheckedModel):
    """The base of every algorithm's hyperparameter model: unknown keys refused, numbers finite and not bool."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    factory: Callable[..., Algorithm]
    centralized: bool = False
    """Trains on the pooled training data as one client (a centralized baseline)."""

    @property
    def summary(self) -> str:
        return (inspect.getdoc(self.factory) or "").splitlines()[0]

    def hyperparameters(self) -> dict[str, inspect.Parameter]:
        params = inspect.signature(self.factory, eval_str=True).parameters
        return {n: p for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n not in RUNTIME_PROVIDED}

    def config_model(self) -> type[BaseModel]:
        """A pydantic model of the hyperparameters (unknown keys rejected)."""
        fields: dict[str, Any] = {n: (p.annotation, p.default) for n, p in self.hyperparameters().items()}
        return create_model(f"{self.name}_hyperparameters", __base__=Hyperparameters, **fields)

    def validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Checked hyperparameters with defaults filled in; ConfigError naming the field otherwise."""
        retired = [k for k in values if k in RETIRED_FIELDS and k not in self.hyperparameters()]
        if retired:
            raise ConfigError(" ".join(RETIRED_FIELDS[k] for k in retired))
        try:
            return self.config_model()(**values).model_dump()
        except ValidationError as error:
            accepted = list(self.hyperparameters())
            raise ConfigError(describe_validation_error(error, ("algorithm",), lambda _: accepted)) from None

    def build(self, task: Task, values: dict[str, Any], **runtime: Any) -> Algorithm:
        """The algorithm with checked hyperparameters and the runtime-provided keys its factory declares."""
        needed = inspect.signature(self.factory).parameters
        if runtime.get("precision", "fp32") != "fp32" and "precision" not in needed:
            raise ConfigError(
                f"run.precision: algorithm '{self.name}' trains and evaluates in fp32 only (its factory does not take 'precision'); "
                f"accepted for it: fp32; bf16 for: {', '.join(supports_precision())}"
            )
        provided = {k: v for k, v in runtime.items() if k in needed}
        return self.factory(task, **self.validate(values), **provided)


def require_device(spec: AlgorithmSpec) -> AlgorithmSpec:
    """``spec`` if its factory declares the keyword parameter ``device`` (the run's torch device); ConfigError otherwise.

    The runtime passes ``run.device`` only to a factory that declares it; one that does not
    would silently train on the CPU with ``run.device = 'cuda'``. The factory must also put
    its models and the tensors it computes with on that device (tested for every shipped
    algorithm in tests/test_device.py); States and Replies stay on the CPU.
    """
    parameter = inspect.signature(spec.factory).parameters.get("device")
    if parameter is None or parameter.kind not in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
        raise ConfigError(
            f"algorithm '{spec.name}': the factory must declare the keyword parameter '{DEVICE_PARAMETER}' "
            "and build its models and tensors there (the runtime passes run.device to it; "
            "without it the algorithm would train on the CPU whatever run.device says)"
        )
    return spec


ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: require_device(spec)
    for spec in (
        AlgorithmSpec("fedavg", fedavg),
        AlgorithmSpec("fedprox", fedprox),
        AlgorithmSpec("scaffold", scaffold),
        AlgorithmSpec("fedntd", fedntd),
        AlgorithmSpec("fst-cbdg", fst_cbdg),
        AlgorithmSpec("zero-shot", zero_shot),
        AlgorithmSpec("linear-probe", linear_probe, centralized=True),
        AlgorithmSpec("mfcl", mfcl),
        AlgorithmSpec("fedsimclr", fedsimclr),
        AlgorithmSpec("fedswav", fedswav),
        AlgorithmSpec("orchestra", orchestra),
        AlgorithmSpec("raw-pixels", raw_pixels),
        AlgorithmSpec("moon", moon),
        AlgorithmSpec("feddb", feddb),
        AlgorithmSpec("fedavg-labeled", fedavg_labeled),
        AlgorithmSpec("fixmatch", fixmatch),
        AlgorithmSpec("fedmatch", fedmatch),
        AlgorithmSpec("fedrgd", fedrgd),
        AlgorithmSpec("semifl", semifl),
        AlgorithmSpec("fedbm", fedbm),
        AlgorithmSpec("feddyn", feddyn),
        AlgorithmSpec("fedrep", fedrep),
        AlgorithmSpec("fedrod", fedrod),
        AlgorithmSpec("fednh", fednh),
        AlgorithmSpec("fedproto", fedproto),
        AlgorithmSpec("fedetf", fedetf),
        AlgorithmSpec("central", central, centralized=True),
    )
}


def supports_precision() -> list[str]:
    """The registered algorithms whose factory takes ``precision`` (``run.precision = 'bf16'`` runs them under autocast)."""
    return [name for name, spec in ALGORITHMS.items() if "precision" in inspect.signature(spec.factory).parameters]


def algorithm_spec(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ConfigError(f"algorithm.name: unknown algorithm '{name}'; accepted: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


REGISTERED_HERE: set[str] = set()
"""Names registered from user code in this process (other processes, e.g. Flower's nodes, do not know them)."""

NAME_PATTERN = r"[a-z0-9][a-z0-9_.-]*"
"""What an algorithm name may be: lowercase letters, digits, '-', '_', '.' (a config value and a folder name)."""


def register_algorithm(spec: AlgorithmSpec, *, replace: bool = False) -> AlgorithmSpec:
    """Add ``spec`` to ``ALGORITHMS`` (an algorithm from user code), after checking that its factory can be configured.

    The factory takes the :class:`Task` first, then keyword-only hyperparameters, each with
    an annotation and a default (``Annotated[float, Field(gt=0, description=...)] = 0.1``),
    and the runtime-provided ``device: torch.device`` (the run's ``run.device``, resolved),
    where it must build its models and the tensors it computes with, returning States and
    Replies on the CPU; it may declare the runtime-provided ``local_epochs`` and ``batch_size``.
    """
    import re

    if not re.fullmatch(NAME_PATTERN, spec.name):
        raise ConfigError(f"algorithm name {spec.name!r}: use lowercase letters, digits, '-', '_' or '.' (e.g. 'my-fedavg')")
    if spec.name in ALGORITHMS and not replace:
        raise ConfigError(f"algorithm '{spec.name}' is already registered; pass replace=True to replace it")
    if not callable(spec.factory):
        raise ConfigError(f"algorithm '{spec.name}': the factory must be a function (task, *, hyperparameters...) -> Algorithm")
    params = list(inspect.signature(spec.factory).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ConfigError(f"algorithm '{spec.name}': the factory's first parameter must be the task (positional)")
    require_device(spec)
    for name, param in spec.hyperparameters().items():
        if param.default is param.empty:
            raise ConfigError(f"algorithm '{spec.name}': hyperparameter '{name}' needs a default value")
    try:
        spec.validate({})  # the defaults pass their own annotations
    except Exception as error:
        raise ConfigError(f"algorithm '{spec.name}': its hyperparameters cannot be checked: {error}") from None
    ALGORITHMS[spec.name] = spec
    REGISTERED_HERE.add(spec.name)
    return spec
