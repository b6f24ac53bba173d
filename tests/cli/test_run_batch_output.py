"""Issue 15, items 3 and 5: a run under a scheduler (stderr a file) shows one plain line per
round as it goes, every run folder holds a run.log with those lines, appended on resume;
and a resume of a finished run says so and changes nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import fedprior
from tests.support.cli import TINY, invoke, sigint_as_from_a_terminal

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
ROUND = re.compile(
    STAMP + r"round (\d+)/(\d+) \(federated\): accuracy \d+\.\d\d%, loss \d+\.\d{4}, train loss \d+\.\d{4}, clients (\d+) ok (\d+) failed, \d+\.\d s$"
)
SUMMARY = re.compile(r"fedavg-cnn: final accuracy \d+\.\d\d% \(best .*\) after (\d+) rounds in .* s on cpu \(1 worker\); run directory ")


def unstamped(lines: list[str]) -> list[str]:
    return [re.sub("^" + STAMP, "", line) for line in lines]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and its modification time (ns)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-round run made through the Python API (so run.log is the library's, not the CLI's)."""
    root = tmp_path_factory.mktemp("finished")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FEDPRIOR_CACHE", str(root / "cache"))
        result = fedprior.run("fedavg-cnn", [arg for arg in TINY if arg != "--set"], run_dir=root / "run")
    return result.run_dir


def copy(finished: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(finished, target)
    return target


# ----------------------------------------------------------------------------- item 3: one line per round, run.log


def test_the_library_writes_run_log(finished):
    lines = (finished / "run.log").read_text().splitlines()
    assert re.fullmatch(STAMP + r"started fedavg-cnn: fedavg on digits, 4 clients, 2 rounds, seed 0, cpu \(1 worker\)", lines[0]), lines[0]
    assert re.fullmatch(STAMP + r"round 0/2: initial model, accuracy \d+\.\d\d%, loss \d+\.\d{4}", lines[1]), lines[1]
    rounds = [ROUND.match(line) for line in lines[2:4]]
    assert all(rounds) and [int(m.group(1)) for m in rounds] == [1, 2] and all(m.group(3) == "2" and m.group(4) == "0" for m in rounds), lines
    assert SUMMARY.search(lines[4]) and str(finished) in lines[4] and len(lines) == 5


def test_stderr_to_a_file_gets_one_flushed_line_per_round_and_run_log_appends_on_resume(tmp_path):
    """`fedprior run ... 2> file` (a scheduler's log): the lines are there while the run goes, with no bar's control
    characters; Ctrl-C and a resume leave both parts in run.log, the resume saying where it went on."""
    run, log = tmp_path / "run", tmp_path / "stderr.txt"
    env = {**os.environ, "FEDPRIOR_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "fedprior", "run", "fedavg-cnn", *TINY, "--set", "federation.rounds=500", "--run-dir", str(run)]
    with log.open("w") as handle:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=handle, preexec_fn=sigint_as_from_a_terminal)
        deadline = time.time() + 600
        while time.time() < deadline and process.poll() is None and not re.search(r"round 2/500", log.read_text()):
            time.sleep(0.05)
        assert process.poll() is None, log.read_text()  # still running: the lines were flushed as the rounds ended
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=300) == 130
    text = log.read_text()
    assert "\x1b" not in text and "\r" not in text and "━" not in text, repr(text[:500])
    printed = text.splitlines()
    assert printed[0].endswith("started fedavg-cnn: fedavg on digits, 4 clients, 500 rounds, seed 0, cpu (1 worker)")
    steps = [int(m.group(1)) for m in map(ROUND.match, printed) if m]
    assert len(steps) >= 2 and steps == list(range(1, len(steps) + 1)), printed
    assert printed[-1] == f"interrupted (SIGINT); resume with `fedprior resume {run}`"

    # run.log: the same lines (start, round 0, rounds 1..), and why it stopped. Ctrl-C may land after a round's
    # checkpoint and before its lines: run.log may be one round ahead of stderr, the checkpoint one ahead of run.log.
    first = (run / "run.log").read_text().splitlines()
    logged = len(first) - 3
    assert logged in (len(steps), len(steps) + 1) and unstamped(first[: len(steps) + 2]) == unstamped(printed[: len(steps) + 2]), (first, printed)
    assert re.fullmatch(STAMP + rf"stopped after round {logged}/500: interrupted \(SIGINT\); resume with `fedprior resume {run}`", first[-1]), first[-1]
    from fedprior.runtime.checkpoint import load_checkpoint

    done = len(load_checkpoint(run / "checkpoint.safetensors").progress.history)
    assert done in (logged, logged + 1)

    config = (run / "config.toml").read_text()
    (run / "config.toml").write_text(config.replace("rounds = 500\n", f"rounds = {done + 1}\n", 1))
    resumed = invoke("resume", run)
    assert resumed.exit_code == 0, resumed.output
    lines = (run / "run.log").read_text().splitlines()
    assert lines[: len(first)] == first  # appended, not rewritten
    added = lines[len(first) :]
    assert re.fullmatch(STAMP + rf"resumed fedavg-cnn after round {done}/{done + 1}: fedavg on digits, .*", added[0]), added
    assert ROUND.match(added[1]) and ROUND.match(added[1]).group(1) == str(done + 1) and SUMMARY.search(added[2]) and len(added) == 3
    assert unstamped(added[:2]) == unstamped(resumed.stderr.splitlines()[:2])  # CliRunner's stderr is no terminal: the same lines
    assert SUMMARY.match(resumed.stdout) and len(resumed.stdout.splitlines()) == 1 and not SUMMARY.search(resumed.stderr)  # the summary on stdout


