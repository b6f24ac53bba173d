"""Where a run's ``run.imports`` modules were imported from, kept in its folder so that a resume elsewhere finds them.

``fedprior run mine.toml --import my_algorithms`` finds ``my_algorithms.py`` in the working
directory (or on ``PYTHONPATH``); ``fedprior resume RUN`` from another folder would not. So a
run records in ``imports.json`` each module's file and the folder Python found it in (the
``sys.path`` entry). A resume that cannot import a module otherwise looks in that folder
(last, after ``PYTHONPATH`` and the working directory) and says so in a warning; where the
folder no longer holds the file, the error says where the run found it and what to do.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from fedprior.algorithms.registry import MODULE_PATTERN, search_working_directory
from fedprior.atomic import write_text
from fedprior.errors import ConfigError


def module_origin(name: str) -> dict[str, str] | None:
    """``{"file": ..., "search_path": ...}`` of an imported module: its file and the folder its top-level package or module is
    in (the ``sys.path`` entry it was found through); None for a module without a file (built in, namespace) or not imported."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    folder = path.parent.parent if path.name == "__init__.py" else path.parent
    for _ in range(name.count(".")):
        folder = folder.parent
    return {"file": str(path), "search_path": str(folder)}


def write_origins(path: Path, modules: list[str]) -> None:
    """Record in ``path`` (a run's imports.json) where each imported module of ``modules`` came from."""
    origins = {name: origin for name in modules if (origin := module_origin(name)) is not None}
    if origins:
        write_text(path, json.dumps({"modules": origins}, indent=1) + "\n")


def read_origins(path: Path) -> dict[str, dict[str, str]]:
    """The recorded origins (none where the run predates imports.json or the file is damaged)."""
    try:
        origins = json.loads(path.read_text()).get("modules", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return origins if isinstance(origins, dict) else {}


def findable(name: str) -> str | None:
    """The file Python would import ``name`` from now (None: not found; '' for a module without a file)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return None if spec is None else str(Path(spec.origin).resolve()) if spec.origin and spec.has_location else ""


def prepare_imports(raw: dict[str, Any], origins_file: Path) -> None:
    """Before a resumed run's config is checked: make each module of its ``run.imports`` importable from where the run found it.

    A module Python finds (installed, ``PYTHONPATH``, the working directory) is left to it,
    with a warning where that is another file than the run's. One it does not find is looked
    for in the recorded folder, added to the end of ``sys.path`` (worker processes inherit it);
    where that does not hold it either, a ConfigError says where the run found it and what to do.
    """
    run = raw.get("run")
    modules = run.get("imports", []) if isinstance(run, dict) else []
    if not isinstance(modules, list):
        return  # the config check says what is wrong with it
    import re

    origins = read_origins(origins_file)
    search_working_directory()
    for name in modules:
        if not isinstance(name, str) or not re.fullmatch(MODULE_PATTERN, name) or name in sys.modules:
            continue
        recorded = origins.get(name) or {}
        found = findable(name)
        if found is None and recorded.get("search_path") and Path(recorded["search_path"]).is_dir():
            sys.path.append(recorded["search_path"])
            importlib.invalidate_caches()
            found = findable(name)
            if found is not None:
                warnings.warn(f"run.imports: module '{name}' imported from {recorded['search_path']}, where the run found it ({origins_file})", stacklevel=2)
        if found is None:
            raise ConfigError(missing_module(name, recorded))
        if found and recorded.get("file") and found != recorded["file"]:
            warnings.warn(f"run.imports: module '{name}' is imported from {found}; the run was started with {recorded['file']}", stacklevel=2)


def missing_module(name: str, recorded: dict[str, str]) -> str:
    """The error of a ``run.imports`` module found nowhere: where the run imported it from, and what to do."""
    file = name.replace(".", "/") + ".py"
    if recorded.get("file"):
        folder = recorded["search_path"]
        return (
            f"run.imports: cannot import module '{name}': not found on sys.path, in the working directory, nor in {folder}, where the run "
            f"imported it from ({recorded['file']}); put it back there, or run from the folder holding {file} or with PYTHONPATH=FOLDER set to it"
        )
    return (
        f"run.imports: cannot import module '{name}' (not found on sys.path nor in the working directory); run from the folder holding "
        f"{file}, or set PYTHONPATH=FOLDER to the folder holding it"
    )
