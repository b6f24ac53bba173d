"""Sum up the kept printouts of ``fedprior table NAME --verify`` (issue 52: every "holds"/"reversed" rerun on a second machine kind).

Each ``benchmarks/results/verify/NAME.txt`` is one verify run's printout as it came, headed by its command
(``$ fedprior table ...``) and followed by its ``/usr/bin/time`` line. This reads them and writes
``benchmarks/results/verify/summary.json``: per printout its command, the counts of its last line (identical,
differs, other machine, not kept, verdicts changed), the largest ``final_accuracy`` difference a cell showed
(|now - committed|, points), the claims whose verdict changed (before -> after) and every claim's verdict
with the rerun seeds; with the machine that summed them (the reruns ran on it: the printouts say so too).
A ``NAME.json`` there is a verify's own report (``fedprior table NAME --verify --json``, which names its
machine) and is read as data instead of a printout (a report and a printout of one NAME: the report).

    python benchmarks/verify_summary.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from shared import command_line, machine

FOLDER = Path(__file__).resolve().parent / "results" / "verify"
COUNT = re.compile(r"(\d+) (identical|differs|other machine|not kept|verdict\(s\) changed)")
CLAIM = re.compile(r"^  (.+?): verdict (changed|unchanged): (.+?) \(")
LARGEST = re.compile(r"final_accuracy (\d+\.\d+) \(seed \d+\)")
WALL = re.compile(r"^# (\d+(?:\.\d+)?) s wall")


def summary_of(text: str) -> dict:
    """One printout's command, counts, largest final-accuracy difference, wall seconds and claims."""
    lines = text.splitlines()
    counts = {}
    for line in reversed(lines):
        found = COUNT.findall(line)
        if found and not line.startswith(" "):
            counts = {kind.replace("verdict(s) changed", "verdicts changed"): int(n) for n, kind in found}
            break
    claims = {}
    for line in lines:
        match = CLAIM.match(line)
        if match:
            name, how, verdicts = match.groups()
            before, _, after = verdicts.partition(" -> ")
            claims[name] = {"changed": how == "changed", "committed": before, "rerun": after or before}
    largest = [float(m) for line in lines if line.startswith("  ") and " / " in line for m in LARGEST.findall(line)]
    wall = [float(m.group(1)) for line in lines if (m := WALL.match(line))]
    return {
        "command": lines[0].removeprefix("$ "),
        "counts": counts,
        "reruns": sum(n for kind, n in counts.items() if kind != "verdicts changed"),
        "largest_final_accuracy_difference": max(largest, default=None),
        "wall_seconds": wall[0] if wall else None,
        "claims": claims,
    }


def summary_of_report(report: dict) -> dict:
    """The same summary from a verify's JSON report (``fedprior table NAME --verify --json``), with its machine."""
    counts = {**report["counts"], **({"verdicts changed": report["verdicts_changed"]} if report["claims"] else {})}
    differences = [abs(v["now"] - v["committed"]) for cell in report["cells"] for metric, v in cell["values"].items() if metric == "final_accuracy"]
    return {
        "command": report["command"],
        "counts": counts,
        "reruns": sum(report["counts"].values()),
        "largest_final_accuracy_difference": round(max(differences), 2) if differences else None,
        "wall_seconds": report.get("wall_seconds"),
        "rerun_seconds": report.get("rerun_seconds"),
        "reruns_reused": report.get("reruns_reused"),
        "claims": {c["claim"]: {"changed": c["changed"], "committed": c["committed"]["verdict"], "rerun": c["rerun"]["verdict"]} for c in report["claims"]},
        "machine": report["machine"],
    }


def main() -> None:
    tables = {path.stem: summary_of(path.read_text()) for path in sorted(FOLDER.glob("*.txt"))}
    for path in sorted(FOLDER.glob("*.json")):
        if path.name != "summary.json":
            tables[path.stem] = summary_of_report(json.loads(path.read_text()))
    record = {"command": command_line(), "machine": machine(), "tables": tables}
    (FOLDER / "summary.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    for name, table in tables.items():
        changed = [claim for claim, c in table["claims"].items() if c["changed"]]
        print(f"{name}: {table['reruns']} reruns, {table['counts']}, verdicts changed: {changed or 'none'}")


if __name__ == "__main__":
    main()
