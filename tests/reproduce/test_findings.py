"""A table's claims and controls: refused when they name what the table lacks, and their verdicts on hand-made seeds."""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from fedprior.cli.table import finding_line
from fedprior.papers import all_tables
from fedprior.reproduce.findings import evaluate, paired, t_quantile, verdict
from fedprior.reproduce.table_page import markdown
from fedprior.reproduce.tables import Claim, Column, Control, MeasuredControl, PaperTable, Row, aggregate_table, measure_controls

ROWS = (Row("Top", "fedavg-cnn"), Row("Zero", "fedavg-cnn"), Row("A", "fedavg-cnn"), Row("B", "fedavg-cnn"), Row("C", "fedavg-cnn"))
COLUMN = Column("DS", "c", ())


def make(claims=(), controls=(), metrics=("final_accuracy",)) -> PaperTable:
    return PaperTable(name="toy", title="Toy", rows=ROWS, columns=(COLUMN,), claims=claims, controls=controls, metrics=metrics, paper={("A", "DS c"): 50.0})


CLAIMS = (
    Claim("A > B", better="A", worse="B", column="c", source="the paper, p. 1"),
    Claim("B > A", better="B", worse="A", column="DS c"),
    Claim("A > C", better="A", worse="C", column="c"),
)
EVERY = ("A", "B", "C")
"""The rows of every claim in CLAIMS: a control gating them gates them all."""
SEEDS = {  # accuracy (%) of each row, seed 0, 1, 2
    "Top": [90.0, 91.0, 92.0],
    "Zero": [60.0, 60.0, 61.0],
    "A": [80.0, 82.0, 84.0],
    "B": [70.0, 71.0, 75.0],
    "C": [79.0, 83.0, 84.0],
}


def results(table: PaperTable, seeds: dict[str, list[float]] = SEEDS, n: int = 3) -> list[dict]:
    def run_cell(cell, seed):
        return {"final_accuracy": seeds[cell.row][seed] / 100, "initial_accuracy": 0.1, "wall_seconds": 1.0}

    return aggregate_table(table, True, None, run_cell, seeds=n)


def test_t_quantiles_are_students():
    for n, known in ((2, 12.706204736174698), (3, 4.302652729696142), (5, 2.7764451051977934), (31, 2.0422724563012373)):
        assert t_quantile(n) == pytest.approx(known, abs=1e-9)


def test_verdicts_on_hand_made_seeds():
    evaluated = evaluate(make(CLAIMS, (Control("Top", "Zero", 8.0, gates=EVERY),)), results(make(CLAIMS)), embedded=True)
    assert [c["status"] for c in evaluated["controls"]] == ["passed"] and evaluated["notices"] == []
    holds, reversed_, unresolved = evaluated["findings"]
    # A - B = 10, 11, 9: mean 10, sd 1, half-width t(0.975, 2) / sqrt(3) = 4.3027 / 1.7321 = 2.4841
    assert (holds["n"], holds["mean"], holds["sd"]) == (3, 10.0, 1.0)
    assert holds["low"] == pytest.approx(10 - 4.302652729696142 / math.sqrt(3), abs=0.005) == 7.52
    assert holds["high"] == 12.48 and holds["verdict"] == "holds" and holds["paper"] is None
    assert (reversed_["mean"], reversed_["low"], reversed_["high"], reversed_["verdict"]) == (-10.0, -12.48, -7.52, "reversed")
    # A - C = 1, -1, 0: mean 0, sd 1, the interval spans 0
    assert (unresolved["mean"], unresolved["low"], unresolved["high"], unresolved["verdict"]) == (0.0, -2.48, 2.48, "not resolved")
    assert holds["source"] == "the paper, p. 1" and holds["column"] == "c" and reversed_["column"] == "c"  # the paper's label resolves too


def test_one_seed_gives_no_interval():
    evaluated = evaluate(make(CLAIMS), results(make(CLAIMS), n=1), embedded=True)
    first = evaluated["findings"][0]
    assert (first["n"], first["mean"], first["sd"], first["low"], first["verdict"]) == (1, 10.0, None, None, "not resolved")
    assert first["note"] == "one seed: no interval"
    assert paired([3.0]).low is None and verdict(paired([3.0])) == "not resolved"


