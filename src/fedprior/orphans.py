"""No orphans: a child process that dies with its parent, even when the parent is killed with SIGKILL.

Used by every process fedprior starts that must not outlive the process that started
it: ``run.workers``'s worker processes (:mod:`fedprior.runtime.workers`) and the
Flower processes of ``fedprior flower local`` (:mod:`fedprior.flower.processes`, whose
watcher process :mod:`fedprior.flower.reaper` polls like :func:`wait_for_parent`).

Two mechanisms, the first where the system has it:

1. ``PR_SET_PDEATHSIG`` (Linux, via ``prctl``): the kernel sends SIGKILL to the child
   when its parent dies. The kernel's "parent" is the *thread* that forked the child,
   so start such children from a thread that lives as long as the process (fedprior
   starts them from the main thread). The parent may die before the child makes the
   call; the child then checks that its parent is still the expected one.
2. a daemon thread in the child that polls its parent's PID (reparented: the parent is
   gone) and exits the process.

Standard library only: the Flower watcher process imports it and must start fast.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
try:  # bound at import, before any fork: the child only makes the call (safe in a preexec_fn)
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _prctl = None


def die_with_parent(parent: int | None = None) -> bool:
    """Have the kernel SIGKILL this process when its parent dies (Linux); returns whether it could.

    ``parent``: the PID this process's parent should have (the caller's ``os.getpid()``
    taken before the fork). If the parent died before the call (the signal would then
    never come) this process exits at once, with status 1. One libc call besides
    ``getppid``, so it may serve as a ``subprocess.Popen`` ``preexec_fn``.
    """
    armed = _prctl is not None and _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    if parent is not None and os.getppid() != parent:
        os._exit(1)
    return armed


def wait_for_parent(parent: int, every: float = 0.2) -> None:
    """Return once this process's parent is no longer ``parent`` (it died and this process was reparented)."""
    while os.getppid() == parent:
        time.sleep(every)


def stay_with_parent(parent: int, every: float = 0.5) -> None:
    """For a Python child process: end when ``parent`` ends, by the kernel's signal where there is one,
    else by a daemon thread that polls the parent's PID every ``every`` seconds and exits the process."""
    if die_with_parent(parent):
        return

    def watch() -> None:
        wait_for_parent(parent, every)
        os._exit(1)

    threading.Thread(target=watch, name="fedprior-parent-watch", daemon=True).start()
