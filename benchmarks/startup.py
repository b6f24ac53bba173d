"""Start-up time of the commands that only read configs (issue 33 item 9): target under 1 s each.

Each command runs ``--repeats`` times (default 5), each in a fresh Python process
(``python -m fedprior ...``, stdout to a pipe), and the median wall and CPU seconds are
printed; ``import torch`` alone and ``fedprior algorithms`` (which imports every
algorithm, hence torch) are measured the same way for scale. The result goes to
``benchmarks/results/startup.json`` with the command line, the machine and its load
averages before and after (other jobs on a shared machine slow every figure).
tests/cli/test_app.py checks, without timing anything, that these commands import no torch.

    python benchmarks/startup.py [--repeats N] [--json] [--no-save]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from shared import load, machine, print_result

COMMANDS = {
    "fedprior --help": ["-m", "fedprior", "--help"],
    "fedprior presets": ["-m", "fedprior", "presets"],
    "fedprior presets show fixmatch": ["-m", "fedprior", "presets", "show", "fixmatch"],
    "fedprior algorithms": ["-m", "fedprior", "algorithms"],
    "python -c 'import torch'": ["-c", "import torch"],
}
TARGET = {"fedprior --help": 1.0, "fedprior presets": 1.0, "fedprior presets show fixmatch": 1.0}
"""Commands with a target: median wall seconds under it."""
RESULT = Path(__file__).parent / "results" / "startup.json"


def once(arguments: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one fresh ``python ARGUMENTS`` run to its end (an error if it fails)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, *arguments], check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(repeats: int) -> dict[str, dict[str, float | bool | None]]:
    out: dict[str, dict[str, float | bool | None]] = {}
    for name, arguments in COMMANDS.items():
        runs = [once(arguments) for _ in range(repeats)]
        wall = statistics.median(w for w, _ in runs)
        out[name] = {
            "median_wall_s": round(wall, 3),
            "median_cpu_s": round(statistics.median(c for _, c in runs), 3),
            "min_wall_s": round(min(w for w, _ in runs), 3),
            "target_s": TARGET.get(name),
            "met": wall < TARGET[name] if name in TARGET else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per command (the median is reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-save", action="store_true", help=f"do not write {RESULT.relative_to(Path(__file__).parents[1])}")
    args = parser.parse_args()
    at_start = machine()
    commands = measure(args.repeats)
    if not args.no_save:
        record = {
            "what": "median wall and CPU seconds of each command in a fresh process (stdout to a pipe); target: under 1 s",
            "command": "python " + " ".join(["benchmarks/startup.py", *sys.argv[1:]]),
            "repeats": args.repeats,
            "machine": at_start,
            "load_at_end": load(),
            "commands": commands,
        }
        RESULT.write_text(json.dumps(record, indent=2) + "\n")
    flat = {
        f"{name} ({'wall' if key == 'median_wall_s' else 'cpu'} s)": value[key] for name, value in commands.items() for key in ("median_wall_s", "median_cpu_s")
    }
    print_result({**flat, "load": f"{at_start['load_at_start']} -> {load()}"}, args.json)


if __name__ == "__main__":
    main()
