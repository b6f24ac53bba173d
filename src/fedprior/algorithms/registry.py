"""The algorithm registry: name -> factory; hyperparameters come from the factory's signature.

A factory's keyword-only parameters after ``task`` are its hyperparameters, each
annotated with its type, bounds and description (``Annotated[float, Field(gt=0,
description=...)]``). From them come the ``[algorithm]`` config fields, their
validation, and the help of ``fedprior algorithms``. ``local_epochs``,
``batch_size`` and ``device`` are not algorithm fields: the runtime passes the
``[federation]`` values and the run's torch device to a factory that declares them,
so these keys mean the same for every algorithm.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from fedprior.algorithms.base import Algorithm, Task
from fedprior.algorithms.baselines import linear_probe, zero_shot
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.fedntd import fedntd
from fedprior.algorithms.fst_cbdg import fst_cbdg
from fedprior.algorithms.fedprox import fedprox
from fedprior.algorithms.fedsimclr import fedsimclr
from fedprior.algorithms.fedswav import fedswav
from fedprior.algorithms.mfcl import mfcl
from fedprior.algorithms.moon import moon
from fedprior.algorithms.orchestra import orchestra
from fedprior.algorithms.scaffold import scaffold
from fedprior.errors import ConfigError
from fedprior.validation import describe_validation_error

RUNTIME_PROVIDED = ("local_epochs", "batch_size", "device")


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
        fields = {n: (p.annotation, p.default) for n, p in self.hyperparameters().items()}
        return create_model(f"{self.name}_hyperparameters", __config__=ConfigDict(extra="forbid"), **fields)

    def validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Checked hyperparameters with defaults filled in; ConfigError naming the field otherwise."""
        try:
            return self.config_model()(**values).model_dump()
        except ValidationError as error:
            accepted = list(self.hyperparameters())
            raise ConfigError(describe_validation_error(error, ("algorithm",), lambda _: accepted)) from None

    def build(self, task: Task, values: dict[str, Any], **runtime: Any) -> Algorithm:
        """The algorithm with checked hyperparameters and the runtime-provided keys its factory declares."""
        needed = inspect.signature(self.factory).parameters
        provided = {k: v for k, v in runtime.items() if k in needed}
        return self.factory(task, **self.validate(values), **provided)


ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec
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
        AlgorithmSpec("moon", moon),
    )
}


def algorithm_spec(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ConfigError(f"algorithm.name: unknown algorithm '{name}'; accepted: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]
