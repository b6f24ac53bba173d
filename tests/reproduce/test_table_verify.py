"""fedprior table NAME --verify: a committed cell rerun and compared with what was committed, on a tiny cell of the digits stand-in."""

import json
import shutil

from fedprior.encoders.shipped_towers import machine_kind
from tests.support.cli import STANDIN, error_line, invoke

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


def other_kind():
    """A machine kind that is not this one's: the other CPU capability."""
    avx = "AVX2" if machine_kind().endswith("AVX512") else "AVX512"
    return machine_kind().rsplit(" ", 1)[0] + " " + avx


def test_a_cell_recorded_on_another_machine_kind_is_rerun_and_its_differences_reported(tmp_path, shared_cache):
    kept = kept_cell(tmp_path, shared_cache)
    original = json.loads((kept / "result.json").read_text())
    other = other_kind()
    edit(kept / "result.json", lambda s: s.update(machine_kind=other, cpu=None))
    code, line = verified(tmp_path, shared_cache)
    here = f"this is {machine_kind()}"
    assert code == 0 and line.startswith(f"other machine (recorded: {other}; CPU model not recorded, from the cell's result.json; {here}"), line
    assert "): rerun, identical to the bit;" in line, line  # then a note: the table defines another config today (the --set of kept_cell)

    def drifted(s):  # as another CPU might give: other bits from round 1, the final accuracy a point lower
        s["round_fingerprints"][1:] = ["0" * 16, "0" * 16]
        s["final_accuracy"] += 0.01

    edit(kept / "result.json", drifted)
    result = invoke("table", *CELL, "--verify", "--cells", tmp_path / "cells", cache=shared_cache)
    assert result.exit_code == 0, result.output  # differences are expected on another kind; no verdict changed
    line = next(line for line in result.stdout.splitlines() if line.startswith("FedAvg / s=2 seed 0: "))
    now = 100 * original["final_accuracy"]
    assert "): rerun, differs from round 1 (found by every round's digest); " in line, line
    assert f"final_accuracy {now + 1:.2f} committed, {now:.2f} now (-1.00)" in line
    lines = result.stdout.splitlines()
    after = lines[lines.index(line) + 1 :]
    assert after[:3] == [
        "largest difference per cell (|now - committed| over its rerun seeds):",
        "  FedAvg / s=2: final_accuracy 1.00 (seed 0)",
        "claims (verdict on the committed seeds, the first 1 and any a seed plan kept after them, and with the rerun seeds in their place):",
    ], result.stdout
    # FedAvg's one claim at s=2 needs FST-CBDG, not kept; the other claims there concern neither FedAvg nor a control row
    assert after[3:] == ["  FST-CBDG > FedAvg (s=2): not checked (not run: row(s) FST-CBDG)", "1 other machine, 0 verdict(s) changed"]

    # a cell kept before result.json named its machine: the table's record names the machine of its last run
    edit(kept / "result.json", lambda s: s.pop("machine_kind"))
    record = tmp_path / "tables" / "fst-cbdg-table2.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"machine": {"kind": other}}))
    code, line = verified(tmp_path, shared_cache)
    assert code == 0 and line.startswith(f"other machine (recorded: {other}; CPU model not recorded, from {record} (the machine of the table's last run)")


