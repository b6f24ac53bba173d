"""The test tree mirrors the source: ``tests/a/b/test_c.py`` checks ``src/fedprior/a/b/c.py`` (or the package ``a/b/c/``).

A file may add an aspect after the module's name (``tests/algorithms/test_fedbm_walk.py`` checks
``algorithms/fedbm.py``); tests of the scripts in ``benchmarks/`` sit in ``tests/benchmarks/`` by the same rule; code
the tests share lives in ``tests/support/``, fixtures in ``conftest.py``. So the tests of a module are found by its
path, and a file named after how a bug was found has no place.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Checks of the whole project rather than of one module.
CROSS_CUTTING = {
    "test_docs_numbers.py",  # the docs' tables quote the committed results
    "test_docstring_links.py",  # the Sphinx references of the docstrings resolve
    "test_layers.py",  # no layer imports a higher one, no import circles
    "test_layout.py",  # this file
    "test_lock.py",  # requirements.lock is what the README installs
}


def names_a_module(folder: Path, name: str) -> bool:
    """Whether ``name`` (``c`` or ``c_aspect``) begins with a module ``c.py``, a package ``c/`` or a script ``c.sh`` in ``folder``."""
    parts = name.split("_")
    for end in range(len(parts), 0, -1):
        module = "_".join(parts[:end])
        if (folder / module / "__init__.py").is_file() or any((folder / f"{module}{suffix}").is_file() for suffix in (".py", ".sh")):
            return True
    return False


def misplaced(tests: Path, source: Path, benchmarks: Path) -> list[str]:
    """The files under ``tests`` that name no module of ``source`` (nor, under ``tests/benchmarks``, a script of ``benchmarks``)."""
    wrong = []
    for path in sorted(tests.rglob("*.py")):
        relative = path.relative_to(tests)
        if relative.parts[0] == "support" or path.name in ("__init__.py", "conftest.py"):
            continue
        if len(relative.parts) == 1 and path.name in CROSS_CUTTING:
            continue
        folders = relative.parts[:-1]
        base = benchmarks / Path(*folders[1:]) if folders[:1] == ("benchmarks",) else source / Path(*folders)
        if not path.name.startswith("test_") or not names_a_module(base, path.stem.removeprefix("test_")):
            wrong.append(relative.as_posix())
    return wrong


def test_every_test_file_names_a_module_of_the_source_or_is_support():
    assert misplaced(ROOT / "tests", ROOT / "src" / "fedprior", ROOT / "benchmarks") == []
