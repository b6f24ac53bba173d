"""A table's page, table.md: ours (paper) per cell under its notices and overrides, then its controls and findings.

``fedprior table`` writes it beside table.json (:func:`~fedprior.reproduce.pipeline.reproduce_table`); its numbers
are rounded as table.json stores them (:func:`rounded`), so a page quoting either reads the same.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from fedprior.results.power import MAX_SEEDS

METRIC_LABELS = {
    "final_accuracy": "acc",
    "best_accuracy": "best acc",
    "final_macro_f1": "F1",
    "best_macro_f1": "best F1",
    "selected_accuracy": "sel. acc",
    "selected_macro_f1": "sel. F1",
    "late_change": "last-10% move",
    "mean_client_pl_accuracy": "PL acc",
    "mean_client_pl_coverage": "PL coverage",
}


GATING = "where one fails, the claims it gates there get no verdict"
"""What a failed control does, said above the controls in table.md and on the terminal."""


def grid(results: list[dict]) -> tuple[list[str], list[tuple[str, str]], dict]:
    """Rows, (column, metric) pairs and the cells by (row, column): a table with several metrics gets a column per metric."""
    rows = list(dict.fromkeys(r["row"] for r in results))
    metrics = list(dict.fromkeys(m for r in results for m in r.get("metrics", {"": None}))) if results else []
    columns = [(c, m) for c in dict.fromkeys(r["column"] for r in results) for m in metrics]
    return rows, columns, {(r["row"], r["column"]): r for r in results}


def cell_text(r: dict | None, metric: str, plus_minus: str) -> str:
    if r is None:
        return ""
    if "metrics" in r and metric not in r["metrics"]:
        return "-"  # a metric this row does not produce
    value = r.get("metrics", {}).get(metric) or {"mean": r["ours"], "std": r["std"], "paper": r["paper"]}
    spread = f" {plus_minus} {number(value['std'])}" if r.get("seeds", 1) > 1 else ""
    paper = "-" if value["paper"] is None else number(value["paper"])
    return f"{number(value['mean'])}{spread} ({paper})"


def number(value: float) -> str:
    """A percentage with one decimal (:func:`rounded`); a large count (bits, bytes) in three significant digits."""
    return f"{value:.3g}" if abs(value) >= 1e5 else rounded(value, 1)


def rounded(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, half away from zero on its shortest decimal form: 1.95 -> '2.0'.

    A table's numbers are stored rounded to two decimals (table.json); formatting the float 1.95 directly gives
    '1.9' (it is 1.94999... in binary), a second rounding that the docs, quoting table.json, would not match.
    """
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def column_label(column: str, metric: str, several: bool) -> str:
    return f"{column} {METRIC_LABELS.get(metric, metric)}" if several else column


