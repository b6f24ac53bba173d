"""Layers never import upward, and no module of fedprior takes part in an import circle.

The order, lowest first; a module may import its own layer and any layer below it:

    foundation (fedprior/*.py: errors, validation, seeding, atomic, task, ...)
    < data, partition, models   (siblings: none imports another)
    < encoders < algorithms < runtime, privacy (siblings) < flower
    < results (the run folder, its log and report, compare) < experiments (config, build, run, grids of runs)
    < reproduce (paper tables, findings, verification) < papers
    < api (fedprior/__init__.py, api.py), cli (siblings)

**Circles.** Every import counts, in either check: a lazy one inside a function still makes a circle a reader
must untangle, and an ``if TYPE_CHECKING`` one is still a dependency of the file (issue 34 names
``compare.py <-> compare_groups.py``, whose one direction was type-only). A module's edges are the modules
it names: ``from fedprior.x import y`` is an edge to ``fedprior.x.y`` where that is a module, else to
``fedprior.x`` (a package's ``__init__``, whose own imports are its edges). The parent packages Python
initialises before a module (``fedprior/__init__.py`` for every ``fedprior.*``) are not edges: otherwise every
module would import the whole API through ``fedprior/__init__.py``.

Inside ``algorithms/`` the same holds between its parts (:data:`ALGORITHM_PARTS`): ``base``
< ``pieces`` (reusable pieces) < ``engines`` (shared training engines) < the method modules
< ``registry`` < ``write_hyperparameter_snapshot`` (a tool that imports every algorithm through the registry); a method module may build on another (central on fedavg), a piece or an
engine never imports a method.

Each ``import`` and ``from ... import`` anywhere in a module (top level, in a function, under
``if TYPE_CHECKING``), relative ones resolved, is parsed with ``ast``; ``from fedprior import x``
counts as importing ``fedprior.x`` when that is a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "fedprior"

RANK = {
    "foundation": 0,
    "data": 1,
    "partition": 1,
    "models": 1,
    "encoders": 2,
    "algorithms": 3,
    "runtime": 4,
    "privacy": 4,  # the [privacy] section and the DP wrapper: above algorithms, below flower and experiments
    "flower": 5,
    "results": 6,
    "experiments": 7,
    "reproduce": 8,
    "papers": 9,
    "api": 10,
    "cli": 10,
}

KNOWN_UPWARD: dict[tuple[str, str], str] = {}
"""(module, imported module) -> why it is still allowed. Must only shrink: each entry is checked to still exist."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (SRC / relative).with_suffix(".py").is_file() or (SRC / relative / "__init__.py").is_file() or (SRC / relative).is_dir()


def layer(module: str) -> str | None:
    """The layer of a fedprior module name (None: not fedprior's)."""
    parts = module.split(".")
    if parts[0] != "fedprior":
        return None
    if len(parts) == 1 or parts[1] == "api":
        return "api"
    if parts[1] == "__main__":
        return "cli"
    return parts[1] if parts[1] in RANK else "foundation"


