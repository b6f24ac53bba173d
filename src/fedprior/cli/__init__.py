"""The ``fedprior`` command line: one module per command, all registered on one typer app."""

from fedprior.cli import compare as _compare  # noqa: F401
from fedprior.cli import datasets as _datasets  # noqa: F401
from fedprior.cli import encode as _encode  # noqa: F401
from fedprior.cli import flower as _flower  # noqa: F401
from fedprior.cli import partition as _partition  # noqa: F401
from fedprior.cli import presets as _presets  # noqa: F401  (registers its commands)
from fedprior.cli import run as _run  # noqa: F401
from fedprior.cli import standin as _standin  # noqa: F401
from fedprior.cli import sweep as _sweep  # noqa: F401  (no command: run --seeds/--sweep)
from fedprior.cli import table as _table  # noqa: F401
from fedprior.cli import tables as _tables  # noqa: F401
from fedprior.cli.app import app

__all__ = ["app"]
