"""Each finding's power (the difference its seeds detect, the seeds the paper's gap needs) and a table's seed plan."""

from __future__ import annotations

from dataclasses import replace

import pytest
from scipy import stats

from fedprior.reproduce.findings import evaluate
from fedprior.reproduce.seed_plan import cell_seeds, make_plan, plan_lines, with_plan
from fedprior.reproduce.table_page import markdown
from fedprior.reproduce.table_result import CellResult, ControlResult, Finding, TableResult
from fedprior.reproduce.tables import Claim, Column, Control, PaperTable, Row, aggregate_table

ROWS = (Row("A", "fedavg-cnn"), Row("B", "fedavg-cnn"), Row("C", "fedavg-cnn"), Row("D", "fedavg-cnn"))
PAPER = {("A", "DS c"): 60.0, ("B", "DS c"): 58.0, ("C", "DS c"): 50.0, ("D", "DS c"): 49.0}
CLAIMS = (
    Claim("A > B", better="A", worse="B", column="c"),  # paper gap +2.0, stated by the paper's numbers
    Claim("C > D", better="C", worse="D", column="c", gap=3.0),  # a gap stated in the claim wins over the printed +1.0
    Claim("A > C", better="A", worse="C", column="c"),  # decided: keeps its seeds
)
TABLE = PaperTable(name="toy", title="Toy", rows=ROWS, columns=(Column("DS", "c", ()),), claims=CLAIMS, paper=PAPER)
SEEDS = {"A": [80.0, 82.0, 84.0, 81.0, 83.0, 80.5], "B": [79.0, 83.5, 82.0, 80.0, 80.0, 81.0], "C": [70.0, 71.0, 72.0], "D": [68.0, 72.0, 71.0]}
SECONDS = {"A": 10.0, "B": 20.0, "C": 100.0, "D": 100.0}


def results(seeds_of=None, n: int = 3) -> list[dict]:
    def run_cell(cell, seed):
        return {"final_accuracy": SEEDS[cell.row][seed] / 100, "initial_accuracy": 0.1, "wall_seconds": SECONDS[cell.row]}

    return aggregate_table(TABLE, True, None, run_cell, seeds=n, seeds_of=seeds_of)


def table_result(cells: list[dict]) -> TableResult:
    evaluated = evaluate(TABLE, cells, embedded=True)
    return TableResult(
        "toy",
        "Toy",
        "embedded",
        3,
        (),
        (),
        tuple(map(CellResult.from_json, cells)),
        tuple(map(ControlResult.from_json, evaluated["controls"])),
        tuple(map(Finding.from_json, evaluated["findings"])),
        tuple(evaluated["notices"]),
    )


def nct_power(n: int, delta: float, sd: float) -> float:
    critical = stats.t.ppf(0.975, n - 1)
    shift = delta * n**0.5 / sd
    return stats.nct.sf(critical, n - 1, shift) + stats.nct.cdf(-critical, n - 1, shift)


def test_each_finding_says_what_its_seeds_detect_and_what_the_papers_gap_needs():
    a_b, c_d, a_c = evaluate(TABLE, results(), embedded=True)["findings"]
    # A - B over seeds 0-2: 1.0, -1.5, 2.0: sd 1.8028
    assert a_b["sd"] == pytest.approx(1.80, abs=0.01) and a_b["verdict"] == "not resolved"
    assert nct_power(3, a_b["detectable"], 1.8028) == pytest.approx(0.8, abs=2e-3)
    assert a_b["gap"] == 2.0 and c_d["gap"] == 3.0 and c_d["paper"] == 1.0
    needed = a_b["seeds_needed"]
    assert nct_power(needed, 2.0, 1.8028) >= 0.8 > nct_power(needed - 1, 2.0, 1.8028)
    assert a_c["verdict"] == "holds" and a_c["detectable"] is not None
    page = markdown("Toy", results(), evaluate(TABLE, results(), embedded=True))
    assert "| detects | gap | seeds for gap | planned |" in page and f"| {a_b['detectable']:.2f} | +2.00 | {needed} |" in page


