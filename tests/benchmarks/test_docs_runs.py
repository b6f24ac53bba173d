"""benchmarks/docs_runs.py: each committed file holds the printout of its set's commands, as the docs show them."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import docs_runs  # noqa: E402


def test_each_committed_file_is_its_set_run_to_the_end():
    """A command changed in the script without a rerun (or a file from another set) is found; every run kept its
    output, or the error it ended with, and the file records when, where and on which code it ran."""
    for name, (_, commands) in docs_runs.SETS.items():
        record = json.loads((BENCHMARKS / "results" / "docs_runs" / f"{name}.json").read_text())
        assert [r["command"] for r in record["runs"]] == commands, name
        assert all(r["output"] is not None if r["exit_code"] == 0 else r["error"] for r in record["runs"]), name
        assert record["date"] and len(record["commit"]) == 40 and record["machine"]["cpu"] and not record["uncommitted_changes"], name


def test_training_runs_take_one_thread_and_one_worker_and_print_json():
    runs = [c for _, commands in docs_runs.SETS.values() for c in commands if c.startswith("fedprior run ")]
    assert runs
    for command in runs:
        words = shlex.split(command)
        assert {"run.threads=1", "run.workers=1"} <= set(words) and "--json" in words, command


def test_a_command_runs_with_this_python_and_its_json_is_the_last_object_printed():
    assert docs_runs.argv("fedprior run fedavg-cnn --set a='{b = 1}'") == [sys.executable, "-m", "fedprior", "run", "fedavg-cnn", "--set", "a={b = 1}"]
    assert docs_runs.argv("python benchmarks/secagg_cost.py")[1] == str(BENCHMARKS / "secagg_cost.py")
    assert docs_runs.last_json('{"a": 1}\n2026-12-07 round 1/3\n{"b": 2}\nwarning: {not json\n') == {"b": 2}
    assert docs_runs.last_json("no json here\n") is None
