"""What the benchmarks share: ``--load N`` busy processes, timing a command, printing the result, and running part of a table.

The busy processes stand for the other jobs of a shared machine. Started and stopped
by the benchmark; a process of pure Python arithmetic takes one core and no memory
bandwidth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SPIN = "x = 0\nwhile True:\n    x = (x + 1) % 1000003\n"


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """Run the block while ``count`` busy processes spin (none for 0)."""
    processes = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        time.sleep(0.5 if processes else 0.0)  # let them get going
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


def print_result(out: dict, as_json: bool) -> None:
    """One JSON object, or one ``key: value`` line per figure."""
    if as_json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")


def timed(command: list[str]) -> tuple[float, str]:
    """Run ``command`` to its end (an error if it fails); its wall seconds and stdout."""
    started = time.perf_counter()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - started, out


def shell(command: str) -> str:
    """A shell command's stdout, stripped (empty if it fails)."""
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> dict:
    """What a result file says of the machine it was measured on."""
    from fedprior.encoders.shipped_towers import cpu_kind, machine_kind

    return {"uname": shell("uname -a"), "cores": os.cpu_count(), "kind": machine_kind(), "cpu": cpu_kind(), "load_at_start": load()}


def command_line(args: list[str] | None = None) -> str:
    """``python benchmarks/NAME.py ARGS``: the command a result file records (``args``: this process's by default)."""
    return "python " + " ".join([f"benchmarks/{Path(sys.argv[0]).name}", *(sys.argv[1:] if args is None else args)])


def save_settings(path: Path, header: dict, settings: dict, started: float, at_start: dict) -> None:
    """Write a setting-choosing benchmark's result: ``header`` (what, rule), the command, the machine, the wall
    seconds, and ``settings`` merged over those the file already holds (a rerun of some settings keeps the others)."""
    previous = json.loads(path.read_text())["settings"] if path.is_file() else {}
    record = {
        **header,
        "command": command_line(),
        "machine": at_start,
        "load_at_end": load(),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "settings": {**previous, **settings},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def embedded_table_command(table: str, rows: str, columns: str, seeds: int, jobs: int, out: Path, overrides: tuple[str, ...] = ()) -> list[str]:
    """``fedprior table TABLE --embedded --rows ROWS --columns COLUMNS --seeds S --jobs J --out OUT --set ...`` (this venv's fedprior)."""
    fedprior = str(Path(sys.executable).with_name("fedprior"))
    command = [fedprior, "table", table, "--embedded", "--rows", rows, "--columns", columns, "--seeds", str(seeds), "--jobs", str(jobs)]
    return [*command, "--out", str(out), *[a for o in overrides for a in ("--set", o)]]


def run_embedded_table(table: str, rows: str, columns: str, seeds: int, jobs: int, out: Path, overrides: tuple[str, ...] = ()) -> dict:
    """:func:`embedded_table_command` run to its end (its output dropped); the table.json it wrote in ``out``."""
    subprocess.run(embedded_table_command(table, rows, columns, seeds, jobs, out, overrides), check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "table.json").read_text())