def test_the_plan_gives_undecided_claims_their_seeds_within_the_budget_cheapest_to_decide_first():
    result = table_result(results())
    by_claim = {f.claim: f for f in result.findings}
    plan = make_plan(result, budget=1e9, made="today", commit="abc")
    planned = {c["claim"]: c for c in plan["claims"]}
    assert planned["A > B"]["seeds_planned"] == by_claim["A > B"].seeds_needed
    assert planned["A > C"]["seeds_planned"] == 3 and planned["A > C"]["cpu_seconds"] == 0.0  # decided: no new seed
    extra = by_claim["A > B"].seeds_needed - 3
    assert planned["A > B"]["cpu_seconds"] == pytest.approx(extra * (10.0 + 20.0))
    assert cell_seeds(plan)[("A", "c")] == by_claim["A > B"].seeds_needed and plan["made"] == "today" and plan["commit"] == "abc"
    # C > D needs fewer seeds than A > B (5 against 9 here): it is planned first; a budget that pays for C > D's two
    # seeds and three of A > B's six leaves A > B at 6, saying so with what 6 seeds detect
    need_ab, need_cd = by_claim["A > B"].seeds_needed, by_claim["C > D"].seeds_needed
    assert (need_cd, need_ab) == (5, 9)
    tight = {c["claim"]: c for c in make_plan(result, budget=(need_cd - 3) * 200.0 + 3 * 30.0)["claims"]}
    assert tight["C > D"]["seeds_planned"] == 5 and tight["C > D"]["note"] == ""
    assert tight["A > B"]["seeds_planned"] == 6 and tight["A > B"]["note"].startswith("the budget stops it: 9 seeds would cost 180 CPU s; 6 detect")
    # a claim whose seeds already detect the paper's gap keeps them, and says the difference here is under what they detect
    generous = replace(result, findings=tuple(replace(f, seeds_needed=3) if f.claim == "A > B" else f for f in result.findings))
    kept = {c["claim"]: c for c in make_plan(generous, budget=1e9)["claims"]}["A > B"]
    assert kept["seeds_planned"] == 3 and kept["note"].startswith("its 3 seeds detect the paper's gap")
    assert any("planned" in line for line in plan_lines(plan, stored=True))


def test_a_finding_shows_its_planned_seeds_and_a_table_with_more_seeds_in_some_cells_pairs_the_common_ones():
    result = table_result(results())
    plan = make_plan(result, budget=1e9)
    shown = with_plan(result, plan)
    assert {f.claim: f.seeds_planned for f in shown.findings}["A > B"] == cell_seeds(plan)[("A", "c")]
    assert "seeds_planned" in shown.findings[0].to_json()
    more = {("A", "c"): 6, ("B", "c"): 6, ("C", "c"): 3}
    cells = results(seeds_of=lambda cell: more.get((cell.row, cell.column), 3))
    a_b, c_d, a_c = evaluate(TABLE, cells, embedded=True)["findings"]
    assert (a_b["n"], c_d["n"], a_c["n"]) == (6, 3, 3)  # A has 6 seeds, C 3: A > C pairs seeds 0-2
    assert a_c["mean"] == pytest.approx(11.0)
    control = evaluate(TABLE, cells, embedded=True)
    assert control["findings"][2]["verdict"] == "holds"


def test_a_control_between_rows_of_different_seeds_compares_the_common_ones():
    gated = PaperTable(name="toy", title="Toy", rows=ROWS, columns=TABLE.columns, claims=CLAIMS, paper=PAPER, controls=(Control("A", "C", 10.5, gates=("A",)),))
    more = {("A", "c"): 6}
    cells = aggregate_table(
        gated,
        True,
        None,
        lambda cell, seed: {"final_accuracy": SEEDS[cell.row][seed] / 100, "initial_accuracy": 0.1, "wall_seconds": 1.0},
        seeds=3,
        seeds_of=lambda cell: more.get((cell.row, cell.column), 3),
    )
    (entry,) = evaluate(gated, cells, embedded=True)["controls"]
    assert entry["difference"] == pytest.approx(11.0) and entry["status"] == "passed"