def test_on_another_machine_kind_each_claim_of_a_rerun_cell_says_whether_its_verdict_changed(tmp_path, shared_cache):
    """FST-CBDG > FedAvg at s=2 over two seeds: the committed seed 0 of FedAvg (recorded on another kind) makes the claim
    not resolved; the rerun's, 5 points above it, makes it hold. Only FedAvg / s=2 seed 0 is rerun."""
    kept = kept_cell(tmp_path, shared_cache)
    a = json.loads((kept / "result.json").read_text())["final_accuracy"]
    table = kept.parent
    shutil.copytree(kept, table / "FedAvg--s=2--seed1")  # seed 1 as committed: never rerun by --verify
    for seed, value in ((0, a + 0.10), (1, a + 0.101)):  # FST-CBDG's committed seeds (not rerun: --rows FedAvg)
        folder = table / f"FST-CBDG--s=2--seed{seed}"
        folder.mkdir()
        edit(shutil.copyfile(kept / "result.json", folder / "result.json"), lambda s, value=value: s.update(final_accuracy=value))

    def committed_elsewhere(s):
        s["machine_kind"] = other_kind()
        s["final_accuracy"] = a - 0.05
        s["round_fingerprints"][2] = "0" * 16

    edit(kept / "result.json", committed_elsewhere)
    two_seeds = [arg if arg != "1" else "2" for arg in CELL]
    result = invoke("table", *two_seeds, "--verify", "--cells", tmp_path / "cells", cache=shared_cache)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert "  FedAvg / s=2: final_accuracy 5.00 (seed 0)" in lines, result.stdout
    claims = lines[
        lines.index("claims (verdict on the committed seeds, the first 2 and any a seed plan kept after them, and with the rerun seeds in their place):") + 1 :
    ]
    assert claims == [
        "  FST-CBDG > FedAvg (s=2): verdict changed: not resolved -> holds (FST-CBDG - FedAvg: +12.55 [-18.58, +43.68] committed, +10.05 [+9.41, +10.69] now)",
        "1 other machine, 1 verdict(s) changed",
    ]

    # --json: the same as data on stdout (the lines on stderr), each claim's finding both ways with its n and sd
    reported = invoke("table", *two_seeds, "--verify", "--json", "--cells", tmp_path / "cells", cache=shared_cache)
    assert reported.exit_code == 1 and "1 other machine, 1 verdict(s) changed" in reported.stderr, reported.output
    document = json.loads(reported.stdout)
    assert (document["table"], document["seeds"], document["counts"], document["verdicts_changed"]) == ("fst-cbdg-table2", 2, {"other machine": 1}, 1)
    assert document["machine"]["kind"] == machine_kind() and document["command"].startswith("fedprior table fst-cbdg-table2 --embedded")
    (cell,) = document["cells"]
    assert (cell["row"], cell["seed"], cell["status"], cell["changed"]) == ("FedAvg", 0, "other machine", True)
    assert cell["rerun"] == "run" and cell["rerun_seconds"] > 0 and document["reruns_reused"] == 0
    assert round(cell["values"]["final_accuracy"]["committed"] - cell["values"]["final_accuracy"]["now"], 6) == -5.0
    (claim,) = document["claims"]
    assert (claim["claim"], claim["changed"], claim["committed"]["verdict"], claim["rerun"]["verdict"]) == (
        "FST-CBDG > FedAvg (s=2)",
        True,
        "not resolved",
        "holds",
    )
    assert (claim["committed"]["n"], round(claim["committed"]["mean"], 2), round(claim["rerun"]["mean"], 2)) == (2, 12.55, 10.05)
    assert claim["committed"]["sd"] > claim["rerun"]["sd"] > 0

    # with the committed number near the rerun's, the verdict holds both ways: exit code 0
    edit(kept / "result.json", lambda s: s.update(final_accuracy=a - 0.001))
    result = invoke("table", *two_seeds, "--verify", "--cells", tmp_path / "cells", cache=shared_cache)
    assert result.exit_code == 0, result.output
    assert (
        "  FST-CBDG > FedAvg (s=2): verdict unchanged: holds (FST-CBDG - FedAvg: +10.10 [+10.10, +10.10] committed, +10.05 [+9.41, +10.69] now)"
        in result.stdout.splitlines()
    )

    # a failed control (probe - zero-shot < 8 at s=2) blanks the verdict both ways; the line says what the interval alone gives
    for row in ("CLIP-FC-Centralized", "CLIP-ZS"):
        for seed in (0, 1):
            (table / f"{row}--s=2--seed{seed}").mkdir()
            shutil.copyfile(table / f"FedAvg--s=2--seed{seed}" / "result.json", table / f"{row}--s=2--seed{seed}" / "result.json")
    edit(kept / "result.json", lambda s: s.update(final_accuracy=a - 0.05))
    result = invoke("table", *two_seeds, "--verify", "--cells", tmp_path / "cells", cache=shared_cache)
    assert result.exit_code == 0, result.output
    assert (
        "  FST-CBDG > FedAvg (s=2): verdict unchanged: setting not informative (FST-CBDG - FedAvg: +12.55 [-18.58, +43.68] committed, "
        "+10.05 [+9.41, +10.69] now; by its interval alone: not resolved -> holds)"
    ) in result.stdout.splitlines(), result.stdout


