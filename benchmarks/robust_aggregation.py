"""Robust aggregation against misbehaving clients on the embedded fedavg-cnn setting: does FedAvg degrade, does each rule hold?

The ``fedavg-cnn`` preset (Fashion-MNIST pixels, the small CNN, 100 clients, Dirichlet 0.5, 10 sampled per round, one
local epoch of batches of 32), ``--rounds`` rounds (10 by default; the preset has 20), for every seed:

- controls without attack: FedAvg, and Krum (one client's model a round: the cost of the rule itself under non-IID clients);
- under each attack (``--attacks``; ``federation.malicious_fraction`` = ``--fraction``): FedAvg, the coordinate-wise median,
  the trimmed mean (beta = ``--trim``), Krum and Multi-Krum (f = ``--krum-f``, m = n - f).

Per cell: the final accuracy per seed, mean and sd; paired differences (same seed: the same partition, client sampling and
malicious clients), with mean, sd and 95% t interval, of each rule under an attack to FedAvg under the same attack, of
every cell to FedAvg without attack (the cost), and of a rule under attack to the same rule without attack where that runs.
Mechanism, per run: how many malicious clients each round sampled, and for Krum and Multi-Krum how many of the models
they kept were malicious (read from the replies' client ids in the process, the rule's own selection).

    python benchmarks/robust_aggregation.py [--rounds 10] [--seeds 0 1 2] [--out benchmarks/results/robust_aggregation.json]

Results are written after every run (a rerun keeps the runs the file already holds and skips them).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

from shared import command_line, machine

import fedprior
from fedprior.algorithms.pieces import robust_aggregation
from fedprior.runtime.attacks import malicious_clients
from fedprior.runtime.divergence import DivergedError
from fedprior.runtime.sampling import sample_clients

PRESET = "fedavg-cnn"
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}
"""Student's t quantile 0.975 by degrees of freedom (n - 1 seeds)."""

NOTES = (
    "The runs whose overrides say algorithm.aggregation=... ran before that field was renamed algorithm.aggregation_rule (fedprior/algorithms/"
    "pieces/robust_aggregation_fields.py; fst-cbdg and fedbm have their own 'aggregation'); the rules' code is the same."
)

SELECTED: list[list[int]] = []
"""The client ids of the replies a rule kept, one list a round (filled by the wrapped ``RobustAggregation.select``)."""
_select = robust_aggregation.RobustAggregation.select


def recording_select(self, replies):
    kept = _select(self, replies)
    if self.rule in ("krum", "multi_krum"):
        SELECTED.append([r.client_id for r in kept])
    return kept


robust_aggregation.RobustAggregation.select = recording_select  # type: ignore[method-assign]


def cells(attacks: list[str], fraction: float, trim: float, krum_f: int) -> dict[str, list[str]]:
    """Cell name -> its overrides of the preset."""
    rules = {
        "fedavg": [],
        "median": ["algorithm.aggregation_rule=median"],
        "trimmed_mean": ["algorithm.aggregation_rule=trimmed_mean", f"algorithm.trim_fraction={trim}"],
        "krum": ["algorithm.aggregation_rule=krum", f"algorithm.krum_f={krum_f}"],
        "multi_krum": ["algorithm.aggregation_rule=multi_krum", f"algorithm.krum_f={krum_f}"],
    }
    out = {"no_attack/fedavg": []}
    for attack in attacks:
        name, _, scale = attack.partition(":")
        threat = [f"federation.attack={name}", f"federation.malicious_fraction={fraction}", *([f"federation.attack_scale={scale}"] if scale else [])]
        out.update({f"{attack}/{rule}": [*threat, *overrides] for rule, overrides in rules.items()})
    return {**out, "no_attack/krum": rules["krum"]}  # the control last: the attack grid first where time is short


def one_run(overrides: list[str], seed: int, rounds: int) -> dict:
    """A run's final accuracy, history, seconds, and its sampled malicious clients and the rule's kept ones per round."""
    SELECTED.clear()
    settings = [*overrides, f"run.seed={seed}", f"federation.rounds={rounds}", "run.threads=1", "run.workers=1"]
    config = fedprior.load_config(PRESET, dict(s.split("=", 1) for s in settings))
    records: list[dict] = []
    diverged = None
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        try:
            fedprior.run(config, run_dir=Path(folder) / "run", on_round=records.append)
        except DivergedError as error:  # the global model blew up: honest clients' training then gives non-finite numbers
            diverged = str(error)
        seconds = time.perf_counter() - started
    history = [r["accuracy"] for r in records if r.get("round", 0) > 0 and "accuracy" in r]
    federation = config.settings.federation
    bad = malicious_clients(seed, federation.num_clients, federation.malicious_fraction)
    sampled = [sorted(set(sample_clients(seed, "federated", r, federation.num_clients, federation.fraction)) & bad) for r in range(1, rounds + 1)]
    out = {"final_accuracy": history[-1], "history": history, "seconds": round(seconds, 1), "malicious_sampled": [len(s) for s in sampled]}
    if diverged:
        out.update(diverged=diverged, final_accuracy=None, last_accuracy=history[-1] if history else None)
    if SELECTED:
        out["malicious_kept"] = [len(set(kept) & bad) for kept in SELECTED]
        out["kept"] = [len(kept) for kept in SELECTED]
    return out


