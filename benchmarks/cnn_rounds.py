"""The fedavg-cnn preset's seconds per round: fedprior (1 and 2 workers), a plain PyTorch loop, Flower.

The ``fedavg-cnn`` preset: Fashion-MNIST pixels, the small CNN, 100 clients
(Dirichlet 0.5), 10 sampled per round, one local epoch of batches of 32. Each figure
is the steady-state wall time of a round: the median over rounds 2 .. R-1 of the time
between two rounds' ends (round 1 pays for start-up, the last round for the one
evaluation; ``federation.evaluate_every = R``), measured like this:

- ``fedprior_1_worker``, ``fedprior_2_workers``: ``fedprior run`` (the experiment
  runner: run directory, per-round metrics and atomic checkpoints) with
  ``run.workers`` = 1 and 2, one torch thread per client update (the default policy);
- ``plain``: the same work, written here as a plain PyTorch loop: the same model, the
  same clients' data, the same shuffled batches (the clients' own generators), the same
  steps, SGD, then the example-weighted average of the models; one thread;
- ``flower``: the same rounds under Flower's simulation engine (``run.runtime =
  flower-sim``: one virtual SuperNode per client, one Ray actor per core).

Ratios: ``overhead`` = fedprior_1_worker / plain (target <= 1.10),
``workers_speedup`` = fedprior_1_worker / fedprior_2_workers (target >= 1.6 on a quiet
2-core machine), ``flower_ratio`` = flower / fedprior_1_worker. ``--load N`` then
times fedprior again while N busy processes spin and prints ``load_slowdown`` (loaded /
quiet, 1 worker; target <= 2 with one busy process) and ``load_slowdown_2_workers``.

    python benchmarks/cnn_rounds.py [--json] [--load N] [--device auto|cpu|cuda|cuda:N] [--rounds R] [--no-flower]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from shared import busy_processes, print_result

from fedprior.experiments.build import Experiment, build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.models.cnn import SmallCNN
from fedprior.runtime.sampling import sample_clients
from fedprior.seeding import derived_seed, torch_generator

PRESET = "fedavg-cnn"
QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def steady(ends: list[float]) -> float:
    """Median seconds of rounds 2 .. R-1, from the times at which rounds 0 (initial evaluation) .. R ended."""
    durations = [b - a for a, b in itertools.pairwise(ends)]  # durations[i] is round i + 1
    return statistics.median(durations[1:-1])


def fedprior_round_seconds(overrides: list[str], work: Path, label: str) -> tuple[float, dict]:
    """Steady-state seconds per round of ``fedprior run fedavg-cnn`` with ``overrides``, and its summary."""
    name, config = load_config(PRESET, overrides)
    ends: list[float] = []
    summary = start(name, config, work / label, report_extras=False, on_round=lambda record: ends.append(time.perf_counter()))
    return steady(ends), summary


def plain_round_seconds(experiment: Experiment, rounds: int, device: torch.device) -> tuple[float, int]:
    """The same rounds in a plain PyTorch loop: seconds per round (steady state) and the SGD steps taken in all."""
    config = experiment.config
    lr, batch_size, seed = config.algorithm.hyperparameters().get("lr", 0.05), config.federation.batch_size, config.run.seed
    torch.manual_seed(derived_seed(seed, "init", "model"))
    shape = experiment.task.input_shape
    model = SmallCNN(shape[0], shape[1], experiment.task.num_classes).to(device)
    global_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ends, steps = [time.perf_counter()], 0
    for round_ in range(1, rounds + 1):
        clients = sample_clients(seed, "federated", round_, config.federation.num_clients, config.federation.fraction)
        trained, sizes = [], []
        for client in clients:
            data = experiment.client_data(client)
            x, y = data["x"].to(device), data["y"].to(device)
            model.load_state_dict(global_weights)
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            generator = torch_generator(seed, "client", "federated", round_, client)
            model.train()
            for _ in range(config.federation.local_epochs):
                order = torch.randperm(x.shape[0], generator=generator).to(device)
                for begin in range(0, x.shape[0], batch_size):
                    batch = order[begin : begin + batch_size]
                    optimizer.zero_grad(set_to_none=True)
                    torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
                    optimizer.step()
                    steps += 1
            trained.append({k: v.detach().clone() for k, v in model.state_dict().items()})
            sizes.append(x.shape[0])
        total = sum(sizes)
        global_weights = {k: sum(w[k] * (n / total) for w, n in zip(trained, sizes, strict=True)) for k in global_weights}
        ends.append(time.perf_counter())
    return steady(ends), steps


def fedprior_steps(summary_dir: Path) -> int:
    """SGD steps of a fedprior run, from its metrics (mean client steps x clients that trained)."""
    records = [json.loads(line) for line in (summary_dir / "metrics.jsonl").read_text().splitlines()]
    return int(round(sum(r["client_steps"] * len(r["upload_bytes_by_client"]) for r in records)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--load", type=int, default=0, metavar="N", help="also time fedprior with N busy processes running")
    parser.add_argument("--device", default="cpu", help="run.device for every figure (auto, cpu, cuda, cuda:N)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per timing (rounds 2 .. R-1 are timed)")
    parser.add_argument("--no-flower", action="store_true", help="skip the Flower simulation figure")
    args = parser.parse_args()
    if args.rounds < 4:
        sys.exit("--rounds: at least 4 (rounds 2 .. R-1 are timed)")
    os.environ.update(QUIET)
    common = [f"federation.rounds={args.rounds}", f"federation.evaluate_every={args.rounds}", f"run.device='{args.device}'"]

    name, config = load_config(PRESET, [*common, "run.workers=1"])
    experiment = build_experiment(name, config)
    out: dict = {
        "preset": PRESET,
        "device": str(experiment.device),
        "rounds": args.rounds,
        "timed_rounds": args.rounds - 2,
        "clients_per_round": len(sample_clients(0, "federated", 1, config.federation.num_clients, config.federation.fraction)),
        "cpus": os.cpu_count(),
        "threads_per_update": experiment.threads.train,
    }
    with tempfile.TemporaryDirectory(prefix="fedprior-cnn-rounds-") as folder:
        work = Path(folder)
        torch.set_num_threads(experiment.threads.train)
        plain, plain_steps = plain_round_seconds(experiment, args.rounds, experiment.device)
        one, summary = fedprior_round_seconds([*common, "run.workers=1"], work, "w1")
        two, _ = fedprior_round_seconds([*common, "run.workers=2"], work, "w2")
        if fedprior_steps(work / "w1") != plain_steps:
            sys.exit(f"the plain loop took {plain_steps} steps, fedprior {fedprior_steps(work / 'w1')}: not the same work")
        out.update(
            {
                "plain_seconds_per_round": round(plain, 3),
                "fedprior_1_worker_seconds_per_round": round(one, 3),
                "fedprior_2_workers_seconds_per_round": round(two, 3),
                "overhead": round(one / plain, 3),
                "workers_speedup": round(one / two, 3),
                "steps_per_round": plain_steps / args.rounds,
                "final_accuracy": summary["final_accuracy"],
            }
        )
        if args.load:
            with busy_processes(args.load):
                loaded_one, _ = fedprior_round_seconds([*common, "run.workers=1"], work, "w1-loaded")
                loaded_two, _ = fedprior_round_seconds([*common, "run.workers=2"], work, "w2-loaded")
            out.update(
                {
                    "load": args.load,
                    "loaded_fedprior_1_worker_seconds_per_round": round(loaded_one, 3),
                    "loaded_fedprior_2_workers_seconds_per_round": round(loaded_two, 3),
                    "load_slowdown": round(loaded_one / one, 3),
                    "load_slowdown_2_workers": round(loaded_two / two, 3),
                }
            )
        if not args.no_flower:
            flower, _ = fedprior_round_seconds([*common, "run.runtime='flower-sim'"], work, "flower")
            out.update({"flower_seconds_per_round": round(flower, 3), "flower_ratio": round(flower / one, 3)})
    out["targets"] = {"overhead": "<= 1.10", "workers_speedup": ">= 1.6 (quiet, 2 cores)", "load_slowdown": "<= 2 (one busy process)"}
    print_result(out, args.json)


if __name__ == "__main__":
    main()