def markdown(title: str, results: list[dict], evaluated: dict | None = None, overrides: list[str] | None = None, command: str | None = None) -> str:
    """The table (ours (paper), mean ± sd over seeds), under its notices (a failed control first), then its controls and findings.

    ``overrides`` (the ``--set`` options, given to every cell) and ``command`` (how to run the
    table again), where given, are recorded under the notices: a table whose cells ran with
    changed fields says which, so that its numbers are never read as the preset's.
    """
    rows, columns, cell = grid(results)
    several = len({m for _, m in columns}) > 1
    labels = [column_label(c, m, several) for c, m in columns]
    lines = [f"# {title}", ""]
    if evaluated and evaluated["notices"]:
        lines += [*(f"**{notice}**  " for notice in evaluated["notices"]), ""]
    if overrides is not None:
        given = ", ".join(code_span(o) for o in overrides) if overrides else "none (every cell as its table defines it)"
        lines += [f"overrides (--set, in every cell): {given}" + ("  " if command else ""), *([f"command: {code_span(command)}"] if command else []), ""]
    seeds = min(r.get("seeds", 1) for r in results) if results else 1
    spread = f"; mean ± sd over {seeds} seeds (sd with n - 1)" if seeds > 1 else "; one seed"
    more = [f"{r['row']} / {r['column']} {r['seeds']}" for r in results if r.get("seeds", 1) > seeds]
    spread += f"; more seeds where the seed plan gave them: {', '.join(more)}" if more else ""
    lines += [f"ours (paper){spread}", "", "| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for row in rows:
        lines.append(f"| {row} | " + " | ".join(cell_text(cell.get((row, c)), m, "±") for c, m in columns) + " |")
    if evaluated:
        lines += ["", *controls_markdown(evaluated["controls"]), *findings_markdown(evaluated["findings"])]
    return "\n".join(lines) + "\n"


def code_span(text: str) -> str:
    """``text`` as a Markdown code span (a backtick inside it is fenced by two)."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def controls_markdown(controls: list[dict]) -> list[str]:
    if not controls:
        return ["## Controls", "", "none: nothing in this table bounds what a method can reach", ""]
    lines = ["## Controls", "", f"checked in each column on the mean over seeds; {GATING}", ""]
    lines += ["| condition | column | above | below | difference | needed | status |", "|---|---|---|---|---|---|---|"]
    for c in controls:
        if c.get("kind") == "measured":  # a number measured on the column's setting (tables.MeasuredControl)
            if c["status"] == "not run":
                lines.append(f"| {c['condition']} | {c['column']} | | | | {c['margin']:g} | not run (not measured) |")
            else:
                lines.append(f"| {c['condition']} | {c['column']} | {c['value']:.1f} ({c['measured']}) | | | {c['margin']:g} | {c['status']} |")
        elif c["status"] == "not run":
            lines.append(f"| {c['condition']} | {c['column']} | | | | {c['margin']:g} | not run ({', '.join(c['missing'])}) |")
        else:
            lines.append(
                f"| {c['condition']} | {c['column']} | {c['above']:.1f} | {c['below']:.1f} | {c['difference']:+.1f} | {c['margin']:g} | {c['status']} |"
            )
    gates = {c["condition"]: c["gates"] for c in controls if c.get("gates")}  # a table.json written before controls named them has none
    if gates:
        lines += ["", "what each control gates (rows, or claims by name; a claim is gated through either of its rows):", ""]
        lines += [f"- {condition}: {', '.join(gated)}" for condition, gated in gates.items()]
    return [*lines, ""]


def findings_markdown(findings: list[dict]) -> list[str]:
    lines = [
        "## Findings",
        "",
        "each claim of the paper on the paired differences over seeds (the difference column: better - worse, or worse - better "
        "for a cost such as bits, so that a positive mean favours the claim; seed s of both rows: the same partition "
        "and client sampling), their mean, sd (n - 1) and 95% interval of the mean (Student t, n - 1 degrees of freedom); "
        "holds: interval above 0, reversed: below 0, not resolved: spans 0 or one seed; "
        "detects: the smallest mean difference its n seeds detect with 80% power at its sd (two-sided alpha 0.05, noncentral t); "
        "gap: the paper's difference for the claim; seeds for gap: the seeds that gap needs at that sd; planned: the seeds the "
        "table's plan gives the claim (fixed from its first seeds, before more ran)",
        "",
    ]
    if not findings:
        return [*lines, "no claim declared", ""]
    head = "| claim | column | metric | difference | n | mean | sd | 95% interval | verdict | paper | detects | gap | seeds for gap | planned |"
    lines += [head, "|---|" + "---|" * (head.count("|") - 2)]
    for f in findings:
        metric = METRIC_LABELS.get(f["metric"], f["metric"])
        if f["verdict"] == "not run":
            lines.append(f"| {f['claim']} | {f['column']} | {metric} | {f['paired_difference']} | | | | | {f['note']} | | | | | |")
            continue
        sd = "" if f["sd"] is None else f"{f['sd']:.2f}"
        interval = "one seed: no interval" if f["low"] is None else f"[{f['low']:+.2f}, {f['high']:+.2f}]"
        verdict = f"**{f['verdict']}**" + (f" ({extra})" if (extra := other_notes(f)) else "")
        paper = "" if f["paper"] is None else f"{f['paper']:+.1f}"
        lines.append(
            f"| {f['claim']} | {f['column']} | {metric} | {f['paired_difference']} | {f['n']} | {f['mean']:+.2f} | {sd} | {interval} | {verdict} | {paper} | "
            + " | ".join(power_cells(f))
            + " |"
        )
    lines += ["", "Sources:", ""]
    lines += [f"- {f['claim']}: {f['source']}" for f in findings if f["source"]]
    return [*lines, ""]


def power_cells(f: dict) -> list[str]:
    """A finding's detectable difference, the paper's gap, the seeds that gap needs, and the seeds planned (blank: none)."""
    detects = "" if f.get("detectable") is None else f"{f['detectable']:.2f}"
    gap = "" if f.get("gap") is None else f"{f['gap']:+.2f}"
    needed = f.get("seeds_needed")
    needs = "" if needed is None else (f"more than {needed - 1}" if needed > MAX_SEEDS else str(needed))
    planned = "" if f.get("seeds_planned") is None else str(f["seeds_planned"]) + (f" ({f['plan_note']})" if f.get("plan_note") else "")
    return [detects, gap, needs, planned]


def other_notes(f: dict) -> str:
    """A finding's notes other than 'one seed: no interval' (which its interval already says)."""
    return "; ".join(n for n in f["note"].split("; ") if n and n != "one seed: no interval")
