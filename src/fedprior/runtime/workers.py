"""``run.workers = N``: a round's sampled clients trained in N long-lived worker processes.

The pfl-style design: the workers start once per run (at the first round), each builds
the algorithm once and keeps it, and a round costs one message per worker (the
broadcast) plus one per client (its id and state) and one reply per client; no process
starts per message. Client states stay in this process, as with
:class:`~fedprior.runtime.clients.InProcessClients`: each sampled client's state travels
with it and its new state comes back, so checkpoints and resume work unchanged, and
the numbers are those of ``workers = 1`` whichever worker trains which client (a
client update is a pure function of the broadcast, its state, its data and its
ClientInfo). Workers run ``run.threads`` torch threads (one by default); on a GPU they
share it.

How workers start: by ``fork`` on the CPU, which gives them the built experiment (its
tensors, the algorithm) for free, shared copy-on-write; by ``spawn`` where CUDA is
used, since CUDA cannot be used in a process forked after CUDA started, and where a
worker runs client updates in threads (``run.concurrent_clients > 1``): threads started
in a forked child that inherited this process's torch state crash now and then (a
segfault in a client thread's convolution, in 7 of 300 runs of ``workers = 2,
concurrent_clients = 2`` once the parent had compiled a model; the stress test in
``tests/runtime/test_concurrent.py``, ``pytest -m stress``), while a spawned worker starts
clean. A spawned worker gets a picklable *setup*
(``fedprior.experiments.client_side.ClientSide``) and rebuilds the algorithm from it. The workers start together, announced in a line before
and one after (:meth:`WorkerClients.prepare`), and torch's lazy imports are paid once,
before the fork, not in each worker's first round (:func:`warm_up`).

No orphans: a worker never outlives this process. It closes the pipe ends it inherited
by fork (its own pipe's other end and those of the workers started before it; held
open, they would hide this process's death from every worker), so it sees the end of
its pipe when this process goes; and it is tied to this process by
:func:`fedprior.orphans.stay_with_parent` (on Linux the kernel kills it with SIGKILL when
this process dies, ``kill -9`` included). A Ctrl-C or SIGTERM sent to the whole process
group (a terminal, a scheduler) ends the workers quietly (the default action of the
signal, no traceback); this process handles the interruption and says how to resume.

Faults: a worker that dies (killed, out of memory, a crash in native code) is replaced
by a new one, which redoes the updates of the clients the dead one had in hand (a
warning says so, as it does for a worker that died between updates): a client update is
a pure function of its inputs, so the round's numbers are those of ``workers = 1``. If the worker that redoes them dies too (a crash
that the update itself causes), those clients are reported as failures of that round
(``failed_clients``, ``failures``: which worker died and how), like a failing Flower
client, and the run goes on with the others. A Python exception in a client update is a
bug, not a fault: it stops the run, as it does with ``workers = 1``, with the worker's
traceback in the message.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

import torch

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, Reply, RoundInfo, State
from fedprior.algorithms.pieces.tensors import to_cpu
from fedprior.orphans import stay_with_parent
from fedprior.runtime.clients import InProcessClients, update_clients
from fedprior.runtime.concurrent import Lanes

WorkerSetup = Callable[[], tuple[Algorithm, Callable[[int], ClientData]]]
"""Called once in each worker: the algorithm and the client-data function it trains with."""


REDOS = 1
"""How many times the updates of a dead worker's clients are redone by a new worker before they count as failed."""


class WorkerError(RuntimeError):
    """A client update raised in a worker process (the message holds the worker's traceback)."""


def _send(conn: Connection, message: Any) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""What a terminal (Ctrl-C) or a scheduler sends to a whole process group: a worker ends quietly on them."""


@contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Hold back SIGINT and SIGTERM in this thread while a worker starts (they are delivered here afterwards).

    The worker inherits the blocked mask (through fork, and through spawn's exec) and
    unblocks them only after setting their default action, so neither this process's
    handlers (copied by fork; the CLI's SIGTERM handler raises) nor Python's
    KeyboardInterrupt ever run in it.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _ignored_stop_signals() -> tuple[int, ...]:
    """The stop signals this process ignores (started in the background by a shell, ``nohup``): its workers ignore them too."""
    return tuple(int(s) for s in STOP_SIGNALS if signal.getsignal(s) == signal.SIG_IGN)


def _become_worker(parent: int | None, inherited: Sequence[Connection], ignored: Sequence[int]) -> None:
    """A worker's first steps: quiet signals, no inherited pipe ends, tied to ``parent`` (see the module docstring)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN if signum in ignored else signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for end in inherited:
        end.close()
    if parent is not None:
        stay_with_parent(parent)