def test_verify_judges_a_claim_on_every_seed_its_cells_keep(tmp_path):
    """--verify's claim checks (table_verify.claim_checks): cells with a seed plan's seeds kept beyond the table's 3 are
    judged on all of them, committed and with the rerun in place, as the table was."""
    import json

    from fedprior.experiments.table_runs import cell_folder
    from fedprior.reproduce.table_verify import claim_checks
    from fedprior.reproduce.tables import cells

    for cell in cells(TABLE, True):
        for seed in range(6 if cell.row in ("A", "B") else 3):
            folder = cell_folder(tmp_path, cell, seed)
            folder.mkdir(parents=True)
            summary = {"final_accuracy": SEEDS[cell.row][seed] / 100, "initial_accuracy": 0.1, "wall_seconds": 1.0}
            (folder / "result.json").write_text(json.dumps(summary))
    rerun = {"final_accuracy": 0.75, "initial_accuracy": 0.1, "wall_seconds": 1.0}
    checks = {c.committed["claim"]: c for c in claim_checks(TABLE, True, tmp_path, 3, {("B", "c", 0): rerun})}
    assert (checks["A > B"].committed["n"], checks["A > B"].now["n"]) == (6, 6)
    differences = [a - b for a, b in zip(SEEDS["A"], SEEDS["B"], strict=True)]
    assert checks["A > B"].committed["mean"] == pytest.approx(sum(differences) / 6, abs=0.01)
    assert checks["A > B"].now["mean"] == pytest.approx((sum(differences) + 79.0 - 75.0) / 6, abs=0.01)


def verify_report(committed: dict, rerun: dict) -> dict:
    """What ``fedprior table --verify --json`` says of a claim whose verdict changed on another machine kind."""
    return {
        "table": "toy",
        "command": "fedprior table toy --verify --verify-all --json",
        "machine": {"kind": "Linux x86_64, torch 2.13.0+cpu, CPU capability AVX512", "cpu": "AuthenticAMD family 25"},
        "claims": [{"claim": committed["claim"], "changed": True, "committed": committed, "rerun": rerun}],
    }


