"""Atomic writes (issue 7, item 10): normal file modes, and temporary files of killed writers cleaned up."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from fedprior.atomic import _host, remove_stale_temp_files, save_tensors, write_text


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
