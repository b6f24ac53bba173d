"""The typer application every command module registers on, and the error boundary."""

from __future__ import annotations

import functools
import signal
import sys
import threading
from typing import Callable

import typer
from rich.console import Console
from rich.markup import escape

from fedprior.errors import FedpriorError, Interrupted

app = typer.Typer(
    name="fedprior",
    help="Federated learning with few or no labels, leaning on prior knowledge (FST-CBDG, FedDB, FedBM, MFCL).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

stderr = Console(stderr=True)


def _terminated(signum, frame) -> None:
    raise Interrupted(signum)


def user_errors(command: Callable) -> Callable:
    """Print a FedpriorError as one line on stderr and exit 2, without a traceback.

    An interrupted run (Ctrl-C, or SIGTERM where it is caught) says how to resume it and
    exits 128 + the signal number: 130 for SIGINT, 143 for SIGTERM.
    """

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminated) if main else None  # a scheduler's stop, like Ctrl-C
        try:
            return command(*args, **kwargs)
        except FedpriorError as error:
            stderr.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
            sys.exit(2)
        except Interrupted as error:
            name = signal.Signals(error.signum).name
            where = f"resume with `fedprior resume {error.run_dir}`" if error.run_dir else "nothing was saved"
            stderr.print(f"interrupted ({name}); {escape(where)}", highlight=False, soft_wrap=True)
            sys.exit(128 + error.signum)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    return wrapper
