"""Turning pydantic's validation errors into one line per problem that names the field."""

from __future__ import annotations

from typing import Callable, Iterable

from pydantic import ValidationError


def describe_validation_error(
    error: ValidationError, prefix: tuple[str, ...], accepted_keys: Callable[[tuple[str, ...]], Iterable[str]]
) -> str:
    """``field.path: what is wrong (got value)``; unknown keys list ``accepted_keys(parent path)``."""
    lines = []
    for problem in error.errors():
        loc = (*prefix, *(str(p) for p in problem["loc"]))
        if problem["type"] == "extra_forbidden":
            accepted = ", ".join(accepted_keys(loc[:-1])) or "none"
            lines.append(f"{'.'.join(loc)}: unknown key; accepted: {accepted}")
        else:
            lines.append(f"{'.'.join(loc)}: {problem['msg'].lower()} (got {problem.get('input')!r})")
    return "; ".join(lines)
