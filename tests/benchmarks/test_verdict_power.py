"""benchmarks/verdict_power.py and the ``--findings-only`` re-reads of system_heterogeneity.py and synthetic_fedprox.py
(issue 52): a committed record judged again from its runs keeps every committed value and gains each claim's power."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fedprior.results.power import detectable_effect, power, seeds_needed

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import synthetic_fedprox  # noqa: E402
import system_heterogeneity  # noqa: E402
import verdict_power  # noqa: E402

POWER = ("detectable", "gap", "seeds_needed")
DETECTABLE_3_SEEDS_SD_1 = 3.2640  # detectable_effect(3, 1.0): tests/results/test_power.py checks its power is 0.8 by integration


def without_power(found: Any) -> Any:
    """A record's verdicts as the code before issue 52 wrote them (no power fields)."""
    if isinstance(found, dict):
        return {k: without_power(v) for k, v in found.items() if k not in POWER}
    return [without_power(v) for v in found] if isinstance(found, list) else found


def write(path: Path, record: dict[str, Any]) -> str:
    text = json.dumps(record, indent=1) + "\n"
    path.write_text(text)
    return text


def synthetic_record() -> dict[str, Any]:
    """Two rounds a run; FedAvg's last loss above FedProx's by 1, 2, 3 in seeds 0, 1, 2 (IID: equal): every claim's
    paired differences are 1, 2, 3 (n = 3, sd = 1), every verdict holds."""
    runs: dict[str, Any] = {}
    for setting in synthetic_fedprox.SETTINGS:
        for algorithm in synthetic_fedprox.ALGORITHMS:
            for seed, d in zip(("0", "1", "2"), (1.0, 2.0, 3.0), strict=True):
                last = 4.0 + d if algorithm == "fedavg" and setting == "synthetic(1,1)" else 4.0
                runs.setdefault(setting, {}).setdefault(algorithm, {})[seed] = {"training_loss": [4.0, last], "final_test_accuracy": 0.5}
    judged = {"per_seed": [1.0, 2.0, 3.0], "mean": 2.0, "sd": 1.0, "holds_in_seeds": 3, "verdict": "holds"}
    verdicts = {claim: dict(judged) for claim in synthetic_fedprox.CLAIMS}
    return {"command": "by hand", "rounds": 2, "seeds": [0, 1, 2], "verdicts": verdicts, "runs": runs}


def test_synthetic_fedprox_findings_only_keeps_the_verdicts_and_adds_their_power(tmp_path):
    path, record = tmp_path / "synthetic.json", synthetic_record()
    write(path, record)
    synthetic_fedprox.main(["--findings-only", "--out", str(path)])
    again = json.loads(path.read_text())
    assert {k: v for k, v in again.items() if k != "verdicts"} == {k: v for k, v in record.items() if k != "verdicts"}
    assert without_power(again["verdicts"]) == record["verdicts"]  # per seed, mean, sd, verdict: as committed
    for claim in synthetic_fedprox.CLAIMS:
        found = again["verdicts"][claim]
        assert list(found)[-3:] == list(POWER)  # added after the committed fields: a diff shows only new lines
        assert found["detectable"] == pytest.approx(DETECTABLE_3_SEEDS_SD_1, abs=1e-4) == detectable_effect(3, 1.0)
        assert power(3, found["detectable"] / 1.0) == pytest.approx(0.8, abs=1e-4)
        assert found["gap"] is None and found["seeds_needed"] is None  # the paper states no size: detectable only


def test_a_record_whose_verdicts_its_runs_do_not_give_is_refused_and_left_as_it_was(tmp_path):
    path, record = tmp_path / "synthetic.json", synthetic_record()
    record["verdicts"]["steadier"]["verdict"] = "not resolved"  # not what its runs give
    text = write(path, record)
    with pytest.raises(SystemExit, match=r"verdicts\.steadier\.verdict: 'not resolved' -> 'holds'"):
        synthetic_fedprox.main(["--findings-only", "--out", str(path)])
    assert path.read_text() == text