def test_a_row_without_a_kept_cell_says_so_and_the_cells_folder_must_hold_the_table(tmp_path, shared_cache):
    (tmp_path / "cells" / "fst-cbdg-table2").mkdir(parents=True)
    code, line = verified(tmp_path, shared_cache)
    assert code == 0 and line == f"not kept (no {tmp_path / 'cells' / 'fst-cbdg-table2' / FOLDER / 'result.json'})"
    missing = invoke("table", *CELL, "--verify", "--cells", tmp_path / "elsewhere", cache=shared_cache)
    assert missing.exit_code == 2 and f"--cells: no committed cells of fst-cbdg-table2 in {tmp_path / 'elsewhere' / 'fst-cbdg-table2'}" in missing.stderr
    committed = tmp_path / "cells" / "fst-cbdg-table2"
    onto = invoke("table", *CELL, "--verify", "--cells", tmp_path / "cells", "--out", committed, cache=shared_cache)
    assert onto.exit_code == 2 and f"--out: {committed} holds the committed cells; the reruns go elsewhere" in onto.stderr, onto.output


def test_verify_names_a_damaged_result_json_and_an_unrecorded_machine(tmp_path):
    from fedprior.reproduce.table_verify import recorded_machine, unrecorded_machine

    kept = tmp_path / "cells" / "fst-cbdg-table2" / "FedAvg--s=2--seed0"
    kept.mkdir(parents=True)
    (kept / "result.json").write_text('{"final_accuracy": 0.5,')
    result = invoke("table", "fst-cbdg-table2", "--embedded", "--columns", "s=2", "--rows", "FedAvg", "--verify", "--cells", tmp_path / "cells")
    assert error_line(result).startswith(f"error: --cells: {kept / 'result.json'} is not valid JSON (Expecting property name")
    machine = recorded_machine({}, tmp_path / "no-record.json")
    assert unrecorded_machine(machine) == (
        f"the machine it ran on is not recorded (neither the cell's result.json nor {tmp_path / 'no-record.json'} says): another machine may give other bits"
    )


def test_the_same_out_again_reuses_a_finished_rerun_and_refuses_one_from_another_machine(tmp_path, shared_cache):
    """A verify's --out keeps its reruns: a second verify with it judges with them without rerunning (the rerun's
    result.json, edited, is what it reports); a rerun there that ran on another machine is refused."""
    kept = kept_cell(tmp_path, shared_cache)
    edit(kept / "result.json", lambda s: s.update(machine_kind=other_kind(), cpu=None))
    out = tmp_path / "reruns"
    code, line = verified(tmp_path, shared_cache, "--out", out)
    assert code == 0 and "rerun, identical to the bit" in line, line
    rerun = out / FOLDER / "result.json"
    edit(rerun, lambda s: s.update(final_accuracy=s["final_accuracy"] - 0.02))  # as if that rerun had given 2 points less
    code, line = verified(tmp_path, shared_cache, "--out", out)
    assert code == 0 and "rerun, differs in no round's numbers (final_accuracy); final_accuracy" in line and "(-2.00)" in line, line
    again = invoke("table", *CELL, "--verify", "--cells", tmp_path / "cells", "--out", out, cache=shared_cache)
    assert again.stdout.splitlines()[-1] == "1 other machine, 0 verdict(s) changed, 1 rerun(s) reused from --out", again.output
    # --json says the rerun was reused and gives the seconds it took when it ran, not this verify's reading time
    edit(rerun, lambda s: s.update(wall_seconds=1234.5))
    reported = invoke("table", *CELL, "--verify", "--json", "--cells", tmp_path / "cells", "--out", out, cache=shared_cache)
    document = json.loads(reported.stdout)
    (cell,) = document["cells"]
    assert (cell["rerun"], cell["rerun_seconds"], document["reruns_reused"], document["rerun_seconds"]) == ("reused", 1234.5, 1, 1234.5)
    edit(rerun, lambda s: s.update(machine_kind=other_kind()))
    result = invoke("table", *CELL, "--verify", "--cells", tmp_path / "cells", "--out", out, cache=shared_cache)
    assert error_line(result) == f"error: --out: the rerun in {out / FOLDER} ran on another machine than this one; give another --out"
