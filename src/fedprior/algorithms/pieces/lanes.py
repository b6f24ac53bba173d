"""Lanes: which of a round's concurrently running client updates this thread runs (``run.concurrent_clients``).

The runtime may run up to k client updates of a round at once, each in its own thread
(``fedprior.runtime.concurrent``); each such thread is a *lane*, numbered 1..k, and every
other thread (the main one: serial updates, aggregation, evaluation) is lane 0. What an
algorithm keeps between calls for speed, and may only be used by one update at a time,
is kept per lane: :meth:`fedprior.algorithms.engines.supervised.GlobalModel.receive`'s
resident models (one per slot and lane). A lane says where an update runs, never what
it computes: the numbers do not depend on it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


def current_lane() -> int:
    """This thread's lane: 1..k inside a concurrent client update, else 0."""
    return getattr(_local, "lane", 0)


@contextmanager
def in_lane(lane: int) -> Iterator[None]:
    """Run the block (in this thread) as lane ``lane``."""
    before = current_lane()
    _local.lane = lane
    try:
        yield
    finally:
        _local.lane = before


def lane_key(slot: str) -> str:
    """``slot`` in lane 0, ``slot@lane`` in another: the key of what is kept per slot and lane."""
    lane = current_lane()
    return slot if lane == 0 else f"{slot}@{lane}"