def system_runs() -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """Three seeds of every method on both devices, by hand: FedProx with partial work ends 1, 2, 3 points above FedAvg
    dropping stragglers on log-normal devices (sd 1), level on constant ones; FedAvg reaches its final accuracy at
    20 + 10 s simulated seconds, FedBuff at 5."""
    runs: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for speed in system_heterogeneity.SPEEDS:
        for method in system_heterogeneity.METHODS:
            for seed in (0, 1, 2):
                end = 20.0 + 10 * seed if method != "fedbuff" else 5.0
                final = 0.5 + (0.01 * (seed + 1) if speed == "lognormal" and method == "fedprox-partial" else 0.0)
                runs.setdefault(speed, {}).setdefault(method, {})[seed] = {
                    "curve": {"round": [0, 1], "simulated_time": [0.0, end], "accuracy": [0.1, final]},
                    "final_accuracy": final,
                    "simulated_time": end,
                    "rounds": 1,
                    "deadline_dropped_updates": 1 if speed == "lognormal" and method == "fedavg-drop" else 0,
                    "partial_work_updates": 1 if speed == "lognormal" and method == "fedprox-partial" else 0,
                    "mean_round_simulated_seconds": end,
                    "wall_seconds": 1.0,
                }
    return runs


def test_system_heterogeneity_findings_only_keeps_the_verdicts_and_adds_their_power(tmp_path):
    runs = system_runs()
    committed = without_power(system_heterogeneity.verdicts(runs, [0, 1, 2]))
    record = {
        "command": "by hand",
        "seeds": [0, 1, 2],
        "verdicts": committed,
        "runs": {sp: {m: {str(s): r for s, r in by_seed.items()} for m, by_seed in methods.items()} for sp, methods in runs.items()},
    }
    path = tmp_path / "system.json"
    write(path, record)
    system_heterogeneity.main(["--findings-only", "--out", str(path)])
    again = json.loads(path.read_text())
    assert without_power(again["verdicts"]) == committed and again["runs"] == record["runs"]
    drop = again["verdicts"]["partial-beats-drop"]
    assert drop["per_seed"] == pytest.approx([1.0, 2.0, 3.0]) and drop["sd"] == pytest.approx(1.0)
    assert drop["detectable"] == pytest.approx(DETECTABLE_3_SEEDS_SD_1, abs=1e-3)
    assert drop["gap"] == system_heterogeneity.FEDPROX_GAP == 22.0 and drop["seeds_needed"] == seeds_needed(22.0, drop["sd"])
    faster = again["verdicts"]["fedbuff-faster"]["difference"]  # FedAvg's times 20, 30, 40: the paper's 3.3x is 30 (1 - 1/3.3)
    assert faster["per_seed"] == [15.0, 25.0, 35.0] and faster["detectable"] == pytest.approx(10 * DETECTABLE_3_SEEDS_SD_1, abs=1e-3)
    assert faster["gap"] == pytest.approx(30 * (1 - 1 / 3.3), abs=1e-4) and faster["seeds_needed"] == seeds_needed(faster["gap"], 10.0)
    controls = [
        again["verdicts"]["headroom (control)"],
        again["verdicts"]["straggler-effect-vanishes (control)"]["gap_lognormal_minus_gap_constant"],
        again["verdicts"]["time-per-round-differs (control)"]["fedbuff_vs_fedavg_on_constant_devices"]["difference"],
    ]
    assert all(c["gap"] is None and c["seeds_needed"] is None and "detectable" in c for c in controls)  # detectable only


def test_changed_names_each_committed_value_that_moved_and_allows_new_keys():
    committed = {"a": {"per_seed": [1.0, 2.0], "verdict": "holds"}, "b": 1}
    again = copy.deepcopy(committed) | {"c": 2}
    again["a"]["detectable"] = 3.0
    assert verdict_power.changed(committed, again) == []
    again["a"]["per_seed"][1] = 2.5
    del again["b"]
    assert verdict_power.changed(committed, again) == ["verdicts.a.per_seed[1]: 2.0 -> 2.5", "verdicts.b (gone)"]


@pytest.mark.parametrize("module", [system_heterogeneity, synthetic_fedprox], ids=lambda m: m.__name__)
def test_the_committed_records_are_their_runs_judged_again_with_their_power(module):
    """What --findings-only wrote and the docs quote: the committed verdicts are what their committed runs give today,
    each judged difference with its power."""
    record = json.loads(module.RESULT.read_text())
    assert module.judge_record(record) == record["verdicts"]
    assert all("detectable" in found for found in record["verdicts"].values() if "per_seed" in found and "verdict" in found)
