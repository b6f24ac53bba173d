"""``fedprior ... | head -1``: every command exits quietly with status 141 when standard output's reader goes away (issue 56 item 1).

The reader is gone before the command writes (a pipe whose read end is closed), so that
each command's first write meets the closed pipe, whatever it prints and however fast.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fedprior.cli.pipe import CLOSED_PIPE_STATUS
from tests.cli.test_compare import fake_run

COMMANDS = [
    ["--help"],
    ["run", "--help"],
    ["presets"],
    ["presets", "--fields"],
    ["presets", "show", "fedavg-cnn"],
    ["algorithms"],
    ["algorithms", "fedavg"],
    ["tables"],
    ["datasets"],
    ["standin", "list"],
    ["partition", "--dataset", "digits", "--clients", "10"],
    ["run", "fedavg-cnn", "--set", "data.dataset=digits", "--dry-run"],
    ["compare", "RUNS"],
]


def run_into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "fedprior", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=600)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_whose_reader_went_away_exits_141_without_a_word(command, tmp_path):
    if command == ["compare", "RUNS"]:
        command = ["compare", str(tmp_path)]
        for seed in range(3):
            fake_run(tmp_path / f"fa-s{seed}", "fedavg", seed, 0.7, 0.72)
    done = run_into_closed_pipe(command)
    assert (done.returncode, done.stderr) == (CLOSED_PIPE_STATUS, "")


def test_a_broken_pipe_elsewhere_is_still_a_bug(monkeypatch):
    """A worker's or a socket's BrokenPipeError, standard output being fine, is not a reader gone: one line, exit 1."""
    from fedprior.cli.app import app, user_errors

    @app.command("pipe-probe")
    @user_errors
    def pipe_probe() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    try:
        result = CliRunner().invoke(app, ["pipe-probe"])
    finally:
        app.registered_commands.pop()
    assert result.exit_code == 1
    assert "unexpected BrokenPipeError" in result.output
