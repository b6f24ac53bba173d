"""Every shipped preset's one-round numbers, recorded once and compared bit for bit later (issue 21 item 5).

A refactoring of ``algorithms/`` must leave every preset's numbers as they were. This
script runs each shipped preset (which covers every registered algorithm, and the
presets that give one algorithm other settings) for one small federation round of
every stage, on the small embedded data the registry-wide tests use
(``tests/algorithm_setups.py``: ``PRESETS`` and ``SMALL``), through the same path as
``fedprior run`` (:func:`fedprior.experiments.runner.start`, without report extras),
on the CPU with one thread and no worker processes. It keeps every number of the
run's summary and of each round's history entry (accuracies, losses, bytes sent,
client counts; not the seconds), and a SHA-256 digest of the final checkpoint's
tensors (server and client states).

    python benchmarks/one_round_histories.py --record benchmarks/results/one_round_histories.json
    python benchmarks/one_round_histories.py --check benchmarks/results/one_round_histories.json [--only fedavg-cnn mfcl ...]

``--record`` writes the file (with the command, the commit and the machine); ``--check``
reruns and compares exactly (floats bit-identical), prints every difference and exits 1
if there is one. A shipped preset without small-data overrides in ``PRESETS`` stops the
script before any run. :data:`VARIANTS` add runs for paths one small round of the
presets leaves idle: pseudo-labels above the threshold, per-client state read back
in a second round.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

SKIPPED = ("seconds", "run_dir", "description", "threads", "device", "workers")
"""Summary and history keys that are no number of the run (timings, where it ran)."""

RUN = ["run.seed=0", "run.workers=1", "run.threads=1", "run.device=cpu"]

PSEUDO_LABELS = ["algorithm.threshold=0.15"]
"""A confidence threshold that one small round passes, so that the unlabeled loss is not zero."""
TWO_ROUNDS = ["federation.rounds=2", "federation.fraction=0.5"]
"""Two rounds of 4 of the 8 clients: per-client state written in the first is read back in the second."""
VARIANTS = {
    **{f"{preset}+pseudo-labels": (preset, PSEUDO_LABELS) for preset in ("feddb", "fixmatch", "fedmatch", "fedrgd", "semifl")},
    "feddb+2-rounds": ("feddb", [*PSEUDO_LABELS, *TWO_ROUNDS, "algorithm.keep_optimizer_state=true"]),
    "fedavg-labeled+2-rounds": ("fedavg-labeled", [*TWO_ROUNDS, "algorithm.keep_optimizer_state=true"]),
    **{
        f"{preset}+2-rounds": (preset, TWO_ROUNDS)
        for preset in ("scaffold-cnn", "fst-cbdg", "fedbm", "fedbm-feddyn", "fedbm-fedrep", "fedbm-fedrod", "mfcl-moon", "orchestra")
    },
}
"""Runs beside the presets' own (name -> preset, overrides after ``SMALL``): paths one small round leaves idle."""


def numbers(value: Any, prefix: str, out: dict[str, Any]) -> None:
    """Every number (int, float, bool) in ``value`` under a dotted key; strings and timings left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not any(skip in str(key) for skip in SKIPPED):
                numbers(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            numbers(item, f"{prefix}[{index}]", out)
    elif isinstance(value, bool | int | float):
        out[prefix] = value


def state_digest(run_path: Path) -> str:
    """SHA-256 of the final checkpoint's tensors: server, then each client, each by sorted key (name, dtype, shape, bytes)."""
    import torch

    from fedprior.experiments.run_dir import RunDir

    state = RunDir(run_path).load_checkpoint()
    assert state is not None, f"{run_path}: no checkpoint"
    digest = hashlib.sha256()
    for owner, tensors in [("server", state.server), *((f"client{c}", s) for c, s in sorted(state.clients.items()))]:
        for key in sorted(tensors):
            tensor = tensors[key].detach().cpu().contiguous()
            digest.update(f"{owner}/{key}/{tensor.dtype}/{tuple(tensor.shape)}".encode())
            digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def runs() -> dict[str, tuple[str, list[str]]]:
    """Every run: each shipped preset with its small-data overrides, then the :data:`VARIANTS` (name -> preset, overrides)."""
    from algorithm_setups import PRESETS, SMALL

    out = {preset: (preset, [*overrides, *SMALL, *RUN]) for preset, overrides in PRESETS.items()}
    for name, (preset, extra) in VARIANTS.items():
        out[name] = (preset, [*PRESETS[preset], *SMALL, *extra, *RUN])
    return out


