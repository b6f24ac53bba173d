"""A local federation's processes die with their parent and are found and stopped when one was left behind.

No Flower here: ``sleep`` processes carrying the federation's mark stand in for its
SuperLink and SuperNodes (tests/flower/test_local.py kills the real ones).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fedprior.errors import FedpriorError
from fedprior.flower import processes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")


@pytest.fixture
def spawn():
    """Start a process (with the federation's mark if given); every one is killed when the test ends."""
    started = []

    def start(*command, mark=None):
        env = {**os.environ, **({processes.MARK: mark} if mark else {})}
        started.append(subprocess.Popen(list(command or ("sleep", "60")), env=env))
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait()


def gone_within(pids, seconds=120.0):
    """Whether ``pids`` are all gone within ``seconds`` (generous: it returns as soon as they are; a loaded machine takes
    seconds to start the watcher's Python, issue 56 item 7)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(processes.alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def pid_file(folder, mark, parent):
    entry = {"pid": parent, "start": processes.start_time(parent)}
    (folder / processes.PID_FILE).write_text(json.dumps({"mark": mark, "parent": entry, "watcher": None, "processes": []}))


def test_leftovers_of_a_dead_parent_are_stopped_even_reparented_ones(tmp_path, spawn):
    mark = str(tmp_path)
    dead = spawn("true")
    pid_file(tmp_path, mark, dead.pid)
    dead.wait()
    node = spawn(mark=mark)
    spawn("sh", "-c", "sleep 60 & echo $!", mark=mark).wait()  # its sleep is reparented when sh exits
    other = spawn()  # not of this federation
    assert node.pid in processes.members(mark) and len(processes.members(mark)) == 2
    with pytest.warns(RuntimeWarning, match="stopped 2 processes left running"):
        stopped = processes.take_over(tmp_path, mark, tmp_path)
    assert node.pid in stopped and gone_within(stopped) and processes.members(mark) == []
    assert other.poll() is None and not (tmp_path / processes.PID_FILE).exists()


def test_a_federation_whose_parent_still_runs_is_refused_and_left_alone(tmp_path, spawn):
    mark = str(tmp_path)
    parent, node = spawn(), spawn(mark=mark)
    pid_file(tmp_path, mark, parent.pid)
    with pytest.raises(FedpriorError, match=f"process {parent.pid}.* is still running"):
        processes.take_over(tmp_path, mark, tmp_path)
    assert node.poll() is None and parent.poll() is None


def test_the_watcher_stops_the_federation_when_its_parent_is_killed(tmp_path):
    """The parent (a shell here) starts the watcher and a marked process, then gets SIGKILL."""
    mark = str(tmp_path)
    script = f"{sys.executable} -m fedprior.flower.reaper $$ '{mark}' & {processes.MARK}='{mark}' sleep 60 & wait"
    parent = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 120
    while not processes.members(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    node = processes.members(mark)
    assert len(node) == 1
    time.sleep(0.5)  # the watcher may be up or still starting: one started after its parent died sweeps at once
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert gone_within(node)


def test_a_child_started_with_die_with_parent_is_killed_by_the_kernel_with_its_parent(tmp_path):
    code = (
        "import subprocess, sys, time; from fedprior.flower.processes import die_with_parent; "
        "p = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent); print(p.pid, flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert processes.alive(child)
    parent.kill()
    parent.wait()
    assert gone_within([child])
