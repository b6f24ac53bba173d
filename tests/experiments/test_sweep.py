"""A sweep's every planned run is checked whole before anything trains, ``--dry-run`` included (issue 46 item 6)."""

from __future__ import annotations

import pytest

from tests.support.cli import TINY, error_line, invoke

# ----------------------------------------------------------------------------- cross-field checks before anything trains

SERVER_GRID = ["--sweep", "algorithm.server_optimizer=adam,none", "--sweep", "algorithm.server_lr=0.01,0.1"]
NONE_WITH_LR = (
    "algorithm.server_lr: applies with algorithm.server_optimizer = 'avgm' or 'adagrad' or 'adam' or 'yogi', not with 'none'; "
    "leave it unset or choose a server optimizer that reads it"
)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_a_sweep_whose_later_run_breaks_a_cross_field_rule_is_refused_before_any_run(tmp_path, dry_run):
    out = tmp_path / "grid"
    result = invoke("run", "fedprox-cnn", *TINY, *SERVER_GRID, "--seeds", "2", "--out", out, *dry_run)
    assert error_line(result) == f"error: --sweep: the run server_optimizer=none--server_lr=0.01: {NONE_WITH_LR}"
    assert result.stderr.strip() == error_line(result) and not out.exists()  # no banner, nothing trained or written