def run_one(name: str, preset: str, overrides: list[str], folder: Path) -> dict[str, Any]:
    """One run of ``preset`` with ``overrides``: its numbers, its state digest and its seconds."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    started = time.perf_counter()
    config_name, config = load_config(preset, overrides)
    rounds: list[dict[str, Any]] = []
    summary = start(config_name, config, folder / name, report_extras=False, on_round=rounds.append)
    values: dict[str, Any] = {}
    numbers({"summary": summary, "rounds": rounds}, "", values)
    return {
        "preset": preset,
        "algorithm": config.algorithm.name,
        "overrides": overrides,
        "values": values,
        "state_sha256": state_digest(folder / name),
        "seconds": round(time.perf_counter() - started, 1),
    }


def same(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (0.0 and -0.0 differ; a NaN equals a NaN, both read back from JSON)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every way ``now`` (preset -> result) differs from ``recorded``, one line each."""
    lines = []
    for preset in sorted(set(recorded) | set(now)):  # a preset or a variant
        if preset not in now:
            lines.append(f"{preset}: recorded, not run now")
            continue
        if preset not in recorded:
            lines.append(f"{preset}: not recorded")
            continue
        old, new = recorded[preset], now[preset]
        for key in sorted(set(old["values"]) | set(new["values"])):
            if key not in new["values"]:
                lines.append(f"{preset}: {key} missing (was {old['values'][key]!r})")
            elif key not in old["values"]:
                lines.append(f"{preset}: {key} new ({new['values'][key]!r})")
            elif not same(old["values"][key], new["values"][key]):
                lines.append(f"{preset}: {key} {old['values'][key]!r} -> {new['values'][key]!r}")
        if old["state_sha256"] != new["state_sha256"]:
            lines.append(f"{preset}: final state differs (sha256 {old['state_sha256'][:12]} -> {new['state_sha256'][:12]})")
    return lines


def git(*args: str) -> str:
    from shared import shell

    return shell(f"git -C {HERE.parent} {' '.join(args)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, metavar="FILE", help="run every preset and write FILE")
    mode.add_argument("--check", type=Path, metavar="FILE", help="run every preset and compare with FILE exactly")
    parser.add_argument("--only", nargs="+", metavar="RUN", help="run (and check) only these presets or variants")
    args = parser.parse_args()

    os.environ["FEDPRIOR_CACHE"] = tempfile.mkdtemp(prefix="one-round-cache-")  # the locked-text stand-in trained afresh, the user's cache untouched
    import torch
    from algorithm_setups import PRESETS
    from shared import machine

    from fedprior.algorithms.registry import ALGORITHMS
    from fedprior.experiments.config import preset_paths

    torch.set_num_threads(1)
    shipped = set(preset_paths())
    if shipped != set(PRESETS):
        sys.exit(
            f"tests/algorithm_setups.py PRESETS must name every shipped preset: missing {sorted(shipped - set(PRESETS))}, unknown {sorted(set(PRESETS) - shipped)}"
        )
    every = runs()
    chosen = list(every) if not args.only else args.only
    unknown = [p for p in chosen if p not in every]
    if unknown:
        sys.exit(f"--only: unknown runs {unknown}; accepted: {', '.join(every)}")

    at_start, started = machine(), time.perf_counter()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="one-round-runs-") as folder:
        for name in chosen:
            results[name] = run_one(name, *every[name], Path(folder))
            print(f"{name}: {results[name]['algorithm']}, {len(results[name]['values'])} numbers, {results[name]['seconds']} s", flush=True)
    wall = round(time.perf_counter() - started, 1)

    if args.record:
        if args.only:
            sys.exit("--record runs every preset (no --only)")
        missing = set(ALGORITHMS) - {r["algorithm"] for r in results.values()}
        if missing:
            sys.exit(f"no preset runs the algorithms {sorted(missing)}")
        record = {
            "what": "every shipped preset's numbers after one small round of every stage (tests/algorithm_setups.py), and VARIANTS, compared bit for bit by --check",
            "command": "python " + " ".join([f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
            "commit": git("rev-parse", "HEAD"),
            "src_changed_since_commit": bool(git("status", "--porcelain", "src")),
            "torch": torch.__version__,
            "machine": at_start,
            "wall_seconds": wall,
            "runs": results,
        }
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1) + "\n")
        print(f"recorded {len(results)} runs ({sum(len(r['values']) for r in results.values())} numbers) in {wall} s to {args.record}")
        return 0

    recorded = json.loads(args.check.read_text())["runs"]
    if args.only:
        recorded = {p: recorded[p] for p in chosen if p in recorded}
    lines = differences(recorded, json.loads(json.dumps(results)))  # both sides as JSON reads them back
    for line in lines:
        print(line)
    count = sum(len(r["values"]) for r in results.values())
    if lines:
        print(f"DIFFERENT: {len(lines)} differences over {len(results)} runs ({wall} s)")
        return 1
    print(f"identical: {len(results)} runs, {count} numbers and {len(results)} final states bit for bit ({wall} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
