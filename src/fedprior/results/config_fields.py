"""Config dicts as flat ``section.key`` fields, and what differs between two of them.

Plain dicts only (no config models, no torch), so that reading run folders
(``fedprior compare``) stays light; resume checks and reports use the same functions.
"""

from __future__ import annotations

from typing import Any


def flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{"section.key": (before, after)}`` for every field whose value differs (None: absent)."""
    a, b = flatten(before), flatten(after)
    return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}
