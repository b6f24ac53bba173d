"""The typer application every command module registers on, and the error boundary.

A user's mistake or a damaged file is one line on stderr (``error: ...``) and exit
code 2; an interrupted run (Ctrl-C, or SIGTERM) is one line saying how to resume it and
exit code 128 + the signal number; anything else (a bug) is one line too, exit code 1. Where standard
output's reader goes away (``fedprior ... | head -1``), a command exits quietly with status 141
(:mod:`fedprior.cli.pipe`).
``fedprior --debug COMMAND`` shows the traceback instead. Python warnings are printed as
one ``warning: ...`` line each.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
import warnings
from collections.abc import Callable

import click
import typer
from rich.markup import escape
from typer.core import TyperGroup

from fedprior.cli.console import make_console
from fedprior.cli.home import caches_outside_an_unwritable_home
from fedprior.cli.pipe import exit_closed_pipe, quiet_on_closed_pipe, stdout_reader_gone
from fedprior.errors import FedpriorError, Interrupted, redeliver_swallowed_stop


class _Commands(TyperGroup):
    """The ``fedprior`` group: where standard output's reader goes away (``| head -1``), any command, its help included,
    exits quietly with status 141 (:mod:`fedprior.cli.pipe`); click alone would exit 1 there."""

    def make_context(self, *args, **kwargs):  # parses the options: prints --help
        return quiet_on_closed_pipe(super().make_context, *args, **kwargs)

    def invoke(self, ctx):  # runs the command
        return quiet_on_closed_pipe(super().invoke, ctx)


app = typer.Typer(
    cls=_Commands,
    name="fedprior",
    epilog=(
        "Exit status: 0 done; 2 a mistake in the input (one line naming it); 1 a bug; 130 or 143 interrupted (Ctrl-C, SIGTERM; "
        "resumable); 141 standard output's reader went away (`fedprior ... | head -1`), quietly, as a Unix tool stopped by SIGPIPE."
    ),
    help="Federated learning with few or no labels, leaning on prior knowledge (FST-CBDG, FedDB, FedBM, MFCL).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    suggest_commands=False,  # click (8.2+) already ends 'No such command' with 'Did you mean ...?'; typer's would repeat it
)

stderr = make_console(stderr=True)
DEBUG = {"on": False}
"""Set by ``--debug`` for this process: show tracebacks."""


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    stderr.print(f"[yellow]warning:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib import metadata

        try:
            version = metadata.version("fedprior")
        except metadata.PackageNotFoundError:  # a source tree never installed, as fedprior.__version__ says
            version = "0+unknown"
        typer.echo(f"fedprior {version}")
        raise typer.Exit()


@app.callback()
def main(
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks instead of one-line errors."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print fedprior's version and exit."),
) -> None:
    """Federated learning with few or no labels, leaning on prior knowledge (FST-CBDG, FedDB, FedBM, MFCL)."""
    DEBUG["on"] = debug
    caches_outside_an_unwritable_home()  # before matplotlib or wandb is imported
    if not debug:
        warnings.showwarning = _show_warning
        quiet_resource_tracker()


TRACKER_WARNING = "ignore:resource_tracker:UserWarning"
"""The ``-W`` option that silences multiprocessing's resource tracker's warnings (``resource_tracker: There appear to be 10
leaked semaphore objects to clean up at shutdown``)."""


def quiet_resource_tracker() -> None:
    """Start any resource tracker of this process with :data:`TRACKER_WARNING`: where this process is killed (``kill -9``)
    while processes it spawned run (a sweep's or table's jobs, workers), the tracker removes the semaphores it left, as
    it should, but also printed two lines of warning about them. Python passes ``sys.warnoptions`` to the tracker it
    starts (``multiprocessing.util._args_from_interpreter_flags``), so this is done before any process is spawned."""
    if TRACKER_WARNING not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_WARNING)


IMPORT_HELP = (
    "Import this Python module first, e.g. mypkg.algorithms (a dotted name found like Python's imports: installed, "
    "on PYTHONPATH, or in the working directory); it registers algorithms from your own code. Repeatable."
)
"""The help of ``--import`` (run, resume, table, compare, algorithms, presets show)."""


ALGORITHM_HELP = (
    "Run this algorithm instead of the config's: replaces its whole algorithm section by name = NAME, the other fields at their "
    "defaults (--set algorithm.KEY=VALUE sets them; --set algorithm.name=NAME would keep the preset's other algorithm keys); "
    "a warning names the config's values it drops. See `fedprior algorithms NAME`."
)
"""The help of ``--algorithm`` (run, presets show)."""


def import_first(modules: list[str]) -> None:
    """``--import MODULE ...``: import each module before any config is read; one line naming the module and the Python error otherwise."""
    if modules:
        from fedprior.algorithms.registry import import_modules

        import_modules(modules, "--import")


def _terminated(signum, frame) -> None:
    raise Interrupted(signum)


def user_errors(command: Callable) -> Callable:
    """Print an error as one line on stderr and exit non-zero, without a traceback (unless --debug).

    An interrupted run (Ctrl-C, or SIGTERM where it is caught) says how to resume it and
    exits 128 + the signal number: 130 for SIGINT, 143 for SIGTERM.
    """

    def fail(text: str, code: int) -> None:
        stderr.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
        sys.exit(code)

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminated) if main else None  # a scheduler's stop, like Ctrl-C
        hook, sys.unraisablehook = sys.unraisablehook, redeliver_swallowed_stop  # a stop raised inside a callback stops the run
        try:
            return command(*args, **kwargs)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except FedpriorError as error:
            if DEBUG["on"]:
                raise
            fail(str(error), 2)
        except Interrupted as error:
            name = signal.Signals(error.signum).name
            if error.continue_with:
                where = error.continue_with
            else:
                where = f"resume with `fedprior resume {error.run_dir}`" if error.run_dir else "nothing was saved"
            stderr.print(f"interrupted ({name}); {escape(where)}", highlight=False, soft_wrap=True)
            sys.exit(128 + error.signum)
        except KeyboardInterrupt:  # Ctrl-C in a command that is not a run
            stderr.print("interrupted (SIGINT)", highlight=False)
            sys.exit(128 + signal.SIGINT)
        except Exception as error:  # a bug: one line, and how to see more
            if isinstance(error, BrokenPipeError) and stdout_reader_gone():  # `| head -1`: not a bug
                exit_closed_pipe()
            if DEBUG["on"]:
                raise
            fail(f"unexpected {type(error).__name__}: {error} (run `fedprior --debug ...` for the traceback, and report it)", 1)
        finally:
            sys.unraisablehook = hook
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    return wrapper
