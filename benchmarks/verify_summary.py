"""Sum up the kept printouts of ``fedprior table NAME --verify`` (issue 52: every "holds"/"reversed" rerun on a second machine kind).

Each ``benchmarks/results/verify/NAME.txt`` is one verify run's printout as it came, headed by its command
(``$ fedprior table ...``) and followed by its ``/usr/bin/time`` line. This reads them and writes
``benchmarks/results/verify/summary.json``: per printout its command, the counts of its last line (identical,
differs, other machine, not kept, verdicts changed), the largest ``final_accuracy`` difference a cell showed
(|now - committed|, points), the claims whose verdict changed (before -> after) and every claim's verdict
with the rerun seeds; with the machine that summed them (the reruns ran on it: the printouts say so too).

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


def main() -> None:
    tables = {path.stem: summary_of(path.read_text()) for path in sorted(FOLDER.glob("*.txt"))}
    record = {"command": command_line(), "machine": machine(), "tables": tables}
    (FOLDER / "summary.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    for name, table in tables.items():
        changed = [claim for claim, c in table["claims"].items() if c["changed"]]
        print(f"{name}: {table['reruns']} reruns, {table['counts']}, verdicts changed: {changed or 'none'}")


if __name__ == "__main__":
    main()
