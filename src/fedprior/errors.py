"""Errors that reach the user as one clear line instead of a traceback."""

import os
import signal
import sys


class FedpriorError(Exception):
    """A problem the user can fix (bad input, a missing file); the CLI prints it and exits 2."""


class ConfigError(FedpriorError):
    """A configuration value is unknown or out of range; the message names the field and what it accepts."""


class DatasetNotFoundError(FedpriorError):
    """A dataset's files are missing or damaged; the message says which files to put where and where to get them."""


class DatasetError(FedpriorError, ValueError):
    """A dataset's arrays are inconsistent (label count, label range): damaged files, or files that do not belong together."""


class UserCodeError(FedpriorError):
    """An algorithm registered from the user's own code raised, or its factory returned no Algorithm; the message names
    the algorithm, its module and the Python error (``fedprior --debug`` shows the traceback)."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal (Ctrl-C: SIGINT; a scheduler or ``kill``: SIGTERM) after it stopped what it started.

    Its checkpoint holds the last completed round; ``run_dir``, once known, is where to
    resume. ``continue_with``, where set, is the command that goes on instead (a table's:
    rerunning it continues every cell). The CLI prints how to go on and exits 128 + the
    signal's number (130, 143).
    """

    def __init__(self, signum: int = signal.SIGINT, run_dir=None, continue_with: str | None = None) -> None:
        super().__init__(signum)
        self.signum, self.run_dir, self.continue_with = int(signum), run_dir, continue_with


def redeliver_swallowed_stop(unraisable) -> None:
    """A ``sys.unraisablehook``: a Ctrl-C or SIGTERM (:class:`Interrupted`) whose exception Python dropped, because it was
    raised where no exception can leave (a weakref callback such as a WeakSet's, a ``__del__``, run by the garbage
    collector in the middle of a round), is sent again to this process 10 ms later from a thread, so that its handler
    runs once the callback has returned and stops the run there (and again, should it land in a callback again).
    Without it Python prints ``Exception ignored in ...`` and a traceback, and the run goes on as if no signal had come.
    Any other exception goes to Python's own hook."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        import threading

        signum = getattr(unraisable.exc_value, "signum", signal.SIGINT)
        again = threading.Timer(0.01, os.kill, (os.getpid(), signum))  # a moment later: the callback has returned
        again.daemon = True
        again.start()
        return
    sys.__unraisablehook__(unraisable)