def accuracy(run: dict) -> float:
    """A run's final accuracy; for one that diverged, the chance level 0.1 of its 10 classes (a model of non-finite weights predicts
    nothing; its last accuracy before it diverged is kept in ``last_accuracy``)."""
    return run["final_accuracy"] if run.get("final_accuracy") is not None else 0.1


def paired(a: list[float], b: list[float]) -> dict:
    """Mean, sd and 95% t interval of a - b over paired seeds."""
    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = statistics.fmean(d)
    sd = statistics.stdev(d) if len(d) > 1 else math.nan
    half = T95.get(len(d) - 1, 1.96) * sd / math.sqrt(len(d)) if len(d) > 1 else math.nan
    return {"differences": d, "mean": mean, "sd": sd, "ci95": [mean - half, mean + half]}


def summarize(runs: dict[str, dict[str, dict]], attacks: list[str]) -> dict:
    """Per cell mean and sd of the final accuracy; per rule under an attack the paired difference to FedAvg under it."""
    out: dict = {}
    for cell, by_seed in runs.items():
        accuracies = [accuracy(r) for _, r in sorted(by_seed.items())]
        out[cell] = {"seeds": sorted(by_seed), "final_accuracy": accuracies, "mean": statistics.fmean(accuracies)}
        out[cell]["diverged_seeds"] = [s for s, r in sorted(by_seed.items()) if r.get("diverged")]
        out[cell]["sd"] = statistics.stdev(accuracies) if len(accuracies) > 1 else math.nan
        attack, rule = cell.split("/")
        against = {
            "vs_fedavg_under_attack": f"{attack}/fedavg" if attack in attacks and rule != "fedavg" else None,
            "vs_fedavg_no_attack": "no_attack/fedavg" if cell != "no_attack/fedavg" else None,
            "vs_same_rule_no_attack": f"no_attack/{rule}" if attack != "no_attack" and rule != "fedavg" else None,
        }
        for key, other in against.items():
            base = runs.get(other or "", {})
            if other and base and set(by_seed) <= set(base):
                out[cell][key] = paired(accuracies, [accuracy(base[s]) for s in sorted(by_seed)])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--attacks", nargs="+", default=["sign_flip:4"], help="ATTACK[:SCALE], e.g. sign_flip:4 gaussian:1")
    parser.add_argument("--fraction", type=float, default=0.2)
    parser.add_argument("--trim", type=float, default=0.3)
    parser.add_argument("--krum-f", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "robust_aggregation.json")
    args = parser.parse_args()
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    runs: dict[str, dict[str, dict]] = previous.get("runs", {})
    header = {
        "what": __doc__.split("\n\n")[0],
        "preset": PRESET,
        "rounds": args.rounds,
        "malicious_fraction": args.fraction,
        "trim_fraction": args.trim,
        "krum_f": args.krum_f,
        "command": command_line(),
        "machine": previous.get("machine") or machine(),  # the first invocation's (its load at start); the runs' seconds say the rest
        "settings": "--set run.threads=1 --set run.workers=1, one run at a time, beside other agents' jobs on the same 2 cores",
        "notes": previous.get("notes", NOTES),
    }
    for cell, overrides in cells(args.attacks, args.fraction, args.trim, args.krum_f).items():
        for seed in args.seeds:
            if str(seed) in runs.get(cell, {}):
                continue
            runs.setdefault(cell, {})[str(seed)] = {"overrides": overrides, **one_run(overrides, seed, args.rounds)}
            print(cell, seed, runs[cell][str(seed)]["final_accuracy"], runs[cell][str(seed)]["seconds"], flush=True)
            write(args.out, header, runs, args.attacks)
    write(args.out, header, runs, args.attacks)  # the summary of every run the file holds, also where none was new


def write(path: Path, header: dict, runs: dict, attacks: list[str]) -> None:
    path.write_text(json.dumps({**header, "summary": summarize(runs, attacks), "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
