"""A run folder's safety (issue 7, items 4, 7, 7b): one process per run folder, no writing into a folder that is not a
run, a damaged partition.npz rewritten. Checksummed checkpoints: tests/runtime/test_checkpoint.py; a resume's checks:
tests/experiments/test_resume_check.py; Ctrl-C saying how to resume: tests/runtime/test_workers_processes.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import TINY, error_line, invoke
from tests.support.run_folders import REFERENCE_ROUNDS, copy, set_rounds

# ----------------------------------------------------------------------------- item 3: checksum, previous checkpoint


# ----------------------------------------------------------------------------- item 4: the config is the run's


# ----------------------------------------------------------------------------- item 7: one process per run folder


def test_a_run_folder_in_use_is_refused_and_a_stale_lock_is_taken_over(finished_runs, tmp_path):
    run = copy(finished_runs, tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; f = open(sys.argv[1], 'a+'); fcntl.lockf(f, fcntl.LOCK_EX); "
            "f.write(str(os.getpid())); f.flush(); print('locked', flush=True); time.sleep(3600)",
            str(run / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        line = error_line(invoke("resume", run))
        assert f"run directory {run} is in use by process {holder.pid}" in line
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone and its lock file (with its PID) is still there: taken over
    assert (run / "run.lock").read_text().strip() == str(holder.pid)
    assert invoke("resume", run).exit_code == 0
    assert not (run / "run.lock").exists()


def test_a_killed_runs_forked_children_do_not_keep_the_lock(finished_runs, tmp_path):
    """A child forked by a run that outlives it after kill -9 (run.workers' workers did before issue 15) must not keep its lock."""
    run = copy(finished_runs, tmp_path)
    script = (
        "import os, sys, time\nfrom pathlib import Path\nfrom fedprior.results.run_dir import RunDir\n"
        "with RunDir(Path(sys.argv[1])).locked():\n"
        "    child = os.fork()\n"
        "    if child == 0:\n        os.close(1)\n        os.close(2)\n        time.sleep(3600)\n        os._exit(0)\n"
        "    print(child, flush=True)\n    os.kill(os.getpid(), 9)\n"
    )
    parent = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, timeout=300)
    child = int(parent.stdout.split()[0])
    try:
        assert parent.returncode == -signal.SIGKILL and (run / "run.lock").is_file()
        assert invoke("resume", run).exit_code == 0
    finally:
        os.kill(child, signal.SIGKILL)


# ----------------------------------------------------------------------------- item 7b: not a run, damaged partition


def test_a_non_empty_folder_that_is_not_a_run_is_refused(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "result.json").write_text("mine")
    line = error_line(invoke("run", "fedavg-cnn", *TINY, "--run-dir", folder))
    assert f"--run-dir: {folder} is not empty (result.json) and is not a fedprior run" in line
    assert (folder / "result.json").read_text() == "mine"


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_resume_rewrites_a_damaged_partition_file(finished_runs, tmp_path, damage):
    run = copy(finished_runs, tmp_path)
    original = (run / "partition.npz").read_bytes()
    if damage == "garbage":
        (run / "partition.npz").write_bytes(os.urandom(500))
    else:
        (run / "partition.npz").unlink()
    set_rounds(run, REFERENCE_ROUNDS)  # a resume that trains (one of a finished run changes nothing: test_batch_output.py)
    assert invoke("resume", run).exit_code == 0
    assert (run / "partition.npz").read_bytes() == original


# ----------------------------------------------------------------------------- item 10: report


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device whose writes fail with ENOSPC)")
def test_a_full_disk_while_appending_metrics_names_metrics_jsonl(tmp_path):
    """Probe 5 #10: the error of a write to an open handle has no file name; the run's line said `cannot write a file`."""
    from fedprior.results.run_dir import RunDir

    run = RunDir(tmp_path)
    run.metrics.symlink_to("/dev/full")
    with pytest.raises(OSError) as caught:
        run.append_metrics({"step": 1})
    assert (caught.value.filename, caught.value.strerror) == (str(run.metrics), "No space left on device")
