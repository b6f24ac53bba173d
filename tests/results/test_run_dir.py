"""A run folder's safety (issue 7, items 3, 4, 7, 7b, 10): checksummed checkpoints with the
previous one kept, resume refusing an edited config (rounds may grow), one process per run
folder, no writing into a folder that is not a run, a damaged partition.npz rewritten, and
the report. Ctrl-C saying how to resume: tests/runtime/test_workers_processes.py (with worker processes)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import TINY, error_line, invoke

REFERENCE_ROUNDS = 3


def history(result) -> list[float]:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["history"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A finished 2-round run, and the same experiment run for 3 rounds (the reference for resumes)."""
    root = tmp_path_factory.mktemp("runs")
    cache = root / "cache"
    two = invoke("run", "fedavg-cnn", *TINY, "--run-dir", root / "two", "--json", cache=cache)
    three = invoke("run", "fedavg-cnn", *TINY, "--set", f"federation.rounds={REFERENCE_ROUNDS}", "--run-dir", root / "three", "--json", cache=cache)
    return {"root": root, "two": history(two), "three": history(three)}


def copy(runs, tmp_path: Path, name: str = "two") -> Path:
    target = tmp_path / name
    shutil.copytree(runs["root"] / name, target)
    return target


def set_rounds(run: Path, rounds: int) -> None:
    text = (run / "config.toml").read_text()
    assert "rounds = 2\n" in text
    (run / "config.toml").write_text(text.replace("rounds = 2\n", f"rounds = {rounds}\n", 1))


# ----------------------------------------------------------------------------- item 3: checksum, previous checkpoint


def test_flipped_checkpoint_bytes_are_detected_and_the_previous_checkpoint_resumes(runs, tmp_path):
    run = copy(runs, tmp_path, "three")
    assert (run / "checkpoint.previous.safetensors").is_file()  # the last two checkpoints are kept
    data = bytearray((run / "checkpoint.safetensors").read_bytes())
    for i in range(len(data) - 2000, len(data), 997):  # tensor data, not the header
        data[i] ^= 0xA5
    (run / "checkpoint.safetensors").write_bytes(bytes(data))
    line = error_line(invoke("resume", run))
    assert "checksum mismatch" in line
    assert f"the previous checkpoint (after 2 rounds) is intact: `fedprior resume {run} --previous`" in line
    resumed = invoke("resume", run, "--previous", "--json")
    assert history(resumed) == runs["three"]  # round 3 trained again from round 2's state: the same numbers
    assert invoke("resume", run, "--json").exit_code == 0  # the damaged file was replaced


def test_no_intact_checkpoint_says_how_to_start_again(runs, tmp_path):
    run = copy(runs, tmp_path)
    for name in ("checkpoint.safetensors", "checkpoint.previous.safetensors"):
        (run / name).write_bytes(b"garbage")
    line = error_line(invoke("resume", run))
    assert f"no intact earlier checkpoint: start again with `fedprior run {run / 'config.toml'} --run-dir NEW_FOLDER`" in line


# ----------------------------------------------------------------------------- item 4: the config is the run's


@pytest.mark.parametrize(
    "edit, field",
    [
        (("\nseed = 0", "\nseed = 7"), "run.seed (0 in the checkpoint, 7 now)"),
        (("num_clients = 4", "num_clients = 3"), "federation.num_clients (4 in the checkpoint, 3 now)"),
    ],
)
def test_resume_refuses_an_edited_config_naming_the_fields(runs, tmp_path, edit, field):
    run = copy(runs, tmp_path)
    text = (run / "config.toml").read_text()
    assert edit[0] in text
    (run / "config.toml").write_text(text.replace(edit[0], edit[1], 1))
    line = error_line(invoke("resume", run))
    assert f"{run / 'config.toml'} differs from the run's checkpoint: {field}" in line
    assert json.loads((run / "result.json").read_text())["seed"] == 0  # nothing was rewritten


def test_raising_rounds_trains_further_like_a_longer_run(runs, tmp_path):
    run = copy(runs, tmp_path)
    set_rounds(run, REFERENCE_ROUNDS)
    starts = []
    from fedprior.experiments.runner import resume

    summary = resume(run, on_start=lambda experiment, total, done: starts.append((total, done)))
    assert starts == [(REFERENCE_ROUNDS, 2)]  # the progress bar starts at 2/3, not 0/3
    assert summary["history"] == runs["three"] and summary["rounds"] == REFERENCE_ROUNDS


def test_lowering_rounds_below_the_checkpoint_is_refused(runs, tmp_path):
    run = copy(runs, tmp_path)
    set_rounds(run, 1)
    line = error_line(invoke("resume", run))
    assert "federation.rounds: the checkpoint already holds 2 rounds" in line and "set at least 2" in line


