"""The run's report: a full disk while writing a figure is one line naming it, and leaves no partial file."""

from __future__ import annotations

from tests.support.cli import TINY, error_line
from tests.support.cli import invoke as cli
from tests.support.damage import figure_disk_full


def test_disk_full_while_writing_the_report_names_the_figure_and_leaves_no_file(tmp_path, monkeypatch):
    figure_disk_full(monkeypatch, "accuracy.png")
    run = tmp_path / "run"
    line = error_line(cli("run", "fedavg-cnn", *TINY, "--run-dir", run))
    assert f"cannot write {run / 'accuracy.png'} (No space left on device)" in line and f"fedprior resume {run}" in line
    assert not any(p.name.startswith("accuracy.png") for p in run.iterdir())  # no partial PNG, no temporary file
    monkeypatch.undo()
    assert cli("resume", run).exit_code == 0 and (run / "accuracy.png").stat().st_size > 1000  # space freed: the report is written
