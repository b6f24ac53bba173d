"""A home folder that cannot be written: the run is quiet, with no line of matplotlib's nor wandb-core's (reliability probe 5 #13)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.cli import TINY


def test_a_run_with_an_unwritable_home_prints_only_its_own_lines(tmp_path):
    pytest.importorskip("wandb")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME") and not k.startswith("WANDB_")}
    (tmp_path / "tmp").mkdir()
    env.update(HOME="/proc/1", FEDPRIOR_CACHE=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))  # /proc/1/.config cannot be made, by root either
    args = [*TINY, "--set", "federation.rounds=1", "--set", "run.wandb=offline", "--run-dir", str(tmp_path / "run")]
    done = subprocess.run([sys.executable, "-m", "fedprior", "run", "fedavg-cnn", *args], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    foreign = [line for line in done.stderr.splitlines() if not (line[:2] == "20" and line[4] == "-") and not line.startswith("fedavg-cnn: ")]
    assert foreign == []  # was: matplotlib's 2 lines of warning, wandb-core's 17 of log
    assert list((tmp_path / "tmp").glob("fedprior-home-*")) == []  # the caches' temporary folder is removed at exit
