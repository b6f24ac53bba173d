"""What the command line prints where its output is not a terminal (a pipe, a file): whole lines, and a ± the output can encode."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from fedprior.experiments.config import list_presets


def piped(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m fedprior ARGS`` with stdout and stderr read through pipes, and no COLUMNS (which would set a width)."""
    environment = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    return subprocess.run([sys.executable, "-m", "fedprior", *args], capture_output=True, text=True, env={**environment, **env}, timeout=300)


def test_piped_presets_print_one_whole_line_per_preset():
    result = piped("presets")
    assert result.returncode == 0, result.stderr
    presets = list_presets()
    assert result.stdout.splitlines() == [f"{name:<22} {description}" for name, description in presets.items()]
    assert max(map(len, result.stdout.splitlines())) > 120  # long descriptions, not wrapped at 80 columns


def test_piped_fields_table_keeps_each_field_on_one_row():
    lines = piped("presets", "--fields").stdout.splitlines()
    workers = [line for line in lines if line.startswith("│ run.workers ")]
    assert len(workers) == 1 and workers[0].rstrip(" │").endswith("The numbers do not depend on it."), workers


@pytest.mark.slow
def test_table_prints_plus_minus_as_compare_does_and_plus_minus_in_ascii_where_the_output_cannot_encode_it(tmp_path):
    """Two seeds of the raw-pixels control (nothing trained); then the same table continued into an ASCII-only output."""
    from tests.cli.test_compare import fake_run

    table = ["table", "mfcl-table2", "--embedded", "--rows", "raw pixels", "--columns", "Sc2", "--seeds", "2", "--jobs", "1", "--out", str(tmp_path / "t")]
    table += ["--set", "data.dataset=digits", "--set", "data.train_subset=200", "--set", "run.workers=1"]
    result = piped(*table, FEDPRIOR_CACHE=str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    assert re.search(r"│ raw pixels │ \d+\.\d ± \d+\.\d \(-\) │", result.stdout), result.stdout
    assert "+-" not in result.stdout
    cells = [line for line in result.stderr.splitlines() if "seed 0" in line or "seed 1" in line]
    assert len(cells) == 2 and all(re.search(r"seed \d .*\(\d+\.\d s\)$", line) for line in cells), result.stderr  # the time on the cell's line

    ascii_only = piped(*table, FEDPRIOR_CACHE=str(tmp_path / "cache"), PYTHONIOENCODING="ascii")  # both cells reused
    assert ascii_only.returncode == 0, ascii_only.stderr
    assert re.search(r"\| raw pixels \| \d+\.\d \+- \d+\.\d \(-\) \|", ascii_only.stdout), ascii_only.stdout

    runs = [fake_run(tmp_path / f"s{seed}", "fedavg", seed, 0.7 + 0.04 * seed, 0.8) for seed in (0, 1)]
    compared = piped("compare", *map(str, runs), PYTHONIOENCODING="ascii")
    assert compared.returncode == 0, compared.stderr
    assert "72.00 +- 2.83" in compared.stdout and "+-: sample sd" in compared.stdout
