"""The seeds a table's undecided claims need, planned from the seeds they have, within a CPU budget.

A claim that is "not resolved" on its first seeds may lack seeds, not an effect. From each such finding's
observed paired sd and the paper's gap for its claim (:mod:`fedprior.results.power`: the seeds that gap
needs for 80% power, two-sided alpha 0.05) the plan gives each claim's two cells that many seeds, claims
taken in the order of the seeds they need (fewest first: the closest to deciding), each paid for at its
cells' own CPU seconds per seed (a kept cell records the wall seconds of its runs, each run on one core), as
long as the table's budget lasts; a claim the budget cannot pay for in full gets the seeds that what is left
buys, and its note says so with the difference those seeds detect. A claim whose seeds already detect the
paper's gap keeps them (its note says the effect here is smaller than that). Decided and blanked claims keep
their seeds.

No peeking: the plan is made once, from the committed table before any new seed runs, and stored in the
table's record (``benchmarks/results/tables/NAME.json``, ``"plan"``, with its date and commit); a later run
takes the seeds from there, and a finding shows its planned seeds beside the seeds its claim needs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fedprior.results.paired import NOT_RESOLVED
from fedprior.results.power import detectable_effect, seeds_needed

if TYPE_CHECKING:
    from fedprior.reproduce.table_result import Finding, TableResult

BUDGET_CPU_SECONDS = 3 * 3600 * 2
"""A table's budget for its planned seeds: three hours of a two-core machine (CPU seconds)."""


def make_plan(result: TableResult, budget: float = BUDGET_CPU_SECONDS, made: str = "", commit: str = "") -> dict[str, Any]:
    """The plan for ``result`` (a table on its first seeds): per claim the seeds planned and what they cost, per cell its seeds."""
    per_seed = {(c.row, c.column): c.seconds / c.seeds for c in result.cells}
    seeds = {(c.row, c.column): c.seeds for c in result.cells}
    undecided = [f for f in result.findings if f.verdict == NOT_RESOLVED and f.seeds_needed is not None and f.n is not None]
    spent = 0.0
    entries: dict[str, dict[str, Any]] = {}
    for f in sorted(undecided, key=lambda f: (int(f.seeds_needed or 0), f.claim)):
        n, needed = int(f.n or 0), int(f.seeds_needed or 0)
        target, paid, full = buy([(f.better, f.column), (f.worse, f.column)], needed, n, seeds, per_seed, budget - spent)
        spent += paid
        note = ""
        if needed <= n:
            note = f"its {n} seeds detect the paper's gap: the difference here is under the {f.detectable or 0:.2f} they detect"
        elif target < needed:
            detects = detectable_effect(target, f.sd) or 0.0
            note = f"the budget stops it: {needed} seeds would cost {full:.0f} CPU s; {target} detect {detects:.2f}"
        entries[f.claim] = {"seeds_planned": target, "cpu_seconds": round(paid, 1), "note": note}
    claims = []
    for f in result.findings:
        if f.n is None:
            continue
        planned = entries.get(f.claim, {"seeds_planned": f.n, "cpu_seconds": 0.0, "note": ""})
        claims.append(
            {"claim": f.claim, "column": f.column, "verdict": f.verdict, "n": f.n, "sd": f.sd, "detectable": f.detectable, "gap": f.gap}
            | {"seeds_needed": f.seeds_needed, **planned}
        )
    cells = [{"row": row, "column": column, "seeds": n} for (row, column), n in seeds.items() if n > result.seeds]
    return {
        "made": made,
        "commit": commit,
        "budget_cpu_seconds": budget,
        "cpu_seconds_planned": round(spent, 1),
        "rule": "80% power at the paper's gap (two-sided alpha 0.05, noncentral t) at the observed paired sd; undecided claims "
        "by seeds needed, fewest first, within the budget; cost: the cells' own seconds per seed",
        "claims": claims,
        "cells": cells,
    }


def buy(
    pair: list[tuple[str, str]], needed: int, n: int, seeds: dict[tuple[str, str], int], per_seed: dict[tuple[str, str], float], left: float
) -> tuple[int, float, float]:
    """Give a claim's two cells (``pair``: (row, column)) ``needed`` seeds, or as many as ``left`` CPU seconds pay for (not
    under what they have); ``seeds`` is updated. (seeds given, CPU seconds paid, CPU seconds ``needed`` would cost)."""

    def cost(target: int) -> float:
        return sum(max(0, target - seeds[cell]) * per_seed[cell] for cell in pair)

    full, target = cost(needed), needed
    while target > n and cost(target) > left:
        target -= 1
    target = max(target, min(seeds[cell] for cell in pair))
    paid = cost(target)
    for cell in pair:
        seeds[cell] = max(seeds[cell], target)
    return target, paid, full