def test_a_failing_control_withholds_every_verdict_and_heads_the_table():
    table = make(CLAIMS, (Control("Top", "Zero", 8.0, gates=EVERY), Control("A", "Zero", 25.0, gates=EVERY)))
    cells = results(table)
    evaluated = evaluate(table, cells, embedded=True)
    assert [c["status"] for c in evaluated["controls"]] == ["passed", "failed"]
    assert evaluated["controls"][1]["difference"] == 21.67
    assert {f["verdict"] for f in evaluated["findings"]} == {"setting not informative"}
    assert evaluated["findings"][0]["mean"] == 10.0  # the numbers are still shown
    notice = "setting not informative at c for 3 of 3 claim(s) there (the ones it gates): A at least 25 points above Zero failed: 82.0 vs 60.3"
    assert evaluated["notices"] == [notice]
    text = markdown("Toy", cells, evaluated)
    assert text.splitlines()[:3] == ["# Toy", "", f"**{notice}**  "]
    blanked = "**setting not informative** (blanked by: A at least 25 points above Zero)"
    assert f"| A > B | c | acc | A - B | 3 | +10.00 | 1.00 | [+7.52, +12.48] | {blanked} |  |" in text
    assert evaluated["findings"][0]["blanked_by"] == ["A at least 25 points above Zero"]
    assert "- A at least 25 points above Zero: A, B, C" in text  # what each control gates, under the controls
    assert "| 82.0 ± 2.0 (50.0) |" in text  # mean ± sd (n - 1) per cell


def test_a_failing_control_blanks_only_the_claims_it_gates_and_says_which():
    """Issue 44: a failure withholds the verdicts of the claims on the rows (or the claims) it names in gates, no others."""
    on_c = Control("A", "Zero", 25.0, gates=("C",))  # fails (21.7 points): gates the claims on row C
    by_name = Control("Top", "Zero", 40.0, gates=("B > A",))  # fails (30.7 points): gates one claim, by its name
    evaluated = evaluate(make(CLAIMS, (on_c, by_name)), results(make(CLAIMS)), embedded=True)
    a_b, b_a, a_c = evaluated["findings"]
    assert (a_b["verdict"], a_b["blanked_by"], a_b["note"]) == ("holds", [], "no control gates it")  # keeps its verdict
    assert (b_a["verdict"], b_a["blanked_by"]) == ("setting not informative", [by_name.condition]) and b_a["gated_by"] == [by_name.condition]
    assert (a_c["verdict"], a_c["blanked_by"], a_c["note"]) == ("setting not informative", [on_c.condition], f"blanked by: {on_c.condition}")
    assert evaluated["notices"] == [
        f"setting not informative at c for 1 of 3 claim(s) there (the ones it gates): {on_c.condition} failed: 82.0 vs 60.3",
        f"setting not informative at c for 1 of 3 claim(s) there (the ones it gates): {by_name.condition} failed: 91.0 vs 60.3",
    ]
    assert [c["gates"] for c in evaluated["controls"]] == [["C"], ["B > A"]]
    text = markdown("Toy", results(make(CLAIMS)), evaluated)
    assert "| A > B | c | acc | A - B | 3 | +10.00 | 1.00 | [+7.52, +12.48] | **holds** (no control gates it) |  |" in text
    assert f"**setting not informative** (blanked by: {on_c.condition})" in text


def test_a_failing_control_that_gates_no_claim_of_its_column_blanks_none():
    table = make(CLAIMS[:1], (Control("A", "Zero", 25.0, gates=("C",)),))
    evaluated = evaluate(table, results(table), embedded=True)
    assert evaluated["findings"][0]["verdict"] == "holds"
    assert evaluated["notices"] == ["control failed at c, where it gates no claim: A at least 25 points above Zero failed: 82.0 vs 60.3"]


def test_a_claim_no_control_gates_says_so():
    table = make(CLAIMS, (Control("Top", "Zero", 8.0, gates=("B > A",)),))
    a_b, b_a, _ = evaluate(table, results(table), embedded=True)["findings"]
    assert (a_b["gated_by"], a_b["note"]) == ([], "no control gates it") and b_a["note"] == ""


def test_a_control_row_that_has_not_converged_fails_its_control():
    table = make(CLAIMS, (Control("Top", "Zero", 8.0, settled_within=0.5, gates=EVERY),), metrics=("final_accuracy", "late_change"))
    for late, status in (([0.002, -0.004, 0.003], "passed"), ([0.002, -0.004, 0.012], "failed")):  # mean |change| 0.30 and 0.60 points

        def run_cell(cell, seed, late=late):
            return {"final_accuracy": SEEDS[cell.row][seed] / 100, "late_change": late[seed], "initial_accuracy": 0.1, "wall_seconds": 1.0}

        evaluated = evaluate(table, aggregate_table(table, True, None, run_cell, seeds=3), embedded=True)
        control = evaluated["controls"][0]
        assert control["status"] == status and control["difference"] == 30.67
        if status == "failed":
            assert control["late_change"] == 0.6 and evaluated["findings"][0]["verdict"] == "setting not informative"
            assert evaluated["notices"] == [
                "setting not informative at c for 3 of 3 claim(s) there (the ones it gates): Top at least 8 points above Zero, and converged (last 10% of rounds move it less than 0.5 points) "
                "failed: 91.0 vs 60.3, Top moved 0.60 points over its last 10% of rounds"
            ]
    with pytest.raises(ValueError, match="unknown metric 'late_change'"):
        make(controls=(Control("Top", "Zero", 8.0, settled_within=0.5, gates=EVERY),))