def test_a_verdict_that_changes_on_another_machine_kind_gets_the_seeds_that_detect_its_committed_difference():
    from fedprior.reproduce.seed_plan import make_verify_plan, verify_plan_lines

    result = table_result(results())
    first = make_plan(result, budget=1e9)
    assert (cell_seeds(first)[("A", "c")], cell_seeds(first)[("C", "c")]) == (9, 5)  # the first plan's seeds for A > B and C > D
    a_c = next(f for f in result.findings if f.claim == "A > C").to_json()
    assert (a_c["verdict"], a_c["mean"], a_c["sd"]) == ("holds", 11.0, 1.0)
    # rerun elsewhere: the same mean, twelve times the spread: not resolved there
    rerun = a_c | {"sd": 12.0, "verdict": "not resolved"}
    after = make_verify_plan(result, verify_report(a_c, rerun), first, made="today", commit="abc")
    (claim,) = after["claims"]
    needed = claim["seeds_needed"]
    assert (claim["sd"], claim["effect"]) == (12.0, 11.0)
    assert nct_power(needed, 11.0, 12.0) >= 0.8 > nct_power(needed - 1, 11.0, 12.0)
    assert claim["seeds_planned"] == needed and needed > 9 and (claim["committed"], claim["rerun"]) == ("holds", "not resolved")
    assert claim["cpu_seconds"] == pytest.approx((needed - 9) * 10.0 + (needed - 5) * 100.0)  # beyond what the first plan gave each
    assert {(c["row"], c["column"]): c["seeds"] for c in after["cells"]} == {("A", "c"): needed, ("C", "c"): needed}
    assert after["budget_cpu_seconds"] == pytest.approx(1e9 - first["cpu_seconds_planned"])
    assert claim["note"].startswith("verdict changed on another machine kind (holds on the committed seeds, not resolved rerun on Linux x86_64")
    # the cells run the larger of the two plans' seeds; the finding shows the second plan's
    stored = first | {"after_verify": after}
    assert cell_seeds(stored)[("C", "c")] == needed and cell_seeds(stored)[("B", "c")] == 9
    shown = {f.claim: f for f in with_plan(result, stored).findings}["A > C"]
    assert shown.seeds_planned == needed and shown.plan_note == claim["note"]
    assert any("A > C [holds -> not resolved]: planned" in line for line in plan_lines(stored, stored=True))
    assert verify_plan_lines(after)[0].startswith("after a verify on another machine kind (fedprior table toy --verify")
    # what the first plan left of its budget stops it (250 CPU s: C's seeds 6 and 7), and it says so
    tight = make_verify_plan(result, verify_report(a_c, rerun), first | {"budget_cpu_seconds": first["cpu_seconds_planned"] + 250.0})
    (short,) = tight["claims"]
    assert (short["seeds_planned"], short["cpu_seconds"]) == (7, 200.0)
    assert short["note"].endswith(f"the budget stops it at 7 (the {needed} would cost {claim['cpu_seconds']:.0f} CPU s)")


def test_a_claim_that_ran_its_planned_seeds_and_needs_more_at_their_spread_says_what_stopped_it():
    result = table_result(results())
    plan = make_plan(result, budget=1e9)
    a_b = next(c for c in plan["claims"] if c["claim"] == "A > B")
    planned = a_b["seeds_planned"]
    ran = next(f for f in result.findings if f.claim == "A > B")
    # as if its planned seeds had run and shown a wider spread: not resolved, and the gap now needs more than planned
    after = replace(ran, n=planned, sd=5.0, detectable=6.0, seeds_needed=planned + 20)
    shown = with_plan(replace(result, findings=(after,)), plan).findings[0]
    left = 1e9 - plan["cpu_seconds_planned"]
    assert shown.plan_note == (
        f"ran its {planned} planned seeds; at the spread they show (sd 5.00) they detect 6.00 and the paper's gap needs {planned + 20}: "
        f"the plan was made once, from the first seeds' spread, and its budget has {left:.0f} CPU s left"
    )
    # before its seeds ran, or once they reach the gap's power, the plan's own note
    assert with_plan(replace(result, findings=(replace(after, n=3),)), plan).findings[0].plan_note == a_b["note"]
    assert with_plan(replace(result, findings=(replace(after, seeds_needed=planned),)), plan).findings[0].plan_note == a_b["note"]
    assert with_plan(replace(result, findings=(replace(after, verdict="holds"),)), plan).findings[0].plan_note == a_b["note"]
    # a claim judged on more seeds than planned for it (its cells carry another claim's): says so
    more = with_plan(replace(result, findings=(replace(after, n=planned + 2),)), plan).findings[0].plan_note
    assert more == f"judged on {planned + 2} seeds, more than the {planned} planned for it: its two cells carry the seeds a plan gave them for another claim"


def test_a_verdict_changed_on_one_seed_has_no_spread_to_plan_from():
    from fedprior.reproduce.seed_plan import make_verify_plan

    result = table_result(results())
    a_c = next(f for f in result.findings if f.claim == "A > C").to_json() | {"n": 1, "sd": None}
    (claim,) = make_verify_plan(result, verify_report(a_c, a_c | {"verdict": "not resolved"}), None)["claims"]
    assert (claim["seeds_planned"], claim["cpu_seconds"]) == (3, 0.0) and claim["note"].endswith("one seed has no spread to plan from: no new seed")
