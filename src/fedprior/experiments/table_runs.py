"""A table's runs in its ``--out`` folder, so that the same table command run again continues a stopped table.

Each seed of each cell runs in ``OUT/ROW--COLUMN--seedN``. When the table command runs
again into the same ``--out`` (after Ctrl-C, SIGTERM, ``kill -9`` or a crash), each
folder is taken as it is:

- it holds ``result.json``: the run finished; its summary is **reused** (nothing trains,
  nothing in the folder is written);
- it holds a checkpoint but no ``result.json`` (or a damaged one): the run stopped
  mid-way; it is **resumed** from its last checkpoint as ``fedprior resume`` does, and
  ends with the numbers of an uninterrupted run;
- it holds only ``config.toml`` (stopped before its first round was saved), or there is
  no folder: the run starts (again) from the beginning.

A folder holding work whose ``config.toml`` differs from what the table would run there now
(another ``--set``) is refused before any cell runs, naming the cell and the fields; the
fields a resume may find changed (threads, workers, device, where the data is:
``resume_check.RESUME_MAY_CHANGE``) do not count.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedprior.errors import ConfigError
from fedprior.experiments.resume_check import changes_that_matter, describe_changes
from fedprior.experiments.run_dir import RunDir

if TYPE_CHECKING:
    from fedprior.experiments.config import ExperimentConfig
    from fedprior.experiments.tables import Cell

REUSED, RESUMED, RUN = "reused", "resumed", "run"
"""What a cell's run does: read its finished result, continue it from its checkpoint, or run it."""


def cell_folder(folder: Path, cell: Cell, seed: int) -> Path:
    """``folder/ROW--COLUMN--seedN``, with characters a file name should not hold replaced by '_'."""
    return folder / re.sub(r"[^A-Za-z0-9.=-]+", "_", f"{cell.row}--{cell.column}--seed{seed}").strip("_")


@dataclass
class CellRun:
    """One seed of one cell: where it runs, with which config, and what running it does now."""

    cell: Cell
    seed: int
    name: str
    config: ExperimentConfig
    path: Path
    action: str
    """REUSED, RESUMED or RUN."""
    result: dict[str, Any] = field(default_factory=dict)
    """The finished run's summary (REUSED)."""

    def execute(self) -> dict[str, Any]:
        """The run's summary: read (REUSED), or after resuming or running it."""
        from fedprior.experiments.runner import resume, start

        if self.action == REUSED:
            return self.result
        if self.action == RESUMED:
            return resume(self.path, report_extras=False)
        return start(self.name, self.config, self.path, report_extras=False)


def finished_result(run: RunDir) -> dict[str, Any] | None:
    """The summary in ``result.json``; None if there is none or it cannot be read (the run is resumed, which rewrites it)."""
    try:
        summary = json.loads(run.result.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and "initial_accuracy" in summary else None


def plan_cell(folder: Path, cell: Cell, seed: int, name: str, config: ExperimentConfig) -> CellRun:
    """What running ``cell`` with ``seed`` in ``folder`` does now; a ConfigError if its folder holds a run of another config."""
    path = cell_folder(folder, cell, seed)
    run = RunDir(path)
    result = finished_result(run) if run.result.is_file() else None
    started = run.checkpoint.exists() or run.previous_checkpoint.exists()
    if result is None and not started:
        return CellRun(cell, seed, name, config, path, RUN)
    _, saved = run.read_config()
    changed = changes_that_matter(saved.to_dict(), config.to_dict())
    if changed:
        raise ConfigError(
            f"--out: cell {cell.row} / {cell.column} seed {seed} ({path}) holds a run of another config: "
            f"{describe_changes(changed, 'there')}; rerun the table with the settings it started with, or give another --out"
        )
    if result is not None:
        return CellRun(cell, seed, name, config, path, REUSED, result)
    return CellRun(cell, seed, name, config, path, RESUMED)