def make_verify_plan(result: TableResult, report: dict[str, Any], plan: dict[str, Any] | None, made: str = "", commit: str = "") -> dict[str, Any]:
    """The second plan of ``result``'s table, for the claims whose verdict changed when their cells were rerun on another
    machine kind (``report``: ``fedprior table NAME --verify --json``'s, :func:`fedprior.reproduce.table_verify.report`).

    Such a verdict is decided on neither machine. What the committed verdict declared is a difference of the committed
    mean's size; the plan gives the claim's two cells the seeds that detect it with 80% power at the larger of the two
    machines' paired sds (:func:`fedprior.results.power.seeds_needed`), paid from what the table's first plan (``plan``)
    left of its budget. The new seeds run on one machine kind; the claim is judged on all its seeds, and again by a
    ``--verify`` with the other kind's reruns in place of the seeds they rerun: the verdict stands where both agree.
    Made once, before its seeds run, like the first plan; stored in the record beside it (``"after_verify"``)."""
    budget = float((plan or {}).get("budget_cpu_seconds", BUDGET_CPU_SECONDS))
    left = budget - float((plan or {}).get("cpu_seconds_planned", 0.0))
    per_seed = {(c.row, c.column): c.seconds / c.seeds for c in result.cells}
    seeds = {(c.row, c.column): c.seeds for c in result.cells} | cell_seeds(plan)
    first = set(seeds.items())
    claims, spent = [], 0.0
    for check in (c for c in report["claims"] if c["changed"]):
        committed, rerun = check["committed"], check["rerun"]
        effect, sd = abs(committed["mean"]), max((x for x in (committed.get("sd"), rerun.get("sd")) if x is not None), default=None)
        needed, n = int(seeds_needed(effect, sd) or committed["n"]), int(committed["n"])  # one seed (no sd): nothing to plan from
        target, paid, full = buy(
            [(committed["better"], committed["column"]), (committed["worse"], committed["column"])], needed, n, seeds, per_seed, left - spent
        )
        spent += paid
        why = f"{committed['verdict']} on the committed seeds, {rerun['verdict']} rerun on {report['machine']['kind']} ({report['machine']['cpu']})"
        aim = (
            f"{needed} seeds detect the committed difference {committed['mean']:+.2f} at the larger paired sd {sd:.2f}"
            if sd is not None
            else "one seed has no spread to plan from: no new seed"
        )
        short = f"; the budget stops it at {target} (the {needed} would cost {full:.0f} CPU s)" if target < needed else ""
        claims.append(
            {"claim": check["claim"], "column": committed["column"], "committed": committed["verdict"], "rerun": rerun["verdict"], "effect": effect, "sd": sd}
            | {
                "seeds_needed": needed,
                "seeds_planned": target,
                "cpu_seconds": round(paid, 1),
                "note": f"verdict changed on another machine kind ({why}): {aim}{short}",
            }
        )
    return {
        "made": made,
        "commit": commit,
        "verify": report["command"],
        "budget_cpu_seconds": round(left, 1),
        "cpu_seconds_planned": round(spent, 1),
        "rule": "a verdict that changes on another machine kind: 80% power at the committed mean difference at the larger of the two paired sds, "
        "its new seeds on one machine kind, judged on all seeds and again with the other kind's reruns in place; within what the first plan left",
        "claims": claims,
        "cells": [{"row": row, "column": column, "seeds": n} for (row, column), n in seeds.items() if ((row, column), n) not in first],
    }


def cell_seeds(plan: dict[str, Any] | None) -> dict[tuple[str, str], int]:
    """(row, column) -> seeds for the cells the plan gives more seeds than the table's default (its second plan, after a
    verify on another machine kind, included: the larger of the two)."""
    out: dict[tuple[str, str], int] = {}
    for c in [*(plan or {}).get("cells", []), *(plan or {}).get("after_verify", {}).get("cells", [])]:
        out[c["row"], c["column"]] = max(out.get((c["row"], c["column"]), 0), c["seeds"])
    return out