def test_late_change_is_the_move_over_the_last_tenth_of_the_rounds():
    from fedprior.experiments.runner import late_change

    history = [{"step": s, "accuracy": a} for s, a in enumerate([0.5, 0.6, 0.7, 0.7, 0.71, 0.72, 0.74, 0.75, 0.75, 0.76], start=1)]
    assert late_change({"accuracy": 0.1}, history) == pytest.approx(0.76 - 0.75)  # round 10 against round 9
    sparse = [{"step": s, **({"accuracy": a} if s % 4 == 0 or s == 20 else {})} for s, a in enumerate([0.01 * i for i in range(1, 21)], start=1)]
    assert late_change({"accuracy": 0.0}, sparse) == pytest.approx(0.20 - 0.16)  # round 20 against round 16 (the last scored by 18)
    assert late_change({"accuracy": 0.3}, []) == 0.0


def test_controls_and_claims_whose_rows_did_not_run():
    table = make(CLAIMS, (Control("Top", "Zero", 8.0, gates=EVERY),))
    cells = [c for c in results(table) if c["row"] not in ("Zero", "B")]
    evaluated = evaluate(table, cells, embedded=True)
    assert evaluated["controls"][0]["status"] == "not run" and evaluated["controls"][0]["missing"] == ["Zero"]
    assert evaluated["notices"] == [
        "control not run at c: Top at least 8 points above Zero (row(s) Zero not run); the verdicts it gates there are not backed by it"
    ]
    a_b, b_a, a_c = evaluated["findings"]
    assert a_b["verdict"] == b_a["verdict"] == "not run" and a_b["note"] == "not run: row(s) B"
    assert a_c["verdict"] == "not resolved" and a_c["note"] == "controls not run"


def test_a_cost_claim_holds_when_the_better_row_spends_less_and_says_its_difference_is_worse_minus_better():
    table = make((Claim("B costs less", better="B", worse="A", column="c", higher_is_better=False), Claim("A > B", better="A", worse="B", column="c")))
    cost, gain = evaluate(table, results(table), embedded=True)["findings"]
    # A - B = 10, 11, 9 (B spends less): the cost claim's difference is worse - better, A - B, as the plain claim's is better - worse
    assert (cost["verdict"], cost["paired_difference"], cost["mean"], cost["low"]) == ("holds", "A - B", 10.0, 7.52)
    assert (gain["paired_difference"], gain["mean"]) == ("A - B", 10.0)
    text = markdown("Toy", results(table), evaluate(table, results(table), embedded=True))
    assert "| B costs less | c | acc | A - B | 3 | +10.00 | 1.00 | [+7.52, +12.48] | **holds** |  |" in text
    assert "difference column: better - worse, or worse - better for a cost" in text
    assert finding_line(cost) == "  B costs less: A - B = +10.00 sd 1.00, n=3, 95% [+7.52, +12.48]: holds; detects 3.26 at 80% power"


