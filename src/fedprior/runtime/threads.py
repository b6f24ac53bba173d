"""The thread policy: how many torch threads each kind of work gets, and how many worker processes.

Measured on a 2-core machine shared with other jobs, torch's OpenMP threads wait on
each other whenever a core is taken: small-op work (linear heads, aggregation,
pseudo-labels) slowed down 8-37x with two threads and gains nothing from a second one
when the machine is quiet. So by default (``run.threads = 0``):

- client updates and everything else of a round run on **one** thread; parallelism
  across clients comes from worker processes (``run.workers``), one thread each, which
  keeps working when a core is taken. One thread has a second reason: a convolution's
  backward pass splits its batch over the threads, so the last bits of its gradients
  depend on the thread count; with one thread the numbers of a config and seed do not
  depend on the machine's core count (and ``workers = N`` gives exactly the numbers of
  ``workers = 1``);
- evaluation of image models and frozen-encoder inference use every core: these are
  large forward passes (where threads pay and the outputs do not depend on the
  thread count); evaluation of feature-space heads stays on one thread.

``run.threads = N`` overrides all of it: N threads for every kind of work, in this
process and in each worker.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ThreadPolicy:
    """Torch threads per kind of work (see the module docstring)."""

    train: int
    """Client updates (in each worker too), aggregation and server-side training."""
    evaluate: int
    """Evaluation of the global model (forward passes only)."""
    encode: int
    """Frozen-encoder inference before training."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def thread_policy(override: int, *, feature_space: bool) -> ThreadPolicy:
    """``run.threads`` (0: by the work's size) for a run on feature vectors or on images."""
    if override:
        return ThreadPolicy(override, override, override)
    cores = available_cores()
    return ThreadPolicy(train=1, evaluate=1 if feature_space else cores, encode=cores)


def default_workers(override: int, *, feature_space: bool, clients_per_round: int, cuda: bool) -> int:
    """``run.workers`` (0: by the work): 1 for feature-space heads (small ops, trained as one batch);
    for image models on the CPU one process per core up to the clients of a round; on CUDA one process
    per GPU the run uses, i.e. 1: the run trains on one device, and a second process there would only add its
    own CUDA context, its own copy of the resident data and model (``experiments/resident.py``) and its
    interleaved kernels, not compute.
    An explicit ``override`` is capped at ``clients_per_round`` (the most clients a round samples):
    more workers would only idle."""
    if override:
        return max(1, min(override, clients_per_round))
    if feature_space or cuda:
        return 1
    return max(1, min(available_cores(), clients_per_round))


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (None: leave them as they are), then restore them."""
    if not threads:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
