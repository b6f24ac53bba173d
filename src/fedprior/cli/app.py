"""The typer application every command module registers on, and the error boundary."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import typer
from rich.console import Console
from rich.markup import escape

from fedprior.errors import FedpriorError

app = typer.Typer(
    name="fedprior",
    help="Federated learning with few or no labels, leaning on prior knowledge (FST-CBDG, FedDB, FedBM, MFCL).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

stderr = Console(stderr=True)


def user_errors(command: Callable) -> Callable:
    """Print a FedpriorError as one line on stderr and exit 2, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FedpriorError as error:
            stderr.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
            sys.exit(2)

    return wrapper
