"""FST-CBDG speed: the sampled clients' heads trained together vs one client at a time.

100 clients, 10 per round, 10 rounds, 50,000 synthetic 1024-d features in 10 classes
(the size of CLIP RN50's features on CIFAR-10), shards s=2 as in the main preset, so
Eq. (7) asks for several times more synthetic features than real ones. Both runs use
the same config and seed; the benchmark checks they end with the same head.

    python benchmarks/fst_cbdg_speed.py [--json] [--load N] [--threads T]

Prints vectorized_seconds, loop_seconds and speedup (loop / vectorized), measured in
this one run. Targets on a 2-core machine: vectorized within 1 second, speedup >= 10.
The runs use fedprior's thread policy for feature-space work (one torch thread; see
``fedprior.runtime.threads``; ``--threads T`` sets run.threads instead). ``--load N``
times the vectorized run again while N busy processes spin and prints
``load_slowdown`` (loaded / quiet; target <= 2 with one busy process).
Both paths draw the synthetic features the fast way (noise='projected'); it also
times the straightforward reading, one client at a time with d-dimensional Gaussian
draws (noise='direct'), as loop_direct_noise_seconds, to show where the time goes.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from shared import busy_processes, print_result

from fedprior.algorithms.base import Runtime, Task
from fedprior.algorithms.fst_cbdg import fst_cbdg
from fedprior.partition.shard import ShardPartitioner
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from fedprior.runtime.threads import thread_policy

CLIENTS, FRACTION, ROUNDS, SAMPLES, TEST, DIM, CLASSES = 100, 0.1, 10, 50_000, 10_000, 1024, 10


def synthetic_features(seed: int = 0):
    """Unit-norm features around random class centres, and text prototypes that only roughly match them."""
    g = torch.Generator().manual_seed(seed)
    centres = F.normalize(torch.randn(CLASSES, DIM, generator=g), dim=1)

    def draw(n):
        y = torch.randint(0, CLASSES, (n,), generator=g)
        return F.normalize(centres[y] + 0.9 * torch.randn(n, DIM, generator=g) / DIM**0.5 * 4, dim=1), y

    train_x, train_y = draw(SAMPLES)
    test_x, test_y = draw(TEST)
    text = F.normalize(centres + 0.6 * torch.randn(CLASSES, DIM, generator=g) / DIM**0.5 * 4, dim=1)
    return train_x, train_y, test_x, test_y, text


def run(vectorize: bool, setup, noise: str = "projected") -> tuple[float, dict]:
    train_x, train_y, test_x, test_y, text, parts, threads = setup
    task = Task(num_classes=CLASSES, input_shape=(DIM,), class_names=tuple(map(str, range(CLASSES))), num_clients=CLIENTS, prior={"text_features": text})
    start = time.perf_counter()
    algorithm = fst_cbdg(task, Runtime(1, 50), noise=noise)
    result = simulate(
        algorithm,
        lambda c: {"x": train_x[parts[c]]},
        CLIENTS,
        {"x": test_x, "y": test_y},
        RoundLoop(seed=0, rounds=ROUNDS, fraction=FRACTION, vectorize=vectorize, threads=threads),
    )
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--load", type=int, default=0, metavar="N", help="also time the vectorized run with N busy processes running")
    parser.add_argument("--threads", type=int, default=0, metavar="T", help="run.threads (0: fedprior's policy, one thread here)")
    args = parser.parse_args()
    train_x, train_y, test_x, test_y, text = synthetic_features()
    parts = [torch.from_numpy(p) for p in ShardPartitioner(CLIENTS, 2, seed=0).split(train_y.numpy())]
    threads = thread_policy(args.threads, feature_space=True)
    setup = (train_x, train_y, test_x, test_y, text, parts, threads)
    run(True, setup)  # warm-up: first-call allocations and kernels
    vectorized_seconds, vec = run(True, setup)
    loop_seconds, loop = run(False, setup)
    direct_seconds, direct = run(False, setup, noise="direct")
    difference = max(float((vec.state[k] - loop.state[k]).abs().max()) for k in vec.state)
    synthetic = sum(r.get("client_synthetic_samples", 0) * len(r["clients"]) for r in vec.progress.history)
    out = {
        "vectorized_seconds": round(vectorized_seconds, 3),
        "loop_seconds": round(loop_seconds, 3),
        "speedup": round(loop_seconds / vectorized_seconds, 2),
        "loop_direct_noise_seconds": round(direct_seconds, 3),
        "speedup_vs_direct_noise_loop": round(direct_seconds / vectorized_seconds, 2),
        "direct_noise_final_accuracy": direct.progress.history[-1]["accuracy"],
        "final_accuracy": vec.progress.history[-1]["accuracy"],
        "max_head_difference": difference,
        "synthetic_features_drawn": int(synthetic),
        "threads": threads.train,
    }
    if args.load:
        with busy_processes(args.load):
            loaded_seconds, _ = run(True, setup)
        out.update({"load": args.load, "loaded_vectorized_seconds": round(loaded_seconds, 3), "load_slowdown": round(loaded_seconds / vectorized_seconds, 2)})
    print_result(out, args.json)


if __name__ == "__main__":
    main()
