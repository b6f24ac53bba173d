"""The ``fedprior`` command line: one module per command, all registered on one typer app."""

from fedprior.cli.app import app
from fedprior.cli import presets as _presets  # noqa: F401  (registers its commands)

__all__ = ["app"]
