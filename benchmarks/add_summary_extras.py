"""Add a paper's summary numbers (``papers.summary_extra``) to finished runs whose result.json predates them.

``python benchmarks/add_summary_extras.py RUN_DIR...`` computes, for each finished run, the
numbers its paper registers in ``SUMMARY_EXTRAS`` (FedDB's family: the means of the
pseudo-label accuracy and coverage, APP-U's divergences) from the run's own
``metrics.jsonl``, as every run now does when it finishes, and adds the ones its
``result.json`` lacks; nothing trains, no other field changes. A run without
``metrics.jsonl`` (a kept cell: config.toml and result.json only) is listed and left alone.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

from fedprior.atomic import write_text
from fedprior.papers import summary_extra


def add_extras(run: Path) -> list[str]:
    """The names added to ``run``'s result.json (none: nothing to add, or nothing to add them from)."""
    result = json.loads((run / "result.json").read_text())
    numbers = summary_extra(tomllib.loads((run / "config.toml").read_text())["algorithm"]["name"])
    if numbers is None or not (run / "metrics.jsonl").is_file():
        return []
    missing = {k: v for k, v in numbers(run).items() if k not in result}
    if missing:
        write_text(run / "result.json", json.dumps(result | missing, indent=2) + "\n")
    return sorted(missing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run in parser.parse_args().runs:
        if (run / "result.json").is_file():
            added = add_extras(run)
            print(f"{run}: {', '.join(added) if added else 'nothing to add'}")


if __name__ == "__main__":
    main()
