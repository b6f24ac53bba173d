"""benchmarks/deviation_effects.py: every declared deviation is one cell of a table, its option loads, and it changes the config."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fedprior.experiments.config import load_config
from fedprior.reproduce.paper_tables import table_by_name
from fedprior.reproduce.tables import cells

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import deviation_effects  # noqa: E402


@pytest.mark.parametrize("name", sorted(deviation_effects.DEVIATIONS))
def test_each_deviation_is_one_cell_whose_option_loads_and_changes_the_config(name):
    deviation = deviation_effects.DEVIATIONS[name]
    table = table_by_name(deviation.table)
    (default,) = cells(table, embedded=True, extra=list(deviation.setting), rows=[deviation.row], columns=[deviation.column])
    (option,) = cells(table, embedded=True, extra=[*deviation.setting, *deviation.overrides], rows=[deviation.row], columns=[deviation.column])
    _, default_config = load_config(default.preset, default.overrides)
    _, option_config = load_config(option.preset, option.overrides)  # an unknown or invalid field fails here
    assert option_config.model_dump() != default_config.model_dump(), f"{name}: {deviation.overrides} is already the default"


def test_the_committed_effects_name_declared_deviations_and_pair_three_seeds():
    record = json.loads((BENCHMARKS / "results" / "deviation_effects.json").read_text())
    assert set(record["settings"]) <= set(deviation_effects.DEVIATIONS)
    for name, result in record["settings"].items():
        assert result["overrides"] == list(deviation_effects.DEVIATIONS[name].overrides), name
        assert ("effects" in result) != ("not_measured" in result), name  # measured, or said why not
        for effect in result.get("effects", {}).values():
            assert len(effect["option"]) == len(effect["default"]) == 3, name
            differences = [a - b for a, b in zip(effect["option"], effect["default"], strict=True)]
            assert effect["difference"]["mean"] == pytest.approx(sum(differences) / 3, abs=0.006), name


def test_a_deviation_that_cannot_run_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    """A cell whose fedprior table fails (D16's capped draw on the embedded partition) is written as not measured;
    the deviations after it run; the command exits non-zero naming it."""
    import subprocess

    ran = []

    def fake_run(name, deviation, args):
        ran.append(name)
        if name == "first":
            raise subprocess.CalledProcessError(2, ["fedprior", "table"])
        return {"overrides": list(deviation.overrides), "effects": {"best_accuracy": {"difference": {"mean": 1.0}}}}

    deviations = {"first": deviation_effects.DEVIATIONS["feddb-d16-capped-dirichlet"], "second": deviation_effects.DEVIATIONS["feddb-d9-fresh-momentum"]}
    monkeypatch.setattr(deviation_effects, "DEVIATIONS", deviations)
    monkeypatch.setattr(deviation_effects, "run", fake_run)
    monkeypatch.setattr(deviation_effects, "RESULT", tmp_path / "effects.json")
    monkeypatch.setattr(sys, "argv", ["deviation_effects.py", "--only", "first", "second"])
    with pytest.raises(SystemExit, match="not measured: first"):
        deviation_effects.main()
    assert ran == ["first", "second"]
    settings = json.loads((tmp_path / "effects.json").read_text())["settings"]
    assert "status 2" in settings["first"]["not_measured"] and "effects" in settings["second"]
