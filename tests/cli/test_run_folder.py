"""What the third robustness probe found (issue 33 item 11), one test each: a full disk under TensorBoard, a run folder
a resume holds, a finished run on a read-only folder, a module that exits while imported, an empty preset name,
``table --out FILE``, refusals before the data loads, and the dry run refusing what the run refuses."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import TINY, error_line, fedprior, invoke


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-round run (copied by the tests that change it)."""
    root = tmp_path_factory.mktemp("finished")
    result = invoke("run", "fedavg-cnn", *TINY, "--run-dir", root / "run", "--json", cache=root / "cache")
    assert result.exit_code == 0, result.stderr
    return root / "run"


def full_disk_when(monkeypatch, full) -> None:
    """TensorBoard's writes fail with ENOSPC (no file named, as its writer thread raises it) once ``full()`` holds."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    write, flush = RecordWriter.write, RecordWriter.flush

    def failing(method):
        def call(self, *args):
            if full():
                raise OSError(errno.ENOSPC, "No space left on device")
            return method(self, *args)

        return call

    monkeypatch.setattr(RecordWriter, "write", failing(write))
    monkeypatch.setattr(RecordWriter, "flush", failing(flush))


def test_a_full_disk_under_tensorboard_after_the_result_names_the_file_and_no_resume(tmp_path, monkeypatch):
    run = tmp_path / "run"
    full_disk_when(monkeypatch, lambda: (run / "result.json").exists())
    line = error_line(invoke("run", "fedavg-cnn", *TINY, "--run-dir", run))
    assert line.startswith(f"error: cannot write {run / 'tensorboard'}/events.out.tfevents.") and "No space left on device" in line
    assert "had finished" in line and "resume" not in line


def test_a_full_disk_under_tensorboard_mid_run_names_the_file_and_the_resume(tmp_path, monkeypatch):
    run = tmp_path / "run"
    full_disk_when(monkeypatch, lambda: (run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().count("\n") >= 1)
    line = error_line(invoke("run", "fedavg-cnn", *TINY, "--run-dir", run))
    assert f"cannot write {run / 'tensorboard'}/events.out.tfevents." in line and line.endswith(f"then `fedprior resume {run}` continues the run")


def test_a_new_run_in_a_folder_a_resume_holds_names_the_process(finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    holder = subprocess.Popen(  # what `fedprior resume RUN` holds while it trains
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from fedprior.results.run_dir import RunDir\n"
            "with RunDir(Path(sys.argv[1])).locked():\n    print('locked', flush=True); time.sleep(120)",
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


def test_a_module_that_exits_while_imported_is_one_error_line(tmp_path):
    (tmp_path / "exits.py").write_text("import sys\n\nsys.exit(3)\n")
    done = fedprior("algorithms", "--import", "exits", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: --import: importing module 'exits' called sys.exit(3); a module named here is imported, not run: "
        'put what runs as a script under `if __name__ == "__main__":`'
    )


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_preset_name_is_named_as_such(name):
    line = error_line(invoke("presets", "show", name))
    assert line.startswith(f"error: an empty preset name {name!r}; accepted: dp-fedavg-cnn, fedadagrad-cnn, ") and line.endswith("(or a path to a .toml file)")


@pytest.mark.parametrize(
    "command, what",
    [(["table", "fst-cbdg-table1", "--embedded"], "table"), (["run", "fedavg-cnn", *TINY, "--seeds", "2"], "sweep")],
    ids=["table", "sweep"],
)
def test_out_naming_a_file_is_blamed_on_out_before_anything_is_printed(tmp_path, command, what):
    taken = tmp_path / "taken.txt"
    taken.write_text("not a folder")
    for out in (taken, taken / "below"):
        result = invoke(*command, "--out", out)
        line = f"error: --out: {taken} is a file, not a folder; give a new folder, or the folder of a stopped {what} to continue it"
        assert error_line(result) == line and result.stderr.strip() == line  # no banner, no run started


@pytest.mark.parametrize(
    "preset, setting, refusal",
    [
        ("mfcl", "run.precision=bf16", "error: run.precision: algorithm 'mfcl' trains and evaluates in fp32 only"),
        ("scaffold-cnn", "run.compile=true", "error: run.compile: compiles on an accelerator only"),
    ],
)
def test_precision_and_compile_are_refused_before_the_data_loads(monkeypatch, preset, setting, refusal):
    from fedprior.experiments import build, dry_run

    def no_data(*args, **kwargs):
        raise AssertionError("the data was loaded before the refusal")

    monkeypatch.setattr(build, "prepared_data", no_data)
    monkeypatch.setattr(dry_run, "planned_split", no_data)
    assert error_line(invoke("run", preset, "--set", setting, "--set", "run.device=cpu")).startswith(refusal)
    if setting.startswith("run.precision"):  # the dry run refuses it too (compile on the CPU is the device's, which a dry run leaves alone)
        assert error_line(invoke("run", preset, "--set", setting, "--dry-run")).startswith(refusal)


def test_the_dry_run_refuses_concurrent_clients_where_the_run_does():
    small = ["--set", "data.dataset=digits", "--set", "data.train_subset=0", "--set", "run.concurrent_clients=2", "--set", "run.workers=1"]
    refused = error_line(invoke("run", "fedbm-fedproto", *small, "--set", "federation.rounds=1"))
    assert refused.startswith("error: run.concurrent_clients: algorithm 'fedproto' trains its clients one at a time")
    assert error_line(invoke("run", "fedbm-fedproto", *small, "--dry-run")) == refused
    assert invoke("run", "fedbm-fedavg", *small, "--dry-run").exit_code == 0  # an algorithm whose updates may run at once
