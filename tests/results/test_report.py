"""The run's report: a full disk while writing a figure is one line naming it, and leaves no partial file."""

from __future__ import annotations

import json

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


def test_report_describes_the_run_that_ran_and_names_what_differs_from_the_preset(finished_runs):
    """A digits run on 4 clients made from fedavg-cnn is not described as the preset's Fashion-MNIST on 100 clients (issue 33 item 2)."""
    from fedprior.experiments.config import list_presets

    run = finished_runs["root"] / "two"
    report = (run / "report.md").read_text()
    described = "fedavg on digits: 4 clients, IID, 50% per round, 2 rounds, 1 local epoch, batch 32 (made from the preset 'fedavg-cnn')"
    assert report.splitlines()[2] == described
    assert json.loads((run / "result.json").read_text())["description"] == described
    assert f'description = "{described}"' in (run / "config.toml").read_text()
    assert f"Changed from the preset 'fedavg-cnn', described as \"{list_presets()['fedavg-cnn']}\":" in report
    assert "federation.rounds = 2 (preset: 20)" in report and "data.dataset = 'digits' (preset: 'fashion-mnist')" in report
    # the thread settings as words, not a Python dict (issue 33 item 10)
    assert "| torch threads | train 1, evaluate " in report and "{'train'" not in report and "| worker processes | 1 |" in report


def test_report_of_a_saved_preset_edited_by_set_describes_what_ran(tmp_path):
    """``presets show fedavg-cnn > plain.toml``, then ``run plain.toml --set data.dataset=digits --set
    federation.num_clients=10``: the report says digits and 10 clients, not the file's Fashion-MNIST and 100 (issue 56 item 3)."""
    plain = tmp_path / "plain.toml"
    shown = cli("presets", "show", "fedavg-cnn")
    assert shown.exit_code == 0, shown.output
    plain.write_text(shown.stdout)
    run = tmp_path / "run"
    result = cli("run", plain, *TINY, "--set", "federation.num_clients=10", "--set", "federation.rounds=1", "--run-dir", run)
    assert result.exit_code == 0, result.output
    line = (run / "report.md").read_text().splitlines()[2]
    assert line.startswith("fedavg on digits: 10 clients, IID, 50% per round, 1 rounds, ")
    assert line.endswith(f"(made from {plain}, changed: data.dataset, federation.fraction, federation.num_clients, federation.rounds, partition.scheme)")
