"""benchmarks/one_round_histories.py's comparison: the first round that differs, by numbers or by the state after it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from one_round_histories import differences  # noqa: E402


def run(values: dict, states: list[str], final: str = "f") -> dict:
    return {"values": values, "round_states": states, "state_sha256": final}


def test_the_first_differing_round_is_named_from_the_numbers_or_the_state_whichever_comes_first():
    values = {"rounds[0].loss": 2.3, "rounds[3].client_train_loss": 1.5, "rounds[5].accuracy": 0.5, "summary.final_accuracy": 0.5}
    recorded = {"a": run(values, ["s0", "s1", "s2", "s3", "s4", "s5"])}
    assert differences(recorded, {"a": run(dict(values), ["s0", "s1", "s2", "s3", "s4", "s5"])}) == []

    later = {**values, "rounds[3].client_train_loss": 1.5000000000000002, "rounds[5].accuracy": 0.6, "summary.final_accuracy": 0.6}
    assert differences(recorded, {"a": run(later, ["s0", "s1", "s2", "s3", "s4", "s5"], "g")}) == [
        "a: first differs in round 3 (numbers from round 3, state from round None)",
        "a: rounds[3].client_train_loss 1.5 -> 1.5000000000000002",
        "a: summary.final_accuracy 0.5 -> 0.6",
        "a: and 1 numbers of later rounds",
        "a: final state differs (sha256 f -> g)",
    ]
    # the state after round 2 differs before any number does (the loss of round 3 is the first to show it)
    lines = differences(recorded, {"a": run(later, ["s0", "s1", "x2", "x3", "x4", "x5"], "g")})
    assert lines[0] == "a: first differs in round 2 (numbers from round 3, state from round 2)"
    assert "a: rounds[3].client_train_loss 1.5 -> 1.5000000000000002" not in lines and "a: and 2 numbers of later rounds" in lines
