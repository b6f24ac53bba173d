"""Finished run folders the tests copy and edit: their accuracy histories, their rounds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REFERENCE_ROUNDS = 3


def history(result) -> list[float]:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["history"]


def copy(finished_runs, tmp_path: Path, name: str = "two") -> Path:
    target = tmp_path / name
    shutil.copytree(finished_runs["root"] / name, target)
    return target


def set_rounds(run: Path, rounds: int) -> None:
    text = (run / "config.toml").read_text()
    assert "rounds = 2\n" in text
    (run / "config.toml").write_text(text.replace("rounds = 2\n", f"rounds = {rounds}\n", 1))
