"""Errors that reach the user as one clear line instead of a traceback."""


class FedpriorError(Exception):
    """A problem the user can fix (bad input, a missing file); the CLI prints it and exits 2."""


class ConfigError(FedpriorError):
    """A configuration value is unknown or out of range; the message names the field and what it accepts."""


class DatasetNotFoundError(FedpriorError):
    """A dataset's files are missing or damaged; the message says which files to put where and where to get them."""


class DatasetError(FedpriorError, ValueError):
    """A dataset's arrays are inconsistent (label count, label range): damaged files, or files that do not belong together."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped a run; the message says how to resume it. The CLI exits 130."""
