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
from fedprior.results.power import detectable_effect

if TYPE_CHECKING:
    from fedprior.reproduce.table_result import TableResult

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
        n = int(f.n or 0)
        pair = [(f.better, f.column), (f.worse, f.column)]

        def cost(target: int, pair: list[tuple[str, str]] = pair) -> float:
            return sum(max(0, target - seeds[cell]) * per_seed[cell] for cell in pair)

        needed = int(f.seeds_needed or 0)
        full, target = cost(needed), needed
        while target > n and spent + cost(target) > budget:
            target -= 1
        target = max(target, min(seeds[cell] for cell in pair))
        paid = cost(target)
        spent += paid
        for cell in pair:
            seeds[cell] = max(seeds[cell], target)
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


def cell_seeds(plan: dict[str, Any] | None) -> dict[tuple[str, str], int]:
    """(row, column) -> seeds for the cells the plan gives more seeds than the table's default."""
    return {(c["row"], c["column"]): c["seeds"] for c in (plan or {}).get("cells", [])}


def with_plan(result: TableResult, plan: dict[str, Any] | None) -> TableResult:
    """``result`` with each finding's planned seeds (and the plan's note on it) from ``plan`` (None: unchanged)."""
    if not plan:
        return result
    by_claim = {c["claim"]: c for c in plan["claims"]}
    findings = tuple(
        replace(f, seeds_planned=by_claim[f.claim]["seeds_planned"], plan_note=by_claim[f.claim]["note"]) if f.claim in by_claim else f for f in result.findings
    )
    return replace(result, findings=findings)


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
    return lines
