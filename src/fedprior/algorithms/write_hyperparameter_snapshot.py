"""Writes ``algorithms/hyperparameters.json``, the shipped algorithms' hyperparameters that ``presets show`` reads without torch.

Rerun it after changing a shipped algorithm's hyperparameters (``tests/algorithms/test_hyperparameter_snapshot.py`` fails until then):

    python -m fedprior.algorithms.write_hyperparameter_snapshot

It sits above the registry (it imports every shipped algorithm through it); the registry reads the file through
:mod:`fedprior.algorithms.hyperparameter_snapshot`, which imports nothing of the registry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fedprior.algorithms.hyperparameter_snapshot import SNAPSHOT, describe
from fedprior.algorithms.registry import ALGORITHMS, is_shipped


def current_snapshot() -> dict[str, dict[str, dict[str, Any]]]:
    """The snapshot the shipped factories give now (imports every algorithm, hence torch)."""
    return {name: describe(spec.config_model(from_snapshot=False)) for name, spec in ALGORITHMS.items() if is_shipped(spec)}


def write_snapshot() -> Path:
    """Write ``hyperparameters.json`` from the shipped factories (one field a line, so that diffs stay small)."""
    snapshot = current_snapshot()
    lines = ["{"]
    for i, (name, fields) in enumerate(snapshot.items()):
        lines.append(f"  {json.dumps(name)}: {{")
        for j, (key, spec) in enumerate(fields.items()):
            lines.append(f"    {json.dumps(key)}: {json.dumps(spec, ensure_ascii=False)}{',' if j < len(fields) - 1 else ''}")
        lines.append("  }" + ("," if i < len(snapshot) - 1 else ""))
    lines.append("}")
    SNAPSHOT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return SNAPSHOT


if __name__ == "__main__":
    print(f"wrote {write_snapshot()}")
