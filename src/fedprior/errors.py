"""Errors that reach the user as one clear line instead of a traceback."""

import signal


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