def serve(
    conn: Connection,
    setup: WorkerSetup,
    threads: int,
    parent: int | None = None,
    inherited: Sequence[Connection] = (),
    ignored: Sequence[int] = (),
    lanes: tuple[int, str] = (1, "cpu"),
) -> None:
    """A worker's main loop: build once, then train the groups of clients it is sent until told to stop.

    ``parent``: the PID of the process that started it, which it must not outlive;
    ``inherited``: that process's pipe ends it got by fork, closed at once; ``ignored``:
    the stop signals that process ignores (the others end the worker quietly); ``lanes``:
    how many of a group's updates run at once, and the device (``run.concurrent_clients``).
    """
    _become_worker(parent, inherited, ignored)
    torch.set_num_threads(threads)
    try:
        try:
            algorithm, client_data = setup()
        except BaseException:
            _send(conn, ("setup-failed", traceback.format_exc()))
            return
        warm_up()  # a spawned worker's own; a forked one inherited the parent's
        _send(conn, ("ready", os.getpid()))
        _train(conn, algorithm, client_data, Lanes(*lanes))
    except (EOFError, OSError):  # the main process is gone (or closed its end): nothing left to do
        return


def warm_up() -> None:
    """Import what torch imports lazily on a process's first optimizer (``torch._dynamo``: 1.5 to 2.5 s of CPU here).

    Every client update builds an optimizer, so each worker would pay it in its first round, all
    of them at once on cores the round needs. The parent pays it once before forking (its
    workers inherit the imported modules); a spawned worker pays it before it says it is
    ready, so that the start of the workers, not round 1, shows the cost.
    """
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def _train(conn: Connection, algorithm: Algorithm, client_data: Callable[[int], ClientData], lanes: Lanes) -> None:
    broadcast: Broadcast | None = None
    info: RoundInfo | None = None
    vectorize = True
    while True:
        message = _receive(conn)
        kind = message[0]
        if kind == "stop":
            return
        if kind == "round":
            _, broadcast, info, vectorize = message
            continue
        _, group, items = message
        try:
            ids = [c for c, _ in items]
            assert broadcast is not None and info is not None, "a round message comes before its groups"
            results = update_clients(
                algorithm, broadcast, [s for _, s in items], [client_data(c) for c in ids], [info.for_client(c) for c in ids], vectorize, lanes
            )
            results = [(replace(reply, arrays=to_cpu(reply.arrays)), to_cpu(state)) for reply, state in results]  # pickled: host tensors
            answer: tuple[str, Any, Any] = ("done", group, results)
        except Exception:
            answer = ("error", group, traceback.format_exc())
        _send(conn, answer)


def default_start_method(concurrent: int = 1) -> str:
    """``fork`` where it is safe and available (Linux, workers that run one client update at a time), else ``spawn``."""
    fork = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
    return "fork" if fork and concurrent == 1 else "spawn"


FORK_WITH_THREADS = "threads started in a forked worker that inherited torch's state crash now and then (a segfault in a client thread)"
"""Why worker processes that run concurrent client updates are spawned, not forked (see the module docstring)."""


@dataclass
class Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    step: int = -1
    """The round whose broadcast this worker holds."""


