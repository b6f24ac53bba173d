"""``run.concurrent_clients = k``: up to k of a round's client updates run at once, in threads, each on its own CUDA stream.

One process drives the GPU (``run.workers`` is 1 there by default); one client update at
a time leaves it idle whenever the update's kernels are too small to fill it, or while
Python prepares the next ones. :class:`Lanes` runs up to k updates at once, each in a
thread of its own (a *lane*, ``fedprior.algorithms.pieces.lanes``) and, on CUDA, on a
stream of its own (``torch.cuda.Stream``), so that kernels of several clients can be in
flight together; torch releases the GIL inside its operators. Lane i waits on the
caller's stream before its first kernel (the broadcast, the clients' data and states
were made there) and the caller waits on every lane's stream afterwards (the replies are
read there), so the streams add no race.

The numbers are those of one update at a time, bit for bit: a client update is a pure
function of the broadcast, its state, its data and its ``ClientInfo`` (it draws from its
``ClientInfo`` generators), whichever lane runs it and in whatever order. What a lane must
not share with another is kept per lane: ``GlobalModel.receive``'s resident models. Two
things cannot be made per thread, so an algorithm takes part only if it says its updates
avoid them (``Algorithm.thread_safe_updates``): torch's global random generator (threads
share it, so the per-client seeding of ``clients.global_rng`` cannot hold per thread;
``data.augment.seeded``, dropout and kornia's augmentations use it), and state an update
keeps in Python objects between calls.

On the CPU the lanes are threads without streams: the numbers are the same (tests use
that); the speed is the cores', as with worker processes (``run.workers``).
A lane runs its updates with the caller's grad mode and torch function and dispatch modes
(a ``FlopCounterMode`` or a test's dispatch mode around a round sees every lane's work), and
with the caller's torch thread count: OpenMP keeps a team size per thread, and a new
thread's is OpenMP's default (every core), which torch's own loops ignore but oneDNN's
convolutions and MKL's products read, so without it each lane's kernels ran on every core.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any, TypeVar

import torch

from fedprior.algorithms.pieces.lanes import in_lane

T = TypeVar("T")


class Lanes:
    """Run jobs (client updates) up to ``count`` at once, on ``device``'s streams where it is CUDA; see the module docstring."""

    def __init__(self, count: int = 1, device: torch.device | str = "cpu") -> None:
        if count < 1:
            raise ValueError(f"concurrent clients must be at least 1, got {count}")
        self.count, self.device = count, torch.device(device)
        self._streams: list[Any] = []

    def streams(self, needed: int) -> list[Any]:
        """``needed`` CUDA streams of this device (made once, kept for the run); ``[None] * needed`` off CUDA."""
        if self.device.type != "cuda":
            return [None] * needed
        while len(self._streams) < needed:
            self._streams.append(torch.cuda.Stream(device=self.device))
        return self._streams[:needed]

    def run(self, jobs: Sequence[Callable[[], T]]) -> list[T]:
        """Each job's result, in the order of ``jobs``; the first (by position) exception of a job is raised after the others stop."""
        if self.count == 1 or len(jobs) < 2:
            return [job() for job in jobs]
        streams = self.streams(min(self.count, len(jobs)))
        cuda = self.device.type == "cuda"
        caller = torch.cuda.current_stream(self.device) if cuda else None
        device_index = (self.device.index if self.device.index is not None else torch.cuda.current_device()) if cuda else None
        inherit = caller_modes()
        team = torch.get_num_threads()
        results: list[Any] = [None] * len(jobs)
        errors: dict[int, BaseException] = {}
        taken = iter(range(len(jobs)))
        lock, stop = threading.Lock(), threading.Event()

        def lane(number: int, stream: Any) -> None:
            try:
                torch.set_num_threads(team)  # else oneDNN's and MKL's kernels here use OpenMP's default team: every core
                on_device = torch.cuda.device(device_index) if device_index is not None else nullcontext()  # a new thread starts on device 0
                with inherit(), in_lane(number), on_device, torch.cuda.stream(stream) if stream is not None else nullcontext():
                    if stream is not None:
                        stream.wait_stream(caller)
                    while not stop.is_set():
                        with lock:
                            job = next(taken, None)
                        if job is None:
                            return
                        try:
                            results[job] = jobs[job]()
                        except BaseException as error:  # raised in the caller, after the other lanes finish their job
                            errors[job] = error
                            stop.set()
            except BaseException as error:  # the lane itself (its modes, its stream): raised in the caller too
                errors[len(jobs) + number] = error
                stop.set()

        threads = [threading.Thread(target=lane, args=(n + 1, s), name=f"fedprior-lane-{n + 1}", daemon=True) for n, s in enumerate(streams)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:  # Ctrl-C in the caller: no lane takes another job
            stop.set()
            raise
        if caller is not None:
            for stream in streams:
                caller.wait_stream(stream)
        if errors:
            raise errors[min(errors)]
        return results


def caller_modes() -> Callable[[], Any]:
    """A context manager factory that gives a new thread this thread's grad mode and torch function and dispatch modes."""
    grad = torch.is_grad_enabled()
    functions = torch.overrides._get_current_function_mode_stack()
    dispatches = [m for m in torch.utils._python_dispatch._get_current_dispatch_mode_stack() if getattr(m, "_dispatch_key", None) is None]

    @contextmanager
    def entered() -> Iterator[None]:
        with ExitStack() as stack:
            stack.enter_context(torch.set_grad_enabled(grad))
            for mode in functions:
                torch._C._push_on_torch_function_stack(mode)
                stack.callback(torch._C._pop_torch_function_stack)
            for mode in dispatches:
                torch._C._push_on_torch_dispatch_stack(mode)
                stack.callback(torch._C._pop_torch_dispatch_stack, None)
            yield

    return entered
