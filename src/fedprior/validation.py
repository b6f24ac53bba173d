"""Checked config models and turning pydantic's validation errors into one line per problem that names the field."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError


def _is_number(annotation: Any) -> bool:
    """Whether a field's type is int or float (possibly optional), not bool."""
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return bool(args) and all(a in (int, float) for a in args)
    return False


class CheckedModel(BaseModel):
    """The base of every config model: numbers are finite and ``true``/``false`` is not a number.

    One mechanism for every numeric field, the algorithms' hyperparameters included:
    pydantic's ``allow_inf_nan=False`` refuses inf and NaN in float fields, and the
    validator below refuses a bool where an int or float is expected (pydantic's lax
    mode would read TOML's ``rounds = true`` as 1 round).
    """

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _bool_is_not_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _is_number(field.annotation):
            raise PydanticCustomError("bool_not_number", "input should be a number, not true or false")
        return value


class ConfigSection(CheckedModel):
    """A section of the experiment config: unknown keys are refused, fields carry their docstrings, assignments are checked."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


def describe_validation_error(error: ValidationError, prefix: tuple[str, ...], accepted_keys: Callable[[tuple[str, ...]], Iterable[str]]) -> str:
    """``field.path: what is wrong (got value)``; unknown keys list ``accepted_keys(parent path)``."""
    lines = []
    for problem in error.errors():
        loc = (*prefix, *(str(p) for p in problem["loc"]))
        if problem["type"] == "extra_forbidden":
            accepted = ", ".join(accepted_keys(loc[:-1])) or "none"
            lines.append(f"{'.'.join(loc)}: unknown key; accepted: {accepted}")
        else:
            lines.append(f"{'.'.join(loc)}: {bound_message(problem).lower()} (got {problem.get('input')!r})")
    return "; ".join(lines)


BOUNDS = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}
"""Pydantic's error types of a numeric bound -> the key of the bound in the error's context."""


def bound_message(problem: Mapping[str, Any]) -> str:
    """Pydantic's message, with a float bound written as Python writes it: ``1e-38``, where pydantic writes 38 zeros
    (``greater than or equal to 0.00000000000000000000000000000000000001``, reliability probe 5's R4)."""
    key = BOUNDS.get(problem["type"])
    bound = (problem.get("ctx") or {}).get(key) if key else None
    if not isinstance(bound, float):
        return str(problem["msg"])
    written = str(int(bound)) if bound.is_integer() and abs(bound) < 1e16 else repr(bound)
    words = str(problem["msg"]).rsplit(" ", 1)[0]  # "Input should be greater than or equal to"
    return f"{words} {written}"
