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
ROOT = SOURCE.parents[1]
DOCS_PATH = re.compile(r"\bdocs/[\w./-]*\w\.md\b")
OUTSIDE = re.compile(r"DESIGN\.md|IMPLEMENTATION-NOTES|\.\./shared|\bshared/papers|\b(?:feddb|fedbm|fst-cbdg)\.txt|fst-cbdg-iclr|papers/mfcl\.md")
"""Files a reader of a clone does not have (the project's design notes, the papers' full texts and the notes on them):
the source, the docs and the benchmarks cite a paper by its title, section and equation instead."""
PAPER_MFCL = re.compile(r"(?<!docs/)\bmfcl\.md")
"""In the source and the benchmarks ``mfcl.md`` is the MFCL paper's text unless it is ``docs/mfcl.md`` (in docs/ it is the page beside)."""
CHECKED = (*SOURCE.rglob("*.py"), *SOURCE.rglob("*.json"), *SOURCE.rglob("*.toml"), *ROOT.glob("benchmarks/*.py"))
"""What the repository ships to a reader besides docs/: the package (code, presets, the hyperparameter snapshot) and the benchmark scripts."""


def outside_citations(text: str, in_docs: bool) -> list[str]:
    """The names in ``text`` of files outside the repository."""
    return OUTSIDE.findall(text) + ([] if in_docs else PAPER_MFCL.findall(text))


def test_the_outside_check_sees_each_kind_of_file():
    cited = "DESIGN.md; IMPLEMENTATION-NOTES.md; ../shared/x; feddb.txt 5.1; fedbm.txt; fst-cbdg.txt; fst-cbdg-iclr-submission.md; mfcl.md"
    assert len(outside_citations(cited, in_docs=False)) == 8 and len(outside_citations(cited, in_docs=True)) == 7
    fine = "the FedDB paper, Sec. 5.1; docs/mfcl.md; papers/feddb/tables.py; merges.txt"
    assert outside_citations(fine, in_docs=False) == [] and outside_citations(fine + "; [MFCL](mfcl.md)", in_docs=True) == []


def test_the_source_cites_only_files_that_are_in_the_repository():
    """A docs/*.md page named in the source exists; nothing in the source, the benchmarks or docs/ names a file that lives
    outside the repository."""
    missing, outside = [], []
    for path in sorted(CHECKED):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        missing += [f"{where}: {page}" for page in sorted(set(DOCS_PATH.findall(text))) if not (ROOT / page).is_file()]
        outside += [f"{where}: {name}" for name in outside_citations(text, in_docs=False)]
    for path in sorted([*ROOT.glob("docs/**/*.md"), ROOT / "README.md"]):
        outside += [f"{path.relative_to(ROOT)}: {name}" for name in outside_citations(path.read_text(encoding="utf-8"), in_docs=True)]
    assert not missing, f"docs pages cited but absent: {missing}"
    assert not outside, f"files outside the repository cited: {outside}"


TEST_PATH = re.compile(r"\btests/[\w/]*\w\.py\b")


def test_every_test_file_named_in_the_docs_and_the_source_exists():
    """A ``tests/...py`` path in docs/, the README, the source or the benchmarks names a file of today's test tree
    (the tree mirrors src/, tests/test_layout.py; a path written before a move would send a reader nowhere)."""
    named = [*sorted(ROOT.glob("docs/**/*.md")), ROOT / "README.md", *sorted(CHECKED), *sorted(ROOT.glob("benchmarks/*.sh"))]
    missing = [
        f"{path.relative_to(ROOT)}: {test}"
        for path in named
        for test in sorted(set(TEST_PATH.findall(path.read_text(encoding="utf-8"))))
        if not (ROOT / test).is_file()
    ]
    assert not missing, f"test files named but absent: {missing}"
