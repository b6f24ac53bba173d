"""A run folder through ``fedprior run`` and ``resume`` (issue 33 item 11): a new run in a folder a resume holds names
the process, and a finished run on a read-only folder writes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import TINY, error_line, invoke


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-round run (copied by the tests that change it)."""
    root = tmp_path_factory.mktemp("finished")
    result = invoke("run", "fedavg-cnn", *TINY, "--run-dir", root / "run", "--json", cache=root / "cache")
    assert result.exit_code == 0, result.stderr
    return root / "run"


def test_a_new_run_in_a_folder_a_resume_holds_names_the_process(finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    holder = subprocess.Popen(  # what `fedprior resume RUN` holds while it trains
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from fedprior.results.run_dir import RunDir\n"
            "with RunDir(Path(sys.argv[1])).locked():\n    print('locked', flush=True); time.sleep(3600)",
            str(run),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        line = error_line(invoke("run", "fedavg-cnn", *TINY, "--run-dir", run))
        assert line == f"error: --run-dir: {run} holds a run that is in use by process {holder.pid}; give another folder"
    finally:
        holder.kill()
        holder.wait()
    assert "resume it with" in error_line(invoke("run", "fedavg-cnn", *TINY, "--run-dir", run))  # nobody holds it now


def as_a_reader(command: list[str], folder: Path, **kwargs) -> subprocess.CompletedProcess:
    """``command`` as a user who cannot write ``folder``: the folder made read-only, and run as nobody where the tests run
    as root (whom permissions do not stop)."""
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    scratch = Path(tempfile.mkdtemp())  # where the reader may write: its cache and home
    scratch.chmod(0o777)
    env = {**os.environ, "FEDPRIOR_CACHE": str(scratch), "HOME": str(scratch), "MPLCONFIGDIR": str(scratch)}
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    if drop and subprocess.run([*drop, sys.executable, "-c", "import fedprior"], capture_output=True, env=env).returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.skip(f"uid 65534 cannot import fedprior from {sys.executable} (a checkout in a folder only root can read)")
    try:
        return subprocess.run([*drop, *command], capture_output=True, text=True, env=env, **kwargs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_resuming_a_finished_run_in_a_read_only_folder_writes_nothing_and_says_it_finished(finished):
    shared = Path(tempfile.mkdtemp())  # readable by any user, unlike pytest's folders
    shared.chmod(0o755)
    run = shared / "run"
    shutil.copytree(finished, run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    try:
        done = as_a_reader([sys.executable, "-m", "fedprior", "resume", str(run)], run, timeout=300)
        assert done.returncode == 0, done.stderr
        assert f"{run} has finished (2 rounds; result.json); nothing to do" in done.stderr
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    finally:
        for path in [run, *run.rglob("*")]:
            path.chmod(0o755)
        shutil.rmtree(shared)
