"""A lower layer never imports a higher one (DESIGN.md), lazy imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "fedprior"

# package -> the packages above it that it must not import
FORBIDDEN = {
    "runtime": ("experiments", "papers", "cli", "flower"),
    "flower": ("experiments", "papers", "cli"),
}


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_runtime_never_imports_the_layers_above_it(package):
    offenders = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in sorted((SRC / package).rglob("*.py"))
        for module in sorted(imported_modules(path))
        if any(module == f"fedprior.{above}" or module.startswith(f"fedprior.{above}.") for above in FORBIDDEN[package])
    ]
    assert offenders == []
