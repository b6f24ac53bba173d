"""How a run's memory and time grow with the population N (issue 53 item 4): peak RSS, set-up, round time, checkpoint.

Cross-device federations hold millions of clients of which a round samples a few, so nothing of a run may grow
faster than N (the set-up, sampling, the round loop, checkpoints, reports), and a round's time should depend on the
clients it samples, m, not on N. Each case is one ``fedprior run`` (``fedprior.experiments.runner.start``, the CLI's
path, with its run folder, checkpoints, report and plots) in a process of its own, with ``run.threads = 1`` and
``run.workers = 1``; it reports

- ``peak_rss_mb``: the process's peak resident memory (``getrusage``'s ``ru_maxrss``), imports included;
- ``setup_seconds``: from the start of the run (after the imports) until training starts (the data, the partition and
  its statistics, the plot, the algorithm, the initial evaluation's start);
- ``median_round_seconds``: the median of the rounds' ``seconds`` (training, aggregation, evaluation);
- ``checkpoint_bytes``: the last checkpoint file and the parts it names.

Cases: Synthetic(1, 1) of the FedProx paper (``fedavg-synthetic``: multinomial logistic regression, 20 local epochs,
batch 10; ``data.dataset = 'synthetic'``, generated per client) at N = 10^2 ... 10^6, and Fashion-MNIST (``fedavg-cnn``'s
small CNN, one local epoch) IID and Dirichlet(0.5) at N up to 60,000 (one image a client), for FedAvg and SCAFFOLD
(whose control variates are per-client state), with m = 10 and 100 clients a round (fraction m / N). After the
cases the log-log slope of each measure against N is printed per series (least squares over the series' Ns, and
between 10^4 and the largest N): 1 is linear growth, 0 none.

    python benchmarks/population_scale.py --out benchmarks/results/population_scale.json
    python benchmarks/population_scale.py --data synthetic --sizes 100 1000 10000 --algorithms fedavg --per-round 10 --out /tmp/p.json

``--out`` collects the cases already in the file (a rerun of some cases replaces them) with the command and the machine;
``--include FILE ...`` adds the cases of other result files (cases run as separate commands), whose commands, machines and loads it lists (``cases_from``);
``--collect`` runs no case, only gathers them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from shared import command_line, load, machine  # noqa: E402

PRESETS = {"synthetic": "fedavg-synthetic", "fmnist-iid": "fedavg-cnn", "fmnist-dirichlet": "fedavg-cnn"}
DATA_SETTINGS = {
    "synthetic": [],
    "fmnist-iid": ["partition.scheme=iid"],
    "fmnist-dirichlet": ["partition.scheme=dirichlet", "partition.alpha=0.5"],
}
ALGORITHM_SETTINGS = {
    "synthetic": {"fedavg": [], "scaffold": ["algorithm.model=linear", "algorithm.lr=0.01"]},
    "fmnist-iid": {"fedavg": [], "scaffold": ["algorithm.model=cnn", "algorithm.lr=0.05"]},
    "fmnist-dirichlet": {"fedavg": [], "scaffold": ["algorithm.model=cnn", "algorithm.lr=0.05"]},
}
ROUNDS = {"synthetic": 5, "fmnist-iid": 3, "fmnist-dirichlet": 3}
SIZES = {"synthetic": [100, 1000, 10_000, 100_000, 1_000_000], "fmnist-iid": [100, 1000, 10_000, 60_000], "fmnist-dirichlet": [100, 1000, 10_000, 60_000]}
MEASURES = ("peak_rss_mb", "setup_seconds", "median_round_seconds", "checkpoint_bytes")


def case_key(data: str, algorithm: str, per_round: int, clients: int) -> str:
    return f"{data}/{algorithm}/m={per_round}/N={clients}"


def overrides(data: str, algorithm: str, per_round: int, clients: int) -> list[str]:
    """The ``--set`` settings of a case (fraction = m / N)."""
    return [
        *DATA_SETTINGS[data],
        *ALGORITHM_SETTINGS[data][algorithm],
        f"federation.num_clients={clients}",
        f"federation.fraction={per_round / clients!r}",
        f"federation.rounds={ROUNDS[data]}",
        "run.threads=1",
        "run.workers=1",
    ]


def one_case(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one case in this process (a child of :func:`main`) and measure it."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    data, algorithm = spec["data"], spec["algorithm"]
    settings = overrides(data, algorithm, spec["per_round"], spec["clients"])
    name, config = load_config(PRESETS[data], settings, algorithm=None if algorithm == "fedavg" else algorithm)
    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="population-scale-") as folder:
        run_dir = Path(folder) / "run"
        began = time.perf_counter()
        summary = start(name, config, run_dir, on_start=lambda *args: marks.setdefault("setup", time.perf_counter() - began), report_extras=False)
        wall = time.perf_counter() - began
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
        checkpoint = run_dir / "checkpoint.safetensors"
        parts = sum(p.stat().st_size for p in checkpoint.with_name("checkpoint.blobs").glob("*.safetensors"))
        checkpoint_bytes = checkpoint.stat().st_size + parts
    rounds = [r["seconds"] for r in records if r.get("step", 0) >= 1 and "seconds" in r]
    return {
        **spec,
        "settings": settings,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "setup_seconds": round(marks["setup"], 3),
        "median_round_seconds": round(statistics.median(rounds), 4),
        "round_seconds": [round(s, 4) for s in rounds],
        "checkpoint_bytes": checkpoint_bytes,
        "wall_seconds": round(wall, 2),
        "final_accuracy": summary.get("final_accuracy"),
    }


def slope(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of log(y) against log(x) (None with fewer than two points or a y <= 0)."""
    points = [(x, y) for x, y in points if y and y > 0]
    if len(points) < 2:
        return None
    xs, ys = [math.log(x) for x, _ in points], [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def slopes(cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per series (data, algorithm, m): each measure's log-log slope over all its Ns, and from N = 10^4 up."""
    series: dict[str, list[dict[str, Any]]] = {}
    for case in cases.values():
        series.setdefault(f"{case['data']}/{case['algorithm']}/m={case['per_round']}", []).append(case)
    out: dict[str, dict[str, Any]] = {}
    for key, members in sorted(series.items()):
        members.sort(key=lambda c: c["clients"])
        entry: dict[str, Any] = {"N": [c["clients"] for c in members]}
        for measure in MEASURES:
            entry[measure] = slope([(c["clients"], c[measure]) for c in members])
            entry[f"{measure}_from_1e4"] = slope([(c["clients"], c[measure]) for c in members if c["clients"] >= 10_000])
        out[key] = entry
    return out


def print_table(cases: dict[str, dict[str, Any]], fitted: dict[str, dict[str, Any]]) -> None:
    print(f"{'case':44} {'peak RSS MB':>11} {'set-up s':>9} {'round s':>8} {'checkpoint B':>13}")
    for key in sorted(cases, key=lambda k: (k.rsplit("/N=", 1)[0], cases[k]["clients"])):
        c = cases[key]
        print(f"{key:44} {c['peak_rss_mb']:11.1f} {c['setup_seconds']:9.2f} {c['median_round_seconds']:8.3f} {c['checkpoint_bytes']:13d}")
    print("\nlog-log slopes against N (all Ns | from 10^4):")
    for key, entry in fitted.items():
        shown = ", ".join(f"{m} {fmt(entry[m])} | {fmt(entry[m + '_from_1e4'])}" for m in MEASURES)
        print(f"  {key}: {shown}")


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", choices=sorted(PRESETS), default=sorted(PRESETS))
    parser.add_argument("--sizes", nargs="+", type=int, help="the Ns (default: each data's own list)")
    parser.add_argument("--algorithms", nargs="+", choices=("fedavg", "scaffold"), default=["fedavg", "scaffold"])
    parser.add_argument("--per-round", nargs="+", type=int, default=[10, 100], help="clients a round, m")
    parser.add_argument("--out", type=Path, help="the results JSON (cases already there are kept unless rerun)")
    parser.add_argument("--include", nargs="*", type=Path, default=[], help="other result files of this script whose cases join --out's")
    parser.add_argument("--collect", action="store_true", help="run no case: only gather --include's cases into --out, with the slopes")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: one case's JSON spec
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_case(json.loads(args.one))))
        return
    at_start = machine()
    previous = json.loads(args.out.read_text()) if args.out is not None and args.out.is_file() else {}
    cases: dict[str, dict[str, Any]] = dict(previous.get("cases", {}))
    runs = [{k: previous[k] for k in ("command", "machine", "load_at_end")}] if previous else []
    for other in args.include:
        included = json.loads(other.read_text())
        cases.update(included["cases"])
        runs.append({k: included[k] for k in ("command", "machine", "load_at_end")})
    for data in [] if args.collect else args.data:
        for algorithm in args.algorithms:
            for per_round in args.per_round:
                for clients in args.sizes or SIZES[data]:
                    if per_round > clients:
                        continue
                    spec = {"data": data, "algorithm": algorithm, "per_round": per_round, "clients": clients}
                    done = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True, env={**os.environ})
                    if done.returncode != 0:
                        print(f"{case_key(**spec)}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                        continue
                    case = json.loads(done.stdout.strip().splitlines()[-1])
                    cases[case_key(**spec)] = case
                    print(f"{case_key(**spec)}: {case['peak_rss_mb']} MB, set-up {case['setup_seconds']} s, round {case['median_round_seconds']} s", flush=True)
    fitted = slopes(cases)
    print_table(cases, fitted)
    if args.out is not None:
        record = {"command": command_line(), "cases_from": runs, "machine": at_start, "load_at_end": load(), "cases": cases, "slopes": fitted}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
