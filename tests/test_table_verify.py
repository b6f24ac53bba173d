"""fedprior table NAME --verify: a committed cell rerun and compared with what was committed, on a tiny cell of the digits stand-in."""

import json
import shutil

from cli import invoke
from conftest import STANDIN

from fedprior.encoders.shipped_towers import machine_kind

CELL = ["fst-cbdg-table2", "--embedded", "--columns", "s=2", "--rows", "FedAvg", "--seeds", "1", "--jobs", "1"]
"""One cell (FedAvg at s=2) of 2 rounds on the digits stand-in, one seed, in this process."""
FOLDER = "FedAvg--s=2--seed0"


def kept_cell(tmp_path, cache):
    """Run the tiny cell once and keep its config.toml and result.json as ``benchmarks/paper_tables.py --keep`` does."""
    options = [
        arg for o in [*STANDIN, "federation.num_clients=10", "federation.rounds=2", "federation.evaluate_every=2", "run.workers=1"] for arg in ("--set", o)
    ]
    ran = invoke("table", *CELL, *options, "--out", tmp_path / "ran", cache=cache)
    assert ran.exit_code == 0, ran.output
    kept = tmp_path / "cells" / "fst-cbdg-table2" / FOLDER
    kept.mkdir(parents=True)
    for name in ("config.toml", "result.json"):
        shutil.copyfile(tmp_path / "ran" / FOLDER / name, kept / name)
    return kept


def verified(tmp_path, cache, *extra):
    result = invoke("table", *CELL, "--verify", "--cells", tmp_path / "cells", *extra, cache=cache)
    lines = [line for line in result.stdout.splitlines() if line.startswith("FedAvg / s=2 seed 0: ")]
    assert len(lines) == 1, result.output
    return result.exit_code, lines[0].removeprefix("FedAvg / s=2 seed 0: ")


def edit(path, change):
    summary = json.loads(path.read_text())
    change(summary)
    path.write_text(json.dumps(summary))


def test_a_rerun_cell_is_identical_and_a_tampered_one_differs_from_the_round_it_was_tampered_in(shared_cache, tmp_path):
    kept = kept_cell(tmp_path, shared_cache)
    original = (kept / "result.json").read_text()
    summary = json.loads(original)
    assert summary["evaluated_rounds"] == [2] and len(summary["round_fingerprints"]) == 3 and summary["machine_kind"] == machine_kind()

    code, line = verified(tmp_path, shared_cache)
    assert (code, line.split(";")[0]) == (0, "identical")

    def tamper(s):  # round 2's digest and the final accuracy, as if today's code gave another last round
        s["round_fingerprints"][2] = "0" * 16
        s["final_accuracy"] += 0.01

    edit(kept / "result.json", tamper)
    code, line = verified(tmp_path, shared_cache)
    assert code == 1 and line.startswith("differs from round 2 (found by every round's digest); final_accuracy "), line
    new = 100 * summary["final_accuracy"]
    assert f"final_accuracy {new + 1:.2f} committed, {new:.2f} now" in line

    def older(s):  # a cell committed before the digests: only the evaluated rounds' test accuracy tells the round
        del s["round_fingerprints"], s["state_sha256"]
        s["history"][0] += 0.01  # round 2's: round 1 is not evaluated

    (kept / "result.json").write_text(original)
    edit(kept / "result.json", older)
    code, line = verified(tmp_path, shared_cache)
    assert code == 1 and line.startswith("differs from round 2 (found by the test accuracy of the evaluated rounds"), line


def test_a_cell_recorded_on_another_machine_kind_is_not_rerun(tmp_path, shared_cache):
    kept = tmp_path / "cells" / "fst-cbdg-table2" / FOLDER
    kept.mkdir(parents=True)
    (kept / "config.toml").write_text("this config is never read: the cell is not rerun")
    avx = "AVX2" if machine_kind().endswith("AVX512") else "AVX512"
    other = machine_kind().rsplit(" ", 1)[0] + " " + avx
    (kept / "result.json").write_text(json.dumps({"initial_accuracy": 0.1, "final_accuracy": 0.5, "device": "cpu", "machine_kind": other}))
    code, line = verified(tmp_path, shared_cache)
    assert code == 0 and line.startswith(f"other machine (recorded: {other}; CPU model not recorded, from the cell's result.json; this is {machine_kind()}")

    # a cell kept before result.json named its machine: the table's record names the machine of its last run
    (kept / "result.json").write_text(json.dumps({"initial_accuracy": 0.1, "final_accuracy": 0.5, "device": "cpu"}))
    record = tmp_path / "tables" / "fst-cbdg-table2.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"machine": {"kind": other}}))
    code, line = verified(tmp_path, shared_cache)
    assert code == 0 and line.startswith(f"other machine (recorded: {other}; CPU model not recorded, from {record} (the machine of the table's last run)")


def test_a_row_without_a_kept_cell_says_so_and_the_cells_folder_must_hold_the_table(tmp_path, shared_cache):
    (tmp_path / "cells" / "fst-cbdg-table2").mkdir(parents=True)
    code, line = verified(tmp_path, shared_cache)
    assert code == 0 and line == f"not kept (no {tmp_path / 'cells' / 'fst-cbdg-table2' / FOLDER / 'result.json'})"
    missing = invoke("table", *CELL, "--verify", "--cells", tmp_path / "elsewhere", cache=shared_cache)
    assert missing.exit_code == 2 and f"--cells: no committed cells of fst-cbdg-table2 in {tmp_path / 'elsewhere' / 'fst-cbdg-table2'}" in missing.stderr
