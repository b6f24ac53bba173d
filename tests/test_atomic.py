"""Atomic writes (issue 7, item 10): normal file modes, and temporary files of killed writers cleaned up."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fedprior.atomic import _host, remove_stale_temp_files, save_tensors, write_text
from tests.support.damage import figure_disk_full


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_files_get_the_mode_open_gives_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a.txt", "x")
        save_tensors({"t": torch.zeros(2)}, tmp_path / "b.safetensors")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.safetensors").stat().st_mode & 0o777 == 0o644


def test_the_next_write_removes_temp_files_of_dead_writers_only(tmp_path):
    stale = tmp_path / f"features.safetensors.{_host()}.{dead_pid()}.0a1b2c3d.tmp"
    live = tmp_path / f"features.safetensors.{_host()}.{os.getpid()}.deadbeef.tmp"
    other_host = tmp_path / f"features.safetensors.elsewhere.{dead_pid()}.0a1b2c3d.tmp"
    legacy_old, legacy_new = tmp_path / ".tmpAbC123", tmp_path / ".tmpXyZ789"
    for path in (stale, live, other_host, legacy_old, legacy_new):
        path.write_bytes(b"half a file")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(legacy_old, (day_ago, day_ago))
    save_tensors({"t": torch.ones(3)}, tmp_path / "features.safetensors")
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"features.safetensors", live.name, other_host.name, legacy_new.name}


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    write_text(tmp_path / "a.txt", "old")

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError) as error:
        write_text(tmp_path / "a.txt", "new")
    assert error.value.filename == str(tmp_path / "a.txt")  # the error names the file it was writing
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"] and (tmp_path / "a.txt").read_text() == "old"


def test_remove_stale_temp_files_on_a_missing_folder_is_harmless(tmp_path):
    assert remove_stale_temp_files(tmp_path / "nope") == []


def test_every_figure_is_written_through_save_figure(tmp_path, monkeypatch):
    """The papers' figures (here FST-CBDG's Figure 2) fail like the report's: one line naming the PNG, no file."""
    import fedprior
    from fedprior.experiments.runner import resumable
    from fedprior.papers.fst_cbdg.report import plot_entropy
    from fedprior.results.run_dir import RunDir

    figure_disk_full(monkeypatch, "zero_shot_entropy.png")
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    with pytest.raises(fedprior.FedpriorError) as error:
        resumable(run, lambda: plot_entropy(np.linspace(2.0, 2.3, 50), 10, run.path / "zero_shot_entropy.png"))
    assert str(error.value).startswith(f"cannot write {run.path / 'zero_shot_entropy.png'} (No space left on device)")
    assert not any(p.suffix in (".png", ".tmp") for p in run.path.iterdir())
    sources = Path(fedprior.__file__).parent
    writers = sorted(str(f.relative_to(sources)) for f in sources.rglob("*.py") if ".savefig(" in f.read_text() and f.name != "atomic.py")
    assert writers == []  # matplotlib's savefig is called by fedprior.atomic.save_figure only
