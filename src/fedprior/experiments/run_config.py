"""A run's config in its run folder: ``config.toml`` (every field, with the experiment's name) and ``imports.json``, written and read back checked.

The run folder (:class:`~fedprior.results.run_dir.RunDir`) only names its files, so that reading one
(``fedprior compare``) needs no config model; turning ``config.toml`` back into a checked
:class:`~fedprior.experiments.config.ExperimentConfig` (a resume, a table's reused cell) needs them, so it is done here.
"""

from __future__ import annotations

import tomli_w

from fedprior.atomic import write_text
from fedprior.experiments.config import ExperimentConfig, parse_toml_file, validate_config
from fedprior.experiments.import_origins import prepare_imports, write_origins
from fedprior.results.run_dir import RunDir


def write_config(run: RunDir, name: str, config: ExperimentConfig) -> None:
    """config.toml, and imports.json: where the modules of ``run.imports`` were imported from (for a resume elsewhere)."""
    write_text(run.config, tomli_w.dumps({"name": name, **config.to_dict()}))
    write_origins(run.imports, config.run.imports)


def read_config(run: RunDir) -> tuple[str, ExperimentConfig]:
    """(name, config) of ``run``; a damaged config.toml is a one-line error naming it. The modules of its ``run.imports``
    are looked for where the run found them too (imports.json; :func:`~fedprior.experiments.import_origins.prepare_imports`)."""
    raw = parse_toml_file(run.config)
    name = raw.pop("name", run.path.name)
    prepare_imports(raw, run.imports)
    return str(name), validate_config(raw)
