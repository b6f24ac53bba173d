"""Every shipped preset's one-round numbers, recorded once and compared bit for bit later (issue 21 item 5).

A refactoring of ``algorithms/`` must leave every preset's numbers as they were. This
script runs each shipped preset (which covers every registered algorithm, and the
presets that give one algorithm other settings) for one small federation round of
every stage, on the small embedded data the registry-wide tests use
(``tests/support/algorithm_setups.py``: ``PRESETS`` and ``SMALL``), through the same path as
``fedprior run`` (:func:`fedprior.experiments.runner.start`, without report extras),
on the CPU with one thread and no worker processes. It keeps every number of the
run's summary and of each round's history entry (accuracies, losses, bytes sent,
client counts; not the seconds), a digest of the checkpoint's tensors after every
round and the SHA-256 of the final one (server and client states).

    python benchmarks/one_round_histories.py --record benchmarks/results/one_round_histories.json
    python benchmarks/one_round_histories.py --record benchmarks/results/one_round_histories.json --only fedadam-cnn ...
    python benchmarks/one_round_histories.py --check benchmarks/results/one_round_histories.json [--only fedavg-cnn mfcl ...]
    python benchmarks/one_round_histories.py --rounds 30 --check benchmarks/results/drift_30_rounds.json

``--record`` writes the file (with the command, the commit and the machine); ``--record FILE
--only RUN ...`` runs only those and merges them into FILE, the other runs kept as they are
(the command, commit and machine of the merge listed under ``added``); ``--check``
reruns and compares exactly (floats bit-identical), prints per run the first round that
differs with that round's differing numbers, and exits 1 if any run differs. ``--rounds N``
(the drift check: 30) trains every run N rounds, so that a difference that starts after
the first round is seen in the round it starts. A shipped preset without small-data
overrides in ``PRESETS`` stops the script before any run. :data:`VARIANTS` add runs for
paths one small round of the presets leaves idle: pseudo-labels above the threshold,
per-client state read back in a second round (left out with ``--rounds``, whose runs read
it back anyway).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fedprior.results.fingerprints import first_difference, numbers, same

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

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
    # the asynchronous algorithms have no preset of their own: fedavg-cnn's with --algorithm (tests/support/algorithm_setups.py)
    "fedavg-cnn+fedbuff": ("fedavg-cnn", ["algorithm.name=fedbuff", "algorithm.concurrency=4", "algorithm.buffer_size=2"]),
    "fedavg-cnn+fedasync": ("fedavg-cnn", ["algorithm.name=fedasync", "algorithm.concurrency=4"]),
}
"""Runs beside the presets' own (name -> preset, overrides after ``SMALL``): paths one small round leaves idle."""


def state_digest(run_path: Path) -> str:
    """SHA-256 of the last checkpoint's tensors (:func:`fedprior.results.fingerprints.state_sha256`: server, then each client)."""
    from fedprior.results.fingerprints import state_sha256
    from fedprior.results.run_dir import RunDir

    state = RunDir(run_path).load_checkpoint()
    assert state is not None, f"{run_path}: no checkpoint"
    return state_sha256(state.server, state.clients)


def runs(rounds: int | None = None) -> dict[str, tuple[str, list[str]]]:
    """Every run: each shipped preset with its small-data overrides, then the :data:`VARIANTS` (name -> preset, overrides).

    ``rounds``: every run trains that many rounds (``federation.rounds``, last), the
    :data:`VARIANTS` that only add rounds left out: a long run reads per-client state back anyway."""
    from tests.support.algorithm_setups import PRESETS, SMALL

    longer = [] if rounds is None else [f"federation.rounds={rounds}"]
    out = {preset: (preset, [*overrides, *SMALL, *RUN, *longer]) for preset, overrides in PRESETS.items()}
    for name, (preset, extra) in VARIANTS.items():
        if rounds is None or extra != TWO_ROUNDS:
            out[name] = (preset, [*PRESETS[preset], *SMALL, *extra, *RUN, *longer])
    return out