def test_a_runs_summary_goes_to_stdout_and_its_progress_to_stderr(tmp_path):
    """Issue 46 item 5: `fedprior run ... > out.txt` keeps the summary line in out.txt; the round lines stay on stderr."""
    result = invoke("run", "fedavg-cnn", *TINY, "--run-dir", tmp_path / "run", cache=tmp_path / "cache")
    assert result.exit_code == 0, result.output
    assert SUMMARY.match(result.stdout) and len(result.stdout.splitlines()) == 1 and str(tmp_path / "run") in result.stdout
    assert [int(m.group(1)) for m in map(ROUND.match, result.stderr.splitlines()) if m] == [1, 2] and not SUMMARY.search(result.stderr)


def test_round_lines_name_failures_skipped_evaluations_and_stages():
    from fedprior.results.run_log import round_line

    record = {"stage": "federated", "round": 3, "step": 3, "clients": [1, 2, 3, 4], "failed_clients": [2], "empty_clients": [4], "seconds": 1.25}
    assert round_line(record, 5) == "round 3/5 (federated): accuracy -, clients 3 ok 1 failed 1 without data, 1.2 s"
    server = {"stage": "server", "round": 2, "step": 7, "accuracy": 0.5, "loss": 1.0, "clients": [], "failed_clients": [], "seconds": 0.5}
    assert round_line(server, 8) == "round 7/8 (server 2): accuracy 50.00%, loss 1.0000, server only, 0.5 s"
    unreached = {"stage": "federated", "round": 2, "step": 2, "trained": False, "clients": [0, 1], "failed_clients": [0, 1]}
    assert round_line(unreached, 4) == "round 2/4 (federated): not trained, none of the 2 sampled clients could be reached"


def test_run_log_holds_python_warnings_and_the_summary_warnings(finished, tmp_path):
    from fedprior.results.run_dir import RunDir

    run = RunDir(copy(finished, tmp_path))
    summary = json.loads(run.result.read_text())
    summary.update(failed_updates=2, failed_clients_per_round={"2": 2})
    before = run.log.read_text()
    with run.journal.recording(), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("before the start line", stacklevel=1)
        experiment = SimpleNamespace(name="x", config=fedprior.load_config("fedavg-cnn").settings, task=SimpleNamespace(num_clients=4), workers=1, device="cpu")
        run.journal.start(experiment, 2, 2)
        run.journal.finish(summary)
    added = unstamped(run.log.read_text()[len(before) :].splitlines())
    assert added[0] == "warning: before the start line" and added[1].startswith("resumed x after round 2/2")
    assert added[2].startswith("warning: 2 client updates failed, in rounds 2 (2)") and SUMMARY.search(added[3])


# ----------------------------------------------------------------------------- item 5: a finished run is left alone


def test_resume_of_a_finished_run_says_so_and_changes_nothing(finished, tmp_path):
    run = copy(finished, tmp_path)
    before = snapshot(run)
    result = invoke("resume", run, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == (f"{run} has finished (2 rounds; result.json); nothing to do. Raise federation.rounds in its config.toml to train further")
    assert json.loads(result.stdout) == json.loads((run / "result.json").read_text())
    assert snapshot(run) == before  # result.json, report, metrics, checkpoints, run.log: same bytes, same mtimes
    assert not (run / "run.lock").exists()


def test_python_resume_of_a_finished_run_returns_its_result_without_training(finished, tmp_path):
    run = copy(finished, tmp_path)
    before, rounds = snapshot(run), []
    result = fedprior.resume(run, on_round=rounds.append)
    assert rounds == [] and snapshot(run) == before
    assert result.run_dir == run and result.summary == json.loads((run / "result.json").read_text()) and len(result.records) == 2


def test_raising_rounds_of_a_finished_run_still_trains_further(finished, tmp_path):
    run = copy(finished, tmp_path)
    old = json.loads((run / "result.json").read_text())
    text = (run / "config.toml").read_text()
    (run / "config.toml").write_text(text.replace("rounds = 2\n", "rounds = 3\n", 1))
    result = invoke("resume", run, "--json")
    assert result.exit_code == 0, result.output
    new = json.loads((run / "result.json").read_text())
    assert new["rounds"] == 3 and new["history"][:2] == old["history"] and json.loads(result.stdout)["rounds"] == 3
    assert "resumed fedavg-cnn after round 2/3" in (run / "run.log").read_text()
    assert "nothing to do" not in result.stderr
