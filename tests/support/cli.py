"""Running the fedprior command line in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from fedprior.cli import app

SMALL = [
    "--set",
    "data.dataset=digits",
    "--set",
    "partition.scheme=iid",
    "--set",
    "federation.num_clients=6",
    "--set",
    "federation.fraction=0.5",
    "--set",
    "federation.rounds=3",
    "--set",
    "federation.batch_size=16",
    "--set",
    "federation.local_epochs=2",
    "--set",
    "algorithm.lr=0.1",
]


def fedprior(*args: str, cache=None, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "FEDPRIOR_CACHE": str(cache)} if cache else dict(os.environ)
    return subprocess.run([sys.executable, "-m", "fedprior", *args], capture_output=True, text=True, env=env, timeout=timeout, **kwargs)


def summary(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"--json must print exactly one line, got {result.stdout!r}"
    return json.loads(lines[0])


TINY = [
    "--set",
    "data.dataset=digits",
    "--set",
    "partition.scheme=iid",
    "--set",
    "federation.num_clients=4",
    "--set",
    "federation.fraction=0.5",
    "--set",
    "federation.rounds=2",
    "--set",
    "federation.batch_size=32",
    "--set",
    "run.workers=1",
]
"""A 2-round digits run that takes a second or two (in-process tests: no worker processes)."""


def invoke(*args, cache=None):
    """The CLI run in this process (typer's CliRunner): fast, and an exception escaping it shows as ``result.exception``."""

    env = {"FEDPRIOR_CACHE": str(cache)} if cache else None
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def error_line(result) -> str:
    """The one ``error:`` line of a failed command; fails if it crashed, printed a traceback or several errors."""
    output = result.stdout + result.stderr
    assert result.exit_code != 0, output
    assert isinstance(result.exception, SystemExit), f"an exception escaped the CLI: {result.exception!r}\n{output}"
    assert "Traceback" not in output and "Aborted" not in output, output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


# A 2-round FedAvg run on digits: 4 clients, 2 sampled per round.
UNITS_RUN = ["data.dataset=digits", "federation.num_clients=4", "federation.fraction=0.5", "federation.rounds=2", "federation.batch_size=64", "run.threads=1"]


# The small stand-in most tests use: digits, 300 pretraining images.
STANDIN = ["data.dataset=digits", "encoder.name=locked-text", "encoder.recipe=v1", "encoder.pretrain_images=300"]


def sigint_as_from_a_terminal() -> None:
    """``preexec_fn`` of a test's subprocess that the test sends SIGINT: Ctrl-C's default disposition.

    A shell starts a background job (``.ci/run &``, ``nohup ... &``) with SIGINT ignored, its
    children inherit that, and Python then leaves it ignored: the subprocess would never see the
    test's SIGINT. A user's Ctrl-C comes from a terminal, where SIGINT is not ignored.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


LINEAR = ["--set", "encoder.name=hf-clip:{clip}", *TINY, "--set", "federation.rounds=1"]


def linear_args(clip: Path, run: Path, *extra: str) -> list:
    return ["run", "fedavg-linear", *[a.format(clip=clip) for a in LINEAR], *extra, "--run-dir", run]
