"""``fedprior datasets``: a damaged dataset file is reported in the table, not a traceback; ``fedprior datasets export`` writes a Hugging Face dataset."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_export_writes_a_hugging_face_dataset_that_runs_read_back(tmp_path):
    pytest.importorskip("datasets")
    from fedprior.data import load_dataset

    folder = tmp_path / "digits-hf"
    result = CliRunner().invoke(app, ["datasets", "export", "digits", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"run on it with --set data.dataset=hf:{folder}" in result.stdout and "train 1,438, test 359" in result.stdout
    exported, shipped = load_dataset(f"hf:{folder}"), load_dataset("digits")
    assert np.array_equal(exported.train_images, shipped.train_images) and np.array_equal(exported.test_labels, shipped.test_labels)
    again = CliRunner().invoke(app, ["datasets", "export", "digits", str(folder)])
    assert again.exit_code == 2 and f"error: FOLDER: {folder} exists already" in " ".join(again.stderr.split())
    synthetic = CliRunner().invoke(app, ["datasets", "export", "synthetic", str(tmp_path / "s")])
    assert synthetic.exit_code == 2 and "'synthetic' is not a shipped dataset with files to export; accepted: fashion-mnist, digits" in " ".join(
        synthetic.stderr.split()
    )
