"""The fourth reliability probe's notes (issue 46): not defects, but users hit them; one test each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fedprior.algorithms.registry import algorithm_spec
from fedprior.experiments.config import load_config, preset_paths
from fedprior.seeding import MAX_SEED
from tests.support.cli import TINY, error_line, invoke


@pytest.mark.parametrize(
    "option, message",
    [
        (["--seeds", f"0,{2**64}", "--out", "grid"], f"--seeds '0,{2**64}': seed(s) {2**64} beyond 2^63 - 1 ({MAX_SEED}), the range of a run's seed"),
        (["--set", f"run.seed={MAX_SEED + 1}"], "run.seed: input should be less than or equal to 9223372036854775807"),
    ],
)
def test_a_seed_beyond_the_seed_range_is_one_line(tmp_path, monkeypatch, option, message):
    """Note 84: seeds >= 2^64 were taken (folder names of 20 digits); a run's seed is TOML's 64-bit signed integer."""
    monkeypatch.chdir(tmp_path)
    assert error_line(invoke("run", "fedavg-cnn", *TINY, *option, "--dry-run")).startswith(f"error: {message}")


def test_the_largest_seed_is_taken(tmp_path):
    result = invoke("run", "fedavg-cnn", *TINY, "--seeds", f"{MAX_SEED},", "--out", tmp_path / "grid", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert f"seed{MAX_SEED}: run" in result.stdout


def test_planning_a_config_makes_the_hyperparameter_model_once_and_lists_the_presets_once(monkeypatch):
    """Note 85: ``--seeds 100000 --dry-run`` planned for minutes (6 ms a run, most of it making the algorithm's
    pydantic model and globbing the preset folders anew for every run's config)."""
    spec = algorithm_spec("fedavg")
    assert spec.config_model() is spec.config_model()
    load_config("fedavg-cnn")
    monkeypatch.setattr("pathlib.Path.glob", lambda *a, **k: pytest.fail("the preset folders are listed again"))
    assert "fedavg-cnn" in preset_paths()
    load_config("fedavg-cnn", ["run.seed=3"])


def test_a_large_grid_says_what_it_checks_before_it_plans(tmp_path, monkeypatch):
    monkeypatch.setattr("fedprior.experiments.sweep.NOTE_PLANNING_FROM", 3)
    result = invoke("run", "fedavg-cnn", *TINY, "--seeds", "3", "--out", tmp_path / "grid", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == "fedavg-cnn: checking the 3 runs' configs and folders before any runs (about 2 ms each) ..."


def test_a_grid_on_a_folder_another_process_drives_is_refused_before_it_announces_anything(tmp_path):
    """Note 134: a second sweep on a busy --out said `1 resumed` and `running` before the run's lock refused it."""
    run = tmp_path / "grid" / "seed0"
    run.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl, os, sys, time; f = open({str(run / 'run.lock')!r}, 'a+'); f.write(str(os.getpid())); f.flush(); "
            "fcntl.lockf(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(3600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        result = invoke("run", "fedavg-cnn", *TINY, "--seeds", "1", "--out", tmp_path / "grid")
    finally:
        holder.kill()
        holder.wait()
    line = error_line(result)
    assert line == (
        f"error: --out: run seed0 ({run}) is in use by process {holder.pid} (another sweep on this --out?); "
        "wait for it to finish or stop it, or give another --out"
    )
    assert result.stderr.strip() == line  # nothing announced before
