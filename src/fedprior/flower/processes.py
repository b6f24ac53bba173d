"""The processes of a local Flower federation: found, tied to their parent, stopped, never left behind.

Flower's processes start more processes (a SuperLink its ServerApp's superexec and the
ServerApp, each SuperNode a superexec and a ClientApp per message), some in sessions
of their own, and they outlive a parent that is killed. So every process of one
federation carries a mark in its environment, ``FEDPRIOR_FEDERATION=<its folder>``,
which children inherit; :func:`members` finds them by it wherever they were reparented.

Three lines of defence against leftovers:

1. the processes ``fedprior flower local`` starts get ``PR_SET_PDEATHSIG`` (Linux, via
   ``prctl``; :func:`fedprior.orphans.die_with_parent`, shared with ``run.workers``'s
   worker processes): the kernel kills them when the thread that started them dies,
   even by SIGKILL;
2. a small watcher process (:mod:`fedprior.flower.reaper`) polls its parent's PID and,
   when the parent is gone, kills every member of the federation;
3. a pid file in the federation's folder (``processes.json``: the parent, the watcher and
   the members) lets the next ``flower local`` or ``resume`` on that run refuse while its
   parent still runs, and otherwise stop whatever is left (:func:`take_over`).

Only this module's functions touch other processes, and only those carrying the mark
(or listed in the pid file with the same start time, so a reused PID is never hit).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedprior.errors import FedpriorError
from fedprior.orphans import die_with_parent as die_with_parent  # re-exported: the preexec_fn of the processes it starts

MARK = "FEDPRIOR_FEDERATION"
PID_FILE = "processes.json"

# -- /proc ---------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), to tell a process from a later one with its PID."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    fields = _stat(pid)
    if fields is not None:
        return fields[0] != "Z"
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()] if os.path.isdir("/proc") else []


def _children() -> dict[int, list[int]]:
    """ppid -> child pids, from /proc (Flower starts some helpers in sessions of their own)."""
    out: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None:
            out.setdefault(int(fields[1]), []).append(pid)
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants, parents first."""
    children, tree, queue = _children(), [], [pid]
    while queue:
        current = queue.pop(0)
        tree.append(current)
        queue.extend(children.get(current, []))
    return tree


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def members(mark: str) -> list[int]:
    """The live processes whose environment carries ``FEDPRIOR_FEDERATION=<mark>`` (this process excluded)."""
    entry = f"{MARK}={mark}".encode()
    found = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if entry in environment and alive(pid):
            found.append(pid)
    return found


# -- stopping ------------------------------------------------------------------------------------


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def stop_process(process: subprocess.Popen, grace: float = 5.0, hard: bool = False) -> None:
    """Stop ``process`` and every process it started: SIGTERM (SIGKILL if ``hard``), then SIGKILL after ``grace``."""
    if process.poll() is not None and not any(alive(p) for p in process_tree(process.pid)[1:]):
        return
    tree = process_tree(process.pid)
    _signal(tree, signal.SIGKILL if hard else signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        process.poll()
        tree = list(dict.fromkeys(tree + [p for q in tree if alive(q) for p in process_tree(q)]))
        if not any(alive(p) for p in tree):
            break
        time.sleep(0.1)
    _signal([p for p in tree if alive(p)], signal.SIGKILL)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass


def sweep(mark: str, pids: Sequence[int] = (), timeout: float = 10.0) -> list[int]:
    """SIGKILL every member of the federation ``mark`` (and ``pids``), again until none is left; returns those killed."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        targets = [p for p in dict.fromkeys([*pids, *members(mark)]) if alive(p)]
        if not targets:
            break
        _signal(targets, signal.SIGKILL)
        killed.extend(p for p in targets if p not in killed)
        time.sleep(0.1)
    return killed


# -- the pid file --------------------------------------------------------------------------------


def _describe(pid: int) -> dict[str, Any]:
    return {"pid": pid, "start": start_time(pid), "command": command_line(pid)[:300]}


def write_pid_file(folder: Path, mark: str, watcher: int | None, pids: list[int]) -> None:
    """``folder/processes.json``: this process (the parent), the watcher, and the federation's processes."""
    record = {"mark": mark, "parent": _describe(os.getpid()), "watcher": _describe(watcher) if watcher else None, "processes": [_describe(p) for p in pids]}
    path = Path(folder) / PID_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


def _same(entry: Any) -> int | None:
    """The pid of a pid-file entry if that very process (same start time) still runs."""
    if not isinstance(entry, dict) or not isinstance(entry.get("pid"), int):
        return None
    pid = entry["pid"]
    return pid if alive(pid) and start_time(pid) == entry.get("start") else None


def take_over(folder: Path, mark: str, run_dir: Path) -> list[int]:
    """Before a federation starts in ``folder``: refuse if another live process runs one there; stop leftovers.

    Leftovers are the members of the federation ``mark`` and the processes the pid file
    lists (same start time) whose parent is gone. Returns the PIDs stopped (and warns).
    """
    path = Path(folder) / PID_FILE
    try:
        record = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    parent = _same(record.get("parent"))
    if parent is not None and parent != os.getpid():
        raise FedpriorError(
            f"{run_dir}: a `fedprior flower local` (process {parent}) is still running this federation; stop it first (kill {parent}) or wait for it to end"
        )
    listed = [p for p in (_same(e) for e in [record.get("watcher"), *(record.get("processes") or [])]) if p is not None]
    stopped = sweep(mark, listed)
    if stopped:
        warnings.warn(
            f"stopped {len(stopped)} processes left running by an earlier `fedprior flower local` on {run_dir} (PIDs {', '.join(map(str, stopped))})",
            RuntimeWarning,
            stacklevel=2,
        )
    path.unlink(missing_ok=True)
    return stopped
