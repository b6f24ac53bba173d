"""``python -m fedprior.flower.reaper PARENT MARK``: when process PARENT is gone, kill the federation MARK.

Started by ``fedprior flower local`` before any Flower process, in a session of its own
(a signal to the parent's process group does not reach it), and stopped by it at the
end. If the parent dies first, SIGKILL included, this process is reparented; it then
kills every process carrying ``FEDPRIOR_FEDERATION=MARK`` (see
:mod:`fedprior.flower.processes`) and exits. Standard library only, so it starts fast.
"""

from __future__ import annotations

import signal
import sys

from fedprior.flower.processes import sweep
from fedprior.orphans import wait_for_parent


def watch(parent: int, mark: str, every: float = 0.2) -> None:
    wait_for_parent(parent, every)
    sweep(mark)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the parent, which stops the federation itself
    watch(int(sys.argv[1]), sys.argv[2])