class WorkerClients(InProcessClients):
    """The client pool of ``run.workers = N`` (see the module docstring); ``close()`` stops the workers."""

    def __init__(
        self,
        algorithm: Algorithm,
        client_data: Callable[[int], ClientData],
        num_clients: int,
        states: Mapping[int, State] | None = None,
        *,
        workers: int,
        setup: WorkerSetup | None = None,
        start_method: str | None = None,
        threads: int = 1,
        client_size: Callable[[int], int] | None = None,
        concurrent: int = 1,
        device: str = "cpu",
        announce: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(algorithm, client_data, num_clients, states)
        self.size, self.threads, self.client_size = workers, threads, client_size
        self.announce = announce or (lambda line: None)
        self.concurrent, self.device = concurrent, device
        method = start_method or default_start_method(concurrent)
        if method == "fork" and concurrent > 1:
            raise ValueError(f"concurrent clients = {concurrent} in worker processes started by fork: {FORK_WITH_THREADS}; start them by 'spawn'")
        self.context = multiprocessing.get_context(method)
        if setup is None:
            if method != "fork":
                raise ValueError(f"worker processes started by {method!r} (with CUDA, or concurrent clients) need a picklable setup")
            setup = lambda: (algorithm, client_data)  # noqa: E731  (inherited by fork, never pickled)
        self.setup = setup
        self.workers: list[Worker] = []

    # -- lifecycle ----------------------------------------------------------------------
    def prepare(self, needed: int | None = None) -> None:
        """Start workers (once per run), up to ``needed`` of them (all by default), and wait until each has built the algorithm.

        A round starts no more workers than it has groups of clients to hand out, so
        ``workers`` beyond the clients of a round never become idle processes. They start
        together, then each is waited for; ``announce`` hears a line before (how many, how)
        and one after (how long it took), since a spawned worker rebuilds the experiment.
        """
        count = self.size if needed is None else min(self.size, max(1, needed))
        if len(self.workers) >= count:
            return
        method = self.context.get_start_method()
        new = count - len(self.workers)
        how = "fork" if method == "fork" else f"{method}: each rebuilds the experiment"
        self.announce(f"starting {new} worker process{'es' if new != 1 else ''} for the clients' updates (run.workers; {how})")
        started = time.perf_counter()
        if method == "fork":
            warm_up()
        launched: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
        try:
            for _ in range(new):
                launched.append(self._launch([conn for _, conn in launched]))
            for process, conn in launched:
                self.workers.append(self._ready(process, conn))
        except BaseException:
            for process, conn in launched:
                if not any(w.conn is conn for w in self.workers):
                    process.terminate()
                    conn.close()
            raise
        self.announce(f"{new} worker process{'es' if new != 1 else ''} ready after {time.perf_counter() - started:.1f} s")

    def _start(self) -> Worker:
        return self._ready(*self._launch([]))

    def _launch(self, starting: Sequence[Connection]) -> tuple[multiprocessing.process.BaseProcess, Connection]:
        """Start a worker process (``starting``: the pipe ends of those started beside it, not ready yet); its end of the pipe."""
        parent, child = self.context.Pipe()
        method = self.context.get_start_method()
        # a forked worker gets copies of this process's pipe ends (its own pipe's and the other
        # workers'): it closes them, else no worker would see its pipe end when this process dies
        inherited = [parent, *(w.conn for w in self.workers if not w.conn.closed), *starting] if method == "fork" else []
        tied_to = os.getpid() if method in ("fork", "spawn") else None  # a forkserver's children have another parent
        process = self.context.Process(  # type: ignore[attr-defined]  # typeshed: get_context(str) -> BaseContext, whose concrete kinds all have Process
            target=serve,
            args=(child, self.setup, self.threads, tied_to, inherited, _ignored_stop_signals(), (self.concurrent, self.device)),
            daemon=True,
            name="fedprior-worker",
        )
        with _stop_signals_held():
            process.start()
        child.close()
        return process, parent

    def _ready(self, process: multiprocessing.process.BaseProcess, parent: Connection) -> Worker:
        """Wait until a started worker has built the algorithm."""
        try:
            kind, detail = _receive(parent)
        except EOFError:
            process.join(timeout=5)
            raise WorkerError(f"a worker process exited while starting (exit code {process.exitcode})") from None
        if kind != "ready":
            raise WorkerError(f"a worker process could not build the experiment:\n{detail}")
        return Worker(process, parent)

    def close(self) -> None:
        """Stop the workers (they also stop by themselves when this process goes away)."""
        for worker in self.workers:
            try:
                _send(worker.conn, ("stop",))
            except OSError:
                pass
        for worker in self.workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=5)
            worker.conn.close()
        self.workers = []

    def __enter__(self) -> WorkerClients:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- a round ------------------------------------------------------------------------
    def groups(self, clients: Sequence[int], vectorize: bool) -> list[list[int]]:
        """One client per message (``concurrent`` clients with ``run.concurrent_clients``, trained at once in the worker), or,
        for a vectorized algorithm, one contiguous group per worker.

        The largest come first (``client_size``, where given), so that no worker is left
        with a big client while the others idle at the end of the round.
        """
        size = self.client_size
        if vectorize and self.algorithm.client_update_many is not None:
            count = min(self.size, len(clients))
            bounds = [round(i * len(clients) / count) for i in range(count + 1)]
            groups = [list(clients[a:b]) for a, b in itertools.pairwise(bounds)]
        else:
            order = sorted(clients, key=lambda c: -size(c)) if size is not None else list(clients)  # concurrent clients of like sizes
            step = self.concurrent if self.algorithm.thread_safe_updates else 1
            groups = [order[i : i + step] for i in range(0, len(order), step)]
        if size is not None:
            groups.sort(key=lambda group: -sum(size(c) for c in group))
        return groups

    def update(self, message: Broadcast, info: RoundInfo, step: int, clients: list[int], vectorize: bool) -> tuple[list[Reply], dict[int, str]]:
        if not clients:  # a round that sampled nobody (Poisson sampling): no worker is asked
            return [], {}
        pending = deque((group, 0) for group in self.groups(clients, vectorize))  # (clients, times redone)
        self.prepare(len(pending))
        idle = list(self.workers)
        busy: dict[int, tuple[Worker, list[int], int]] = {}
        results: dict[int, tuple[Reply, State]] = {}
        failures: dict[int, str] = {}
        while pending or busy:
            while pending and idle:
                worker = idle.pop()
                group, redone = pending.popleft()
                worker = self._dispatch(worker, message, info, step, vectorize, group)
                busy[id(worker)] = (worker, group, redone)
            ready = wait([w.conn for w, _, _ in busy.values()] + [w.process.sentinel for w, _, _ in busy.values()])
            for key, (worker, group, redone) in list(busy.items()):
                if worker.conn not in ready and worker.process.sentinel not in ready:
                    continue
                del busy[key]
                try:
                    kind, _, payload = _receive(worker.conn)
                except (EOFError, OSError, pickle.UnpicklingError):
                    reason = f"{self._died(worker)} during the update"
                    idle.append(self._replace(worker))
                    if redone < REDOS:
                        warnings.warn(f"{reason} of clients {group}; a new worker redoes their updates", RuntimeWarning, stacklevel=2)
                        pending.appendleft((group, redone + 1))
                    else:
                        failures.update({c: f"{reason}; each of the {redone + 1} workers that trained it died" for c in group})
                    continue
                if kind == "error":
                    raise WorkerError(f"a client update failed in worker process {worker.process.pid}:\n{payload}")
                results.update({reply.client_id: (reply, state) for reply, state in payload})
                idle.append(worker)
        for client_id, (_, state) in results.items():
            if state:
                self._states[client_id] = state
        return [results[c][0] for c in clients if c in results], failures

    def _dispatch(self, worker: Worker, message: Broadcast, info: RoundInfo, step: int, vectorize: bool, group: list[int]) -> Worker:
        """Send ``group`` (and the round's broadcast, if this worker lacks it); a worker found dead is replaced first."""
        for _attempt in range(2):
            try:
                if not worker.process.is_alive():
                    raise BrokenPipeError
                if worker.step != step:
                    _send(worker.conn, ("round", Broadcast(to_cpu(message.arrays), message.config), info, vectorize))  # pickled: host tensors
                    worker.step = step
                _send(worker.conn, ("train", group, [(c, self._states.get(c, {})) for c in group]))
                return worker
            except OSError:  # it died between rounds: nothing of this round was lost
                warnings.warn(f"{self._died(worker)} between updates; a new worker takes its place (no update lost)", RuntimeWarning, stacklevel=2)
                worker = self._replace(worker)
        raise WorkerError("worker processes die as soon as they start")

    def _died(self, worker: Worker) -> str:
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return f"worker process {worker.process.pid} died ({how})"

    def _replace(self, worker: Worker) -> Worker:
        """Start a new worker in place of a dead one."""
        worker.conn.close()
        fresh = self._start()
        self.workers[self.workers.index(worker)] = fresh
        return fresh
