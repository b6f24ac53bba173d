"""Every equation of a method is one hop from its module docstring: the Sphinx references there resolve.

Checked for every module of ``fedprior.algorithms``: ``:func:``, ``:meth:``, ``:class:``, ``:mod:``
and ``:data:`` references in the module docstring, either fully qualified (``~fedprior.x.y``) or
a name of the module itself (``balanced_counts``, ``FstObjective.loss``).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ALGORITHMS = Path(__file__).parents[1] / "src" / "fedprior" / "algorithms"
REFERENCE = re.compile(r":(?:func|meth|class|mod|data):`~?([A-Za-z_][\w.]*)`")
MODULES = sorted(p for p in ALGORITHMS.rglob("*.py") if p.name != "__init__.py")


def resolve(name: str, module: object) -> bool:
    """Whether ``name`` is a module, or an attribute path from a module or from ``module``."""
    if not name.startswith("fedprior."):
        target: object = module
        for part in name.split("."):
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    return False


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ALGORITHMS)))
def test_module_docstring_references_resolve(path):
    name = "fedprior." + ".".join(path.relative_to(ALGORITHMS.parent).with_suffix("").parts)
    module = importlib.import_module(name)
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    broken = [ref for ref in REFERENCE.findall(docstring) if not resolve(ref, module)]
    assert broken == []


def test_the_four_papers_methods_link_their_equations():
    for method in ("feddb", "fst_cbdg", "fedbm", "mfcl"):
        docstring = ast.get_docstring(ast.parse((ALGORITHMS / f"{method}.py").read_text())) or ""
        assert "Equations" in docstring and len(REFERENCE.findall(docstring)) >= 4, method


SOURCE = Path(__file__).parents[1] / "src" / "fedprior"
DOCS_PATH = re.compile(r"\bdocs/[\w./-]*\w\.md\b")
OUTSIDE = ("IMPLEMENTATION-NOTES",)
"""Files a reader of a clone does not have (the project's own notes): the source must not send readers there."""


def test_the_source_cites_only_files_that_are_in_the_repository():
    """A docs/*.md page named in the source exists; nothing names a file that lives outside the repository."""
    missing, outside = [], []
    for path in sorted(SOURCE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(SOURCE.parents[1])
        missing += [f"{where}: {page}" for page in sorted(set(DOCS_PATH.findall(text))) if not (SOURCE.parents[1] / page).is_file()]
        outside += [f"{where}: {name}" for name in OUTSIDE if name in text]
    assert not missing, f"docs pages cited but absent: {missing}"
    assert not outside, f"files outside the repository cited: {outside}"