@pytest.mark.parametrize(
    ("claim", "control", "message"),
    [
        (Claim("x", better="D", worse="A", column="c"), None, "toy: claim 'x': unknown row(s) 'D'; accepted: Top, Zero, A, B, C"),
        (Claim("x", better="A", worse="B", column="s=2"), None, "toy: claim 'x': unknown column 's=2'; accepted: DS c, c"),
        (Claim("x", better="A", worse="B", column="c", metric="accuracy"), None, "toy: claim 'x': unknown metric 'accuracy'; accepted: final_accuracy"),
        (Claim("x", better="A", worse="A", column="c"), None, "toy: claim 'x': compares 'A' with itself"),
        (None, Control("Top", "Nothing", 5.0, gates=EVERY), "toy: control 'Top at least 5 points above Nothing': unknown row(s) 'Nothing'"),
        (None, Control("Top", "Zero", 5.0, metric="final_macro_f1", gates=EVERY), "unknown metric 'final_macro_f1'"),
        (None, Control("Top", "Zero", 5.0), "toy: control 'Top at least 5 points above Zero': gates no row or claim"),
        (None, Control("Top", "Zero", 5.0, gates=("A", "A > Z")), "toy: control 'Top at least 5 points above Zero': gates unknown row(s) or claim(s) 'A > Z'"),
    ],
)
def test_claims_and_controls_naming_what_the_table_lacks_are_refused_when_it_is_defined(claim, control, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make(() if claim is None else (claim,), () if control is None else (control,))


def test_every_paper_table_declares_claims_and_controls():
    tables = all_tables()
    assert all(table.claims for table in tables.values())
    assert [name for name, table in tables.items() if not table.controls] == ["mfcl-table8"]  # bits sent: nothing bounds them
    margins = {table.controls[0].margin for name, table in tables.items() if table.controls}
    assert margins == {2.0, 5.0, 8.0, 10.0}  # 2: fedbn-table3, its claims' planning gap (the shift must cost FedAvg that much)
    assert tables["fst-cbdg-table3"].controls[0].condition == "CLIP-FC-Centralized at least 8 points above CLIP-ZS"


# ---------------------------------------------------------------- a table in processes, stopped


@dataclass
class Sleeper:
    """A stand-in for a CellRun: seed 0 ends at once, the others sleep until stopped."""

    seed: int
    action: str = "run"
    result: dict = field(default_factory=dict)

    @property
    def cell(self) -> _Cell:
        return _Cell()

    @property
    def config(self) -> SimpleNamespace:
        return SimpleNamespace(run=SimpleNamespace(device="cpu", concurrent_clients=1))

    def single_threaded(self) -> Sleeper:
        return self

    def execute(self) -> dict:
        if self.seed:
            time.sleep(STOPPED_JOB_SECONDS)
        return {"pid": os.getpid()}


STOPPED_JOB_SECONDS = 900
"""How long the jobs a stop must end would run: far above what starting the pool's processes takes on a loaded machine."""


@dataclass
class _Cell:
    row: str = "r"
    column: str = "c"


def test_a_stopped_table_stops_the_cells_running_in_other_processes():
    from fedprior.experiments.table_runs import execute_runs

    seen = []

    def on_done(run, summary):
        seen.append(summary["pid"])
        raise KeyboardInterrupt  # Ctrl-C while the other cells run

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        execute_runs([Sleeper(0), Sleeper(1), Sleeper(2)], 3, on_done)  # type: ignore[list-item]
    # not the STOPPED_JOB_SECONDS the others would sleep: a bound that a loaded machine's process starts stay far below (issue 56 item 7)
    assert time.perf_counter() - started < STOPPED_JOB_SECONDS / 3
    assert seen and seen[0] != os.getpid()
    with pytest.raises(ProcessLookupError):
        os.kill(seen[0], 0)  # the pool's processes are gone


def test_processes_are_spawned_where_a_run_may_use_cuda_or_client_threads(monkeypatch):
    from fedprior.experiments import table_runs

    def runs(device: str, concurrent: int = 1) -> list:
        return [SimpleNamespace(config=SimpleNamespace(run=SimpleNamespace(device=device, concurrent_clients=concurrent)))]

    monkeypatch.setattr(table_runs, "cuda_possible", lambda: True)
    assert table_runs.start_method(runs("auto")) == "spawn" and table_runs.start_method(runs("cuda:0")) == "spawn"
    assert table_runs.start_method(runs("cpu")) == "fork"  # Linux
    monkeypatch.setattr(table_runs, "cuda_possible", lambda: False)
    assert table_runs.start_method(runs("auto")) == "fork"
    assert table_runs.start_method([*runs("cpu"), *runs("cpu", concurrent=2)]) == "spawn"  # threads in a forked process crash now and then


KILLED_TABLE = """
import multiprocessing, sys
sys.path.insert(0, sys.argv[1])
from tests.reproduce.test_findings import Sleeper
from fedprior.experiments.table_runs import execute_runs

def on_done(run, summary):
    print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)

execute_runs([Sleeper(0), Sleeper(1), Sleeper(2)], 3, on_done)
"""


def test_the_processes_of_a_killed_table_stop_their_runs_and_exit():
    """kill -9 of the table's process: the kernel sends its children SIGTERM (PR_SET_PDEATHSIG); the running cells stop
    and every child exits (the pool's pipes stay open in the other children, so none may wait for work)."""
    import subprocess
    import sys
    from pathlib import Path

    from fedprior.flower.processes import alive

    table = subprocess.Popen([sys.executable, "-c", KILLED_TABLE, str(Path(__file__).parents[2])], stdout=subprocess.PIPE, text=True)
    try:
        children = [int(pid) for pid in table.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(children) == 3 and all(alive(pid) for pid in children)
    finally:
        table.kill()
        table.wait()
    deadline = time.monotonic() + 120  # returns once they are gone; a loaded machine takes seconds to run their SIGTERM handlers (issue 56 item 7)
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in children)


def test_a_metric_only_some_rows_produce_is_left_out_of_the_others_and_named_in_the_claim():
    """FedDB's pseudo-label accuracy: FixMatch-like rows have it, FedAvg-like rows do not."""
    claims = (
        Claim("A labels better than B", better="A", worse="B", column="c", metric="mean_client_pl_accuracy"),
        Claim("A labels better than Top", better="A", worse="Top", column="c", metric="mean_client_pl_accuracy"),
    )
    table = make(claims, metrics=("final_accuracy", "mean_client_pl_accuracy"))
    labels = {"A": [0.90, 0.88, 0.86], "B": [0.70, 0.71, 0.75]}  # the other rows produce no pseudo-labels

    def run_cell(cell, seed):
        summary = {"final_accuracy": SEEDS[cell.row][seed] / 100, "initial_accuracy": 0.1, "wall_seconds": 1.0}
        return summary | ({"mean_client_pl_accuracy": labels[cell.row][seed]} if cell.row in labels else {})

    cells = {r["row"]: r for r in aggregate_table(table, True, None, run_cell, seeds=3)}
    assert set(cells["Top"]["metrics"]) == {"final_accuracy"}
    assert cells["A"]["metrics"]["mean_client_pl_accuracy"]["values"] == [90.0, 88.0, 86.0]
    labelled, unmeasured = evaluate(table, list(cells.values()), embedded=True)["findings"]
    # A - B = 20, 17, 11 points: mean 16
    assert (labelled["verdict"], labelled["mean"], labelled["n"]) == ("holds", 16.0, 3)
    assert unmeasured["verdict"] == "not run" and unmeasured["note"] == "no mean_client_pl_accuracy in row(s) Top"
    text = markdown("Toy", list(cells.values()))
    top = next(line for line in text.splitlines() if line.startswith("| Top"))
    assert top.rstrip().endswith("| - |")


def test_a_measured_control_decides_a_column_like_a_row_control(monkeypatch):
    calls = []

    def measure(name, config):  # what tables.measure_controls hands it: the row's config in the column, seed 0, --set included
        calls.append((name, config.run.seed, config.federation.rounds))
        return (41.5, "41.5% on the views")

    control = MeasuredControl("views keep the class", row="C", measure=measure, at_least=60.0, gates=EVERY)
    table = make(CLAIMS, (Control("Top", "Zero", 8.0, gates=EVERY), control))
    measured = measure_controls(table, embedded=True, extra=["federation.rounds=3"])
    assert measured == {("views keep the class", "c"): (41.5, "41.5% on the views")} and calls == [("fedavg-cnn", 0, 3)]
    cells = [c for c in results(table) if c["row"] != "C"]  # measured whether or not its row runs
    evaluated = evaluate(table, cells, embedded=True, measurements=measured)
    assert [c["status"] for c in evaluated["controls"]] == ["passed", "failed"]
    assert evaluated["controls"][1]["value"] == 41.5 and evaluated["controls"][1]["margin"] == 60.0
    assert evaluated["notices"] == [
        "setting not informative at c for 2 of 2 claim(s) there (the ones it gates): views keep the class failed: 41.5% on the views"
    ]
    assert [f["verdict"] for f in evaluated["findings"]] == ["setting not informative", "setting not informative", "not run"]
    assert "| views keep the class | c | 41.5 (41.5% on the views) | | | 60 | failed |" in markdown("Toy", cells, evaluated)
    passed = evaluate(table, results(table), embedded=True, measurements={("views keep the class", "c"): (60.0, "60%")})
    assert [f["verdict"] for f in passed["findings"]] == ["holds", "reversed", "not resolved"] and passed["notices"] == []
    unmeasured = evaluate(table, results(table), embedded=True)
    assert unmeasured["controls"][1]["status"] == "not run" and unmeasured["findings"][0]["note"] == "controls not run"
    assert unmeasured["notices"] == ["control not run at c: views keep the class (not measured); the verdicts it gates there are not backed by it"]
    with pytest.raises(ValueError, match=re.escape("toy: control 'views keep the class': unknown row(s) 'D'")):
        make(controls=(MeasuredControl("views keep the class", row="D", measure=measure, at_least=60.0, gates=EVERY),))
