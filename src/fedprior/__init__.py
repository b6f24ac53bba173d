"""fedprior: federated learning with few or no labels, leaning on prior knowledge.

The Python API (docs/python-api.md) is imported on first use, so ``import fedprior``
stays light (no torch until a function needs it)::

    import fedprior

    config = fedprior.load_config("fedavg-cnn", {"data.dataset": "digits", "federation.rounds": 2})
    result = fedprior.run(config)
    print(result.final_accuracy, result.run_dir)
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import TYPE_CHECKING

from fedprior import papers as _papers  # noqa: F401  (registers the papers' presets, tables and report hooks: every entry point has them)
from fedprior.errors import ConfigError, DatasetNotFoundError, FedpriorError

try:
    __version__ = _metadata.version("fedprior")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

_API = (
    "Config",
    "RunResult",
    "PartitionResult",
    "TableResult",
    "load_config",
    "run",
    "resume",
    "open_run",
    "compare",
    "build_partition",
    "list_algorithms",
    "list_presets",
    "list_datasets",
    "list_tables",
    "reproduce_table",
    "register_algorithm",
    "register_sampler",
)

__all__ = ["__version__", "ConfigError", "DatasetNotFoundError", "FedpriorError", *_API]

if TYPE_CHECKING:
    from fedprior.api import (  # noqa: F401
        Config,
        PartitionResult,
        RunResult,
        TableResult,
        build_partition,
        compare,
        list_algorithms,
        list_datasets,
        list_presets,
        list_tables,
        load_config,
        open_run,
        register_algorithm,
        register_sampler,
        reproduce_table,
        resume,
        run,
    )


def __getattr__(name: str):
    """The API's names, imported from :mod:`fedprior.api` on first use (PEP 562)."""
    if name in _API:
        from fedprior import api

        return getattr(api, name)
    raise AttributeError(f"module 'fedprior' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