def test_rounds_of_a_finished_stage_cannot_change():
    from fedprior.algorithms.base import Algorithm, Stage
    from fedprior.errors import ConfigError
    from fedprior.experiments.resume_check import check_rounds
    from fedprior.runtime.checkpoint import Progress

    two_stages = Algorithm("x", (), None, None, None, None, None, stages=(Stage("federated"), Stage("server", rounds=2)))
    done = Progress(stage_index=1, round=1, history=[{"stage": "federated"}] * 5 + [{"stage": "server"}])
    check_rounds(two_stages, 5, done)  # unchanged: fine
    with pytest.raises(ConfigError, match="stage 'federated' already finished after 5 rounds"):
        check_rounds(two_stages, 6, done)


# ----------------------------------------------------------------------------- item 7: one process per run folder


def test_a_run_folder_in_use_is_refused_and_a_stale_lock_is_taken_over(runs, tmp_path):
    run = copy(runs, tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; f = open(sys.argv[1], 'a+'); fcntl.lockf(f, fcntl.LOCK_EX); "
            "f.write(str(os.getpid())); f.flush(); print('locked', flush=True); time.sleep(120)",
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


def test_a_killed_runs_forked_children_do_not_keep_the_lock(runs, tmp_path):
    """A child forked by a run that outlives it after kill -9 (run.workers' workers did before issue 15) must not keep its lock."""
    run = copy(runs, tmp_path)
    script = (
        "import os, sys, time\nfrom pathlib import Path\nfrom fedprior.results.run_dir import RunDir\n"
        "with RunDir(Path(sys.argv[1])).locked():\n"
        "    child = os.fork()\n"
        "    if child == 0:\n        os.close(1)\n        os.close(2)\n        time.sleep(120)\n        os._exit(0)\n"
        "    print(child, flush=True)\n    os.kill(os.getpid(), 9)\n"
    )
    parent = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, timeout=120)
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
def test_resume_rewrites_a_damaged_partition_file(runs, tmp_path, damage):
    run = copy(runs, tmp_path)
    original = (run / "partition.npz").read_bytes()
    if damage == "garbage":
        (run / "partition.npz").write_bytes(os.urandom(500))
    else:
        (run / "partition.npz").unlink()
    set_rounds(run, REFERENCE_ROUNDS)  # a resume that trains (one of a finished run changes nothing: test_batch_output.py)
    assert invoke("resume", run).exit_code == 0
    assert (run / "partition.npz").read_bytes() == original


# ----------------------------------------------------------------------------- item 10: report


def test_report_describes_the_run_that_ran_and_names_what_differs_from_the_preset(runs):
    """A digits run on 4 clients made from fedavg-cnn is not described as the preset's Fashion-MNIST on 100 clients (issue 33 item 2)."""
    from fedprior.experiments.config import list_presets

    run = runs["root"] / "two"
    report = (run / "report.md").read_text()
    described = "fedavg on digits: 4 clients, IID, 50% per round, 2 rounds, 1 local epoch, batch 32 (made from the preset 'fedavg-cnn')"
    assert report.splitlines()[2] == described
    assert json.loads((run / "result.json").read_text())["description"] == described
    assert f'description = "{described}"' in (run / "config.toml").read_text()
    assert f"Changed from the preset 'fedavg-cnn', described as \"{list_presets()['fedavg-cnn']}\":" in report
    assert "federation.rounds = 2 (preset: 20)" in report and "data.dataset = 'digits' (preset: 'fashion-mnist')" in report
    # the thread settings as words, not a Python dict (issue 33 item 10)
    assert "| torch threads | train 1, evaluate " in report and "{'train'" not in report and "| worker processes | 1 |" in report


def test_a_checkpoint_of_the_previous_format_still_resumes_with_a_warning(runs, tmp_path):
    """Checkpoints written before checksums existed (progress metadata only) load, with a warning; tensors alone do not."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from fedprior.runtime.checkpoint import CheckpointError, load_checkpoint

    path = copy(runs, tmp_path) / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as handle:
        metadata, tensors = handle.metadata(), {k: handle.get_tensor(k) for k in handle.keys()}
    save_file(tensors, str(path), metadata={"progress": metadata["progress"]})
    with pytest.warns(UserWarning, match="older fedprior without a checksum"):
        assert load_checkpoint(path).progress.round == 2
    save_file(tensors, str(path))
    with pytest.raises(CheckpointError, match="lacks its metadata"):
        load_checkpoint(path)
