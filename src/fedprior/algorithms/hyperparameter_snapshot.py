"""The shipped algorithms' hyperparameters as data, so that a preset is checked without importing torch.

A factory's signature is the one declaration of an algorithm's hyperparameters
(:mod:`fedprior.algorithms.registry`), but reading it imports the algorithm's module, and
with it torch (about 2 s of a command's start). ``fedprior presets show`` needs only the
fields: their type, bounds, default and description. ``hyperparameters.json`` beside this
module holds them for every shipped algorithm, written from the factories by
``python -m fedprior.algorithms.hyperparameter_snapshot`` (tests/algorithms/test_hyperparameter_snapshot.py fails
when it no longer matches them), and :func:`snapshot_model` turns an entry back into the
same pydantic model the factory's signature gives (the same JSON schema, the same checks).

Only the commands that need nothing else of an algorithm read it
(:func:`fedprior.algorithms.registry.hyperparameters_from_snapshot`); a run, which
builds the algorithm anyway, reads the factory.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

SNAPSHOT = Path(__file__).with_name("hyperparameters.json")

BOUNDS = {"Gt": "gt", "Ge": "ge", "Lt": "lt", "Le": "le", "MinLen": "min_length", "MaxLen": "max_length"}
"""annotated_types' constraints (what ``Field(gt=..., ...)`` puts in a field's metadata) -> the ``Field`` keyword."""

SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


def type_name(annotation: Any, where: str) -> Any:
    """A field's type as JSON: 'int', 'float', 'bool', 'str', {"literal": [...]}, {"optional": T}; ValueError for any other."""
    for name, scalar in SCALARS.items():
        if annotation is scalar:
            return name
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return {"literal": list(args)}
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return {"optional": type_name(next(a for a in args if a is not type(None)), where)}
    raise ValueError(f"{where}: type {annotation!r} has no snapshot form; extend fedprior.algorithms.hyperparameter_snapshot.type_name")


def type_of(name: Any) -> Any:
    """The inverse of :func:`type_name`."""
    if isinstance(name, str):
        return SCALARS[name]
    if "literal" in name:
        return Literal[tuple(name["literal"])]
    return type_of(name["optional"]) | None


def describe(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    """Each field of a hyperparameter model: its type, default, bounds and description (JSON)."""
    out = {}
    for key, field in model.model_fields.items():
        where = f"{model.__name__}.{key}"
        bounds = {}
        for meta in field.metadata:
            kind = type(meta).__name__
            if kind not in BOUNDS:
                raise ValueError(f"{where}: constraint {meta!r} has no snapshot form; extend fedprior.algorithms.hyperparameter_snapshot.BOUNDS")
            bounds[BOUNDS[kind]] = getattr(meta, BOUNDS[kind])
        out[key] = {"type": type_name(field.annotation, where), "default": field.default, "description": field.description or "", **bounds}
    return out


def snapshot_model(name: str, fields: dict[str, dict[str, Any]], base: type[BaseModel]) -> type[BaseModel]:
    """The pydantic model of ``fields`` (an entry of the snapshot), on ``base``: what the factory's signature gives."""
    built: dict[str, Any] = {}
    for key, spec in fields.items():
        bounds = {k: v for k, v in spec.items() if k not in ("type", "default", "description")}
        annotation: Any = Annotated[type_of(spec["type"]), Field(description=spec["description"] or None, **bounds)]  # built at run time
        built[key] = (annotation, spec["default"])
    return create_model(f"{name}_hyperparameters", __base__=base, **built)


@functools.cache
def read_snapshot() -> dict[str, dict[str, dict[str, Any]]]:
    """The snapshot's algorithms -> fields ({} where the file is missing: every algorithm is then read from its factory)."""
    if not SNAPSHOT.is_file():
        return {}
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))