def with_plan(result: TableResult, plan: dict[str, Any] | None) -> TableResult:
    """``result`` with each finding's planned seeds (and the plan's note on it) from ``plan`` (None: unchanged); a claim
    of the second plan (after a verify on another machine kind) takes that one's."""
    if not plan:
        return result
    by_claim = {c["claim"]: c for c in [*plan.get("claims", []), *plan.get("after_verify", {}).get("claims", [])]}
    left = (
        plan.get("budget_cpu_seconds", BUDGET_CPU_SECONDS) - plan.get("cpu_seconds_planned", 0.0) - plan.get("after_verify", {}).get("cpu_seconds_planned", 0.0)
    )
    findings = tuple(
        replace(f, seeds_planned=by_claim[f.claim]["seeds_planned"], plan_note=after_its_seeds(f, by_claim[f.claim], left)) if f.claim in by_claim else f
        for f in result.findings
    )
    return replace(result, findings=findings)


def after_its_seeds(f: Finding, planned: dict[str, Any], left: float) -> str:
    """The plan's note on finding ``f`` (``planned``: its entry in the plan); where ``f`` is judged on more seeds than
    planned for it (its cells carry another claim's planned seeds), that; or, where ``f`` ran its planned seeds and is
    still not resolved with fewer seeds than the paper's gap needs at the spread they show (the plan took the first
    seeds' spread, and spreads grow as well as shrink), what stopped it: the plan is made once, from the first seeds,
    and ``left`` CPU seconds of its budget are what a second plan could spend."""
    n, needed = f.n or 0, f.seeds_needed or 0
    if n > planned["seeds_planned"]:
        return f"judged on {n} seeds, more than the {planned['seeds_planned']} planned for it: its two cells carry the seeds a plan gave them for another claim"
    if f.verdict != NOT_RESOLVED or n < planned["seeds_planned"] or needed <= n:
        return str(planned["note"])
    return (
        f"ran its {planned['seeds_planned']} planned seeds; at the spread they show (sd {f.sd or 0:.2f}) they detect {f.detectable or 0:.2f} and the paper's "
        f"gap needs {needed}: the plan was made once, from the first seeds' spread, and its budget has {max(left, 0):.0f} CPU s left"
    )


def plan_lines(plan: dict[str, Any], stored: bool) -> list[str]:
    """The plan for the terminal: where it comes from, then per claim its seeds needed, planned and their CPU time."""
    where = f"stored in the table's record ({plan['made']}, commit {plan['commit']})" if stored else "not stored: made now from the record's seeds"
    lines = [f"seed plan, {where}; budget {plan['budget_cpu_seconds']:.0f} CPU s, planned {plan['cpu_seconds_planned']:.0f} CPU s ({plan['rule']}):"]
    for c in plan["claims"]:
        detects = "" if c["detectable"] is None else f", detects {c['detectable']:.2f}"
        gap = "" if c["gap"] is None else f", paper's gap {c['gap']:+.2f} needs {c['seeds_needed']}"
        note = f" ({c['note']})" if c["note"] else ""
        lines.append(f"  {c['claim']} [{c['verdict']}]: n={c['n']}{detects}{gap}; planned {c['seeds_planned']} seeds, {c['cpu_seconds']:.0f} CPU s{note}")
    lines += [f"  cell {c['row']} / {c['column']}: {c['seeds']} seeds" for c in plan["cells"]]
    return lines + (verify_plan_lines(plan["after_verify"]) if "after_verify" in plan else [])


def verify_plan_lines(after: dict[str, Any]) -> list[str]:
    """The second plan (after a verify on another machine kind) for the terminal: where it comes from, per claim its seeds."""
    lines = [f"after a verify on another machine kind ({after['verify']}), stored {after['made']} (commit {after['commit']}); "]
    lines[0] += f"budget left {after['budget_cpu_seconds']:.0f} CPU s, planned {after['cpu_seconds_planned']:.0f} CPU s ({after['rule']}):"
    for c in after["claims"]:
        lines.append(f"  {c['claim']} [{c['committed']} -> {c['rerun']}]: planned {c['seeds_planned']} seeds, {c['cpu_seconds']:.0f} CPU s ({c['note']})")
    return lines + [f"  cell {c['row']} / {c['column']}: {c['seeds']} seeds" for c in after["cells"]]
