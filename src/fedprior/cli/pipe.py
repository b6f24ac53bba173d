"""A reader that goes away (``fedprior ... | head -1``): exit quietly with status 141, as a Unix tool does.

A tool killed by SIGPIPE ends with status 128 + 13 = 141 in the shell; Python ignores SIGPIPE
and raises :class:`BrokenPipeError` on the next write instead. Every command turns that into
the same quiet status 141, following Python's documented recipe (the ``signal`` module's
"Note on SIGPIPE"): standard output is pointed at ``os.devnull``, so that the interpreter's last
flush at exit writes nowhere instead of printing ``Exception ignored ... BrokenPipeError``. A run
stopped so keeps its last checkpoint, as after Ctrl-C (``fedprior resume RUN``).

141, not 0: a pipeline under ``set -o pipefail`` tells a listing cut short from a whole one, and
it matches the other statuses of a stop by a signal (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import os
import select
import stat
import sys
from typing import NoReturn

CLOSED_PIPE_STATUS = 141
"""The exit status of a command whose standard output's reader went away: 128 + SIGPIPE (13), what the shell reports for a tool SIGPIPE stopped."""


def _stdout_fd() -> int:
    """The process's standard output's file descriptor (1, unless redirected); AttributeError where there is none."""
    return sys.__stdout__.fileno()  # type: ignore[union-attr]


def stdout_reader_gone() -> bool:
    """Whether standard output is a pipe (or socket) whose reader has closed it: ``poll`` reports an error on its write end.

    A :class:`BrokenPipeError` from elsewhere (a worker's pipe, a socket of Flower's) is no reason to exit quietly; this tells them apart.
    """
    try:
        poller = select.poll()
        poller.register(_stdout_fd(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no stdout, or not a file descriptor (a test's captured stream)
        return False


def exit_closed_pipe() -> NoReturn:
    """Point standard output at ``os.devnull`` (so nothing more is written to the closed pipe, not even at exit) and exit with :data:`CLOSED_PIPE_STATUS`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, _stdout_fd())
    finally:
        os.close(devnull)
    sys.exit(CLOSED_PIPE_STATUS)


def _stdout_kind() -> tuple[bool, tuple[int, int] | None]:
    """Whether standard output is a pipe, and its (device, inode)."""
    try:
        status = os.fstat(_stdout_fd())
    except (AttributeError, OSError, ValueError):
        return False, None
    return stat.S_ISFIFO(status.st_mode), (status.st_dev, status.st_ino)


def quiet_on_closed_pipe(call, *args, **kwargs):
    """``call(*args, **kwargs)``, then flush standard output; where its reader has gone, :func:`exit_closed_pipe` instead of an error.

    Rich handles a closed pipe itself (``Console.on_broken_pipe``: standard output pointed at ``os.devnull``, then exit 1),
    in consoles of ours and in typer's help alike; that exit 1 is made 141 here: standard output was a pipe and now is
    ``os.devnull``.
    """
    was_pipe, _ = _stdout_kind()
    try:
        result = call(*args, **kwargs)
        sys.stdout.flush()
        return result
    except BrokenPipeError:
        if stdout_reader_gone():
            exit_closed_pipe()
        raise
    except SystemExit as stop:
        if stop.code == 1 and was_pipe and _stdout_kind()[1] == _devnull():
            sys.exit(CLOSED_PIPE_STATUS)
        raise


def _devnull() -> tuple[int, int]:
    status = os.stat(os.devnull)
    return status.st_dev, status.st_ino
