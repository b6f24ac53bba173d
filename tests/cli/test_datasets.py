"""``fedprior datasets``: a damaged dataset file is reported in the table, not a traceback."""

from __future__ import annotations

from typer.testing import CliRunner

from fedprior.cli import app
from tests.support.damage import _cut, fashion_root


def test_datasets_root_reports_damaged_files(tmp_path):
    root = fashion_root(tmp_path, lambda f: _cut(f / "train-images-idx3-ubyte.gz", 300))
    result = CliRunner().invoke(app, ["datasets", "--root", str(root)], env={"COLUMNS": "400"})
    assert result.exit_code == 0 and "Traceback" not in result.output and "Aborted" not in result.output, result.output
    row = next(line for line in result.output.splitlines() if "fashion-mnist" in line)
    assert row.split("│")[2].strip() == "no"
    assert "train-images-idx3-ubyte.gz is damaged" in result.output