def imports(source: str, me: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every import in the ``source`` of module ``me``, anywhere in it."""
    package = me if is_package else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.append((node.lineno, sub if layer(sub) and is_module(sub) else module))
    return found


def upward_imports() -> dict[tuple[str, str], str]:
    """(module, imported module) -> 'file:line: layer imports layer' for every import of a higher (or sibling) layer."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        me = module_name(path)
        mine = layer(me)
        assert mine is not None
        for line, module in imports(path.read_text(), me, path.name == "__init__.py"):
            theirs = layer(module)
            if theirs is None or theirs == mine or RANK[theirs] < RANK[mine]:
                continue
            out[(me, module)] = f"{path.relative_to(SRC)}:{line}: {mine} imports {theirs} ({module})"
    return out


def test_every_package_has_a_layer():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert packages <= set(RANK), f"give these packages a layer: {sorted(packages - set(RANK))}"


def test_no_layer_imports_a_higher_or_sibling_layer():
    offenders = [where for key, where in upward_imports().items() if key not in KNOWN_UPWARD]
    assert offenders == []


def test_known_exceptions_still_exist():
    gone = sorted(set(KNOWN_UPWARD) - set(upward_imports()))
    assert gone == [], f"no longer imported upward, remove from KNOWN_UPWARD: {gone}"


ALGORITHM_PARTS = {"base": 0, "pieces": 1, "engines": 2, "registry": 4, "write_hyperparameter_snapshot": 5}
"""The rank of each part of ``fedprior.algorithms``; every other module there is a method (rank 3)."""


def algorithm_part(module: str) -> tuple[str, int] | None:
    """(part, rank) of a module of ``fedprior.algorithms`` (None: outside it, or the package itself)."""
    parts = module.split(".")
    if parts[:2] != ["fedprior", "algorithms"] or len(parts) < 3:
        return None
    return (parts[2], ALGORITHM_PARTS[parts[2]]) if parts[2] in ALGORITHM_PARTS else ("method", 3)


def test_algorithms_parts_never_import_upward():
    offenders = []
    for path in sorted((SRC / "algorithms").rglob("*.py")):
        me = module_name(path)
        mine = algorithm_part(me)
        if mine is None:
            continue
        for line, module in imports(path.read_text(), me, path.name == "__init__.py"):
            theirs = algorithm_part(module)
            if theirs is not None and theirs[1] > mine[1]:
                offenders.append(f"{path.relative_to(SRC)}:{line}: {mine[0]} imports {theirs[0]} ({module})")
    assert offenders == []


def test_algorithms_parts_check_sees_a_piece_importing_a_method():
    found = imports("from fedprior.algorithms.fedavg import fedavg\n", "fedprior.algorithms.pieces.dma")
    assert [algorithm_part(m) for _, m in found] == [("method", 3)]
    assert algorithm_part("fedprior.algorithms.pieces.dma") == ("pieces", 1)
    assert algorithm_part("fedprior.algorithms.engines.supervised") == ("engines", 2)


def test_the_check_sees_lazy_relative_and_type_checking_imports():
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from fedprior.experiments.config import ExperimentConfig\n"
        "def f():\n    from ..algorithms import base\n    import fedprior.flower\n    from fedprior import papers\n"
    )
    found = {module for _, module in imports(source, "fedprior.models.probe")}
    assert {"fedprior.experiments.config", "fedprior.algorithms.base", "fedprior.flower", "fedprior.papers"} <= found
    assert [layer(module) for module in sorted(found) if layer(module)] == ["algorithms", "experiments", "flower", "papers"]


def resolved(module: str) -> str:
    """``module``, or the fedprior module that defines it (``fedprior.errors.ConfigError`` -> ``fedprior.errors``)."""
    while "." in module and not is_module(module):
        module = module.rpartition(".")[0]
    return module


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the fedprior modules it imports anywhere (see the module docstring), from ``{module: (source, is_package)}``."""
    graph: dict[str, set[str]] = {}
    for me, (source, is_package) in sources.items():
        graph[me] = {resolved(m) for _, m in imports(source, me, is_package) if layer(m) is not None} - {me}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected component of more than one module, sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in graph:
                continue
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def fedprior_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(path): (path.read_text(), path.name == "__init__.py") for path in sorted(SRC.rglob("*.py"))}


def test_no_import_circles():
    found = circles(import_graph(fedprior_sources()))
    assert found == [], "modules that import each other (move the shared name down to a file both can import): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_check_sees_lazy_and_type_checking_circles():
    """The three-module circle of issue 34 (report -> run_dir -> run_log -> report), written as a lazy and a type-only import."""
    a, b, c, d = "fedprior.results.report", "fedprior.results.run_dir", "fedprior.results.run_log", "fedprior.results.compare"
    sources = {
        a: ("from fedprior.results.run_dir import RunDir\nfrom fedprior.errors import ConfigError\n", False),
        b: ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fedprior.results.run_log import RunLog\n", False),
        c: ("def f():\n    from fedprior.results import report\n", False),
        d: ("from fedprior.results.report import accuracy_curve\n", False),
    }
    assert circles(import_graph(sources)) == [sorted([a, b, c])]
    sources[c] = ("def f():\n    from fedprior.results import compare\n", False)
    assert circles(import_graph(sources)) == [sorted([a, b, c, d])]
    sources[c] = ("from fedprior.errors import ConfigError\n", False)
    assert circles(import_graph(sources)) == []