def run_one(name: str, preset: str, overrides: list[str], folder: Path) -> dict[str, Any]:
    """One run of ``preset`` with ``overrides``: its numbers, its state digest and its seconds."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    started = time.perf_counter()
    config_name, config = load_config(preset, overrides)
    rounds: list[dict[str, Any]] = []
    states: list[str] = []

    def on_round(record: dict[str, Any]) -> None:  # called after the round's checkpoint is written (run.checkpoint_every = 1)
        rounds.append(record)
        states.append(state_digest(folder / name)[:16])

    summary = start(config_name, config, folder / name, report_extras=False, on_round=on_round)
    values = numbers({"summary": summary, "rounds": rounds}, SKIPPED)
    return {
        "preset": preset,
        "algorithm": config.algorithm.name,
        "overrides": overrides,
        "values": values,
        "state_sha256": state_digest(folder / name),
        "round_states": states,
        "seconds": round(time.perf_counter() - started, 1),
    }


def round_of(key: str) -> int | None:
    """The round a value's key belongs to (``rounds[6].client_train_loss`` -> 6: the history's index, rounds counted
    over every stage, 0 the initial evaluation); None for the summary's."""
    return int(key[len("rounds[") : key.index("]")]) if key.startswith("rounds[") else None


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every way ``now`` (run -> result) differs from ``recorded``: per run, the first round that differs (its numbers or
    the state after it), that round's and the summary's differing numbers, a count of the later ones, the final state."""
    lines = []
    for run in sorted(set(recorded) | set(now)):  # a preset or a variant
        if run not in now:
            lines.append(f"{run}: recorded, not run now")
            continue
        if run not in recorded:
            lines.append(f"{run}: not recorded")
            continue
        old, new = recorded[run], now[run]
        changed = [key for key in sorted(set(old["values"]) | set(new["values"])) if not same(old["values"].get(key), new["values"].get(key))]
        rounds = [r for r in map(round_of, changed) if r is not None]
        first_numbers = min(rounds, default=None)
        first_state = first_difference(old.get("round_states", []), new["round_states"]) if "round_states" in old else None
        first = min((r for r in (first_numbers, first_state) if r is not None), default=None)
        if first is not None:
            lines.append(f"{run}: first differs in round {first} (numbers from round {first_numbers}, state from round {first_state})")
        for key in changed:
            if round_of(key) in (None, first):
                lines.append(f"{run}: {key} {old['values'].get(key, 'missing')!r} -> {new['values'].get(key, 'missing')!r}")
        if later := sum(r != first for r in rounds):
            lines.append(f"{run}: and {later} numbers of later rounds")
        if old["state_sha256"] != new["state_sha256"]:
            lines.append(f"{run}: final state differs (sha256 {old['state_sha256'][:12]} -> {new['state_sha256'][:12]})")
    return lines


def git(*args: str) -> str:
    from shared import shell

    return shell(f"git -C {HERE.parent} {' '.join(args)}")


def provenance(at_start: dict[str, Any], wall: float) -> dict[str, Any]:
    """Where a recording comes from: the command, the commit (and whether src/ had changed since), torch, the machine, the seconds."""
    import torch
    from shared import command_line

    return {
        "command": command_line(),
        "commit": git("rev-parse", "HEAD"),
        "src_changed_since_commit": bool(git("status", "--porcelain", "src")),
        "torch": torch.__version__,
        "machine": at_start,
        "wall_seconds": wall,
    }


def merge(path: Path, results: dict[str, Any], rounds: int | None, at_start: dict[str, Any], wall: float) -> int:
    """``--record FILE --only RUN ...``: write these runs into FILE, every other run and the file's own provenance kept as they
    were; the merge's provenance is appended to ``added``."""
    if not path.is_file():
        sys.exit(f"--record {path} --only ...: {path} does not exist; record every run first (no --only)")
    record = json.loads(path.read_text())
    if record.get("rounds") != rounds:
        sys.exit(f"{path} holds runs of {record.get('rounds') or 'one small'} round(s); merge runs of as many")
    record["runs"] = {**record["runs"], **results}
    record.setdefault("added", []).append({"runs": sorted(results), **provenance(at_start, wall)})
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"merged {len(results)} runs into {path} ({len(record['runs'])} runs now)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, metavar="FILE", help="run every preset and write FILE (with --only: merge those runs into FILE)")
    mode.add_argument("--check", type=Path, metavar="FILE", help="run every preset and compare with FILE exactly")
    parser.add_argument("--only", nargs="+", metavar="RUN", help="run (and check) only these presets or variants")
    parser.add_argument("--rounds", type=int, metavar="N", help="every run trains N rounds (the drift check: 30); default: the presets' one small round")
    args = parser.parse_args()

    os.environ["FEDPRIOR_CACHE"] = tempfile.mkdtemp(prefix="one-round-cache-")  # the locked-text stand-in trained afresh, the user's cache untouched
    import torch
    from shared import machine

    from fedprior.algorithms.registry import ALGORITHMS
    from fedprior.experiments.config import preset_paths
    from tests.support.algorithm_setups import PRESETS

    torch.set_num_threads(1)
    shipped = set(preset_paths())
    if shipped != set(PRESETS):
        sys.exit(
            f"tests/support/algorithm_setups.py PRESETS must name every shipped preset: missing {sorted(shipped - set(PRESETS))}, unknown {sorted(set(PRESETS) - shipped)}"
        )
    every = runs(args.rounds)
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

    if args.record and args.only:
        return merge(args.record, results, args.rounds, at_start, wall)
    if args.record:
        missing = set(ALGORITHMS) - {r["algorithm"] for r in results.values()}
        if missing:
            sys.exit(f"no preset runs the algorithms {sorted(missing)}")
        what = f"{args.rounds} rounds (a stage with its own round count keeps it)" if args.rounds else "one small round of every stage"
        record = {
            "what": f"every shipped preset's numbers after {what} (tests/support/algorithm_setups.py), and VARIANTS, compared bit for bit by --check",
            "rounds": args.rounds,
            **provenance(at_start, wall),
            "runs": results,
        }
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1) + "\n")
        print(f"recorded {len(results)} runs ({sum(len(r['values']) for r in results.values())} numbers) in {wall} s to {args.record}")
        return 0

    record = json.loads(args.check.read_text())
    if record.get("rounds") != args.rounds:
        held = record.get("rounds")
        sys.exit(f"{args.check} holds runs of {held or 'one small'} round(s): check it " + (f"with --rounds {held}" if held else "without --rounds"))
    then = {key: record["machine"].get(key, "not recorded") for key in ("kind", "cpu")}
    if then != {key: at_start[key] for key in then}:
        print(f"recorded on {then}, this is {at_start['kind']}, {at_start['cpu']}: where they differ, the bits may differ for that alone")
    recorded = record["runs"]
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
