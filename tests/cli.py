"""Running the fedprior command line in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SMALL = [
    "--set", "data.dataset=digits", "--set", "partition.scheme=iid", "--set", "federation.num_clients=6",
    "--set", "federation.fraction=0.5", "--set", "federation.rounds=3", "--set", "federation.batch_size=16",
    "--set", "federation.local_epochs=2", "--set", "algorithm.lr=0.1",
]


def fedprior(*args: str, cache=None, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "FEDPRIOR_CACHE": str(cache)} if cache else dict(os.environ)
    return subprocess.run([sys.executable, "-m", "fedprior", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, **kwargs)


def summary(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"--json must print exactly one line, got {result.stdout!r}"
    return json.loads(lines[0])
