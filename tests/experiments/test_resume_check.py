"""What a resume checks: an edited config is refused naming the fields; rounds may grow, not shrink below the checkpoint."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import error_line, invoke
from tests.support.run_folders import REFERENCE_ROUNDS, copy, set_rounds


@pytest.mark.parametrize(
    "edit, field",
    [
        (("\nseed = 0", "\nseed = 7"), "run.seed (0 in the checkpoint, 7 now)"),
        (("num_clients = 4", "num_clients = 3"), "federation.num_clients (4 in the checkpoint, 3 now)"),
    ],
)
def test_resume_refuses_an_edited_config_naming_the_fields(finished_runs, tmp_path, edit, field):
    run = copy(finished_runs, tmp_path)
    text = (run / "config.toml").read_text()
    assert edit[0] in text
    (run / "config.toml").write_text(text.replace(edit[0], edit[1], 1))
    line = error_line(invoke("resume", run))
    assert f"{run / 'config.toml'} differs from the run's checkpoint: {field}" in line
    assert json.loads((run / "result.json").read_text())["seed"] == 0  # nothing was rewritten


def test_raising_rounds_trains_further_like_a_longer_run(finished_runs, tmp_path):
    run = copy(finished_runs, tmp_path)
    set_rounds(run, REFERENCE_ROUNDS)
    starts = []
    from fedprior.experiments.runner import resume

    summary = resume(run, on_start=lambda experiment, total, done: starts.append((total, done)))
    assert starts == [(REFERENCE_ROUNDS, 2)]  # the progress bar starts at 2/3, not 0/3
    assert summary["history"] == finished_runs["three"] and summary["rounds"] == REFERENCE_ROUNDS


def test_lowering_rounds_below_the_checkpoint_is_refused(finished_runs, tmp_path):
    run = copy(finished_runs, tmp_path)
    set_rounds(run, 1)
    line = error_line(invoke("resume", run))
    assert "federation.rounds: the checkpoint already holds 2 rounds" in line and "set at least 2" in line


def test_rounds_of_a_finished_stage_cannot_change():
    from fedprior.algorithms.base import Algorithm, Stage
    from fedprior.errors import ConfigError
    from fedprior.experiments.resume_check import check_rounds
    from fedprior.runtime.checkpoint import Progress

    two_stages = Algorithm("x", (), None, None, None, None, None, stages=(Stage("federated"), Stage("server", rounds=2)))
    done = Progress(stage_index=1, round=1, history=[{"stage": "federated"}] * 5 + [{"stage": "server"}])
    check_rounds(two_stages, 5, done)  # unchanged: fine
    with pytest.raises(ConfigError, match="stage 'federated' already finished after 5 rounds"):
        check_rounds(two_stages, 6, done)
