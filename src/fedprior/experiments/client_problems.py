"""Failed and empty client updates over a run: counts per round, and warnings for the summary and the report.

Every round's record says which sampled clients failed (a SuperNode that died or timed
out, an update with NaN/inf dropped under ``run.non_finite = "drop"``) and which held no
data. A run where that happened still finishes, but its numbers come from fewer
clients than configured: the summary (``--json``), the summary line and report.md say so.
"""

from __future__ import annotations

from typing import Any


def rounds_text(steps: list[int]) -> str:
    """[2, 3, 4, 7] -> '2-4, 7'."""
    parts: list[str] = []
    for step in sorted(steps):
        if parts and parts[-1][1] == step - 1:
            parts[-1][1] = step
        else:
            parts.append([step, step])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts)


def client_problems(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of sampled, failed and empty client updates, in total and per round (one entry per trained round)."""
    rounds = [r for r in history if "clients" in r]
    failed = [len(r.get("failed_clients", [])) for r in rounds]
    empty = [len(r.get("empty_clients", [])) for r in rounds]
    return {
        "client_updates": sum(len(r["clients"]) for r in rounds),
        "failed_updates": sum(failed),
        "empty_updates": sum(empty),
        "failed_per_round": failed,
        "empty_per_round": empty,
        "rounds_without_update": [r["step"] for r in rounds if r.get("aggregated") is False],
    }


def problem_warnings(history: list[dict[str, Any]]) -> list[str]:
    """One line per kind of problem, naming the rounds; [] for a clean run."""
    rounds = [r for r in history if "clients" in r]
    counts = client_problems(history)
    total = counts["client_updates"]
    out = []
    if counts["failed_updates"]:
        steps = [r["step"] for r in rounds if r.get("failed_clients")]
        out.append(
            f"{counts['failed_updates']} of {total} client updates failed (round{'s' * (len(steps) > 1)} {rounds_text(steps)}) "
            "and were left out of the aggregation; the reasons are in metrics.jsonl"
        )
    if counts["empty_updates"]:
        steps = [r["step"] for r in rounds if r.get("empty_clients")]
        out.append(
            f"{counts['empty_updates']} of {total} sampled clients held no data and trained nothing "
            f"(round{'s' * (len(steps) > 1)} {rounds_text(steps)})"
        )
    if counts["rounds_without_update"]:
        steps = counts["rounds_without_update"]
        out.append(f"no client trained in round{'s' * (len(steps) > 1)} {rounds_text(steps)}: the global model was not updated there")
    return out


def problems_section(history: list[dict[str, Any]]) -> str:
    """The report's markdown section on failed and empty clients ('' for a clean run)."""
    warnings = problem_warnings(history)
    if not warnings:
        return ""
    rows = "\n".join(
        f"| {r['step']} | {len(r['clients'])} | {len(r.get('failed_clients', []))} | {len(r.get('empty_clients', []))} | "
        f"{'no' if r.get('aggregated') is False else 'yes'} |"
        for r in history if "clients" in r and (r.get("failed_clients") or r.get("empty_clients"))
    )
    lines = "\n".join(f"- **warning**: {w}" for w in warnings)
    return f"""
## Failed and empty clients

{lines}

| round | sampled | failed | empty | aggregated |
|---|---|---|---|---|
{rows}
"""
