"""The cost of client-level DP in a round's aggregation: FedAvg's mean of 100 replies of the small CNN against DP-FedAvg's clip, mean and noise
(docs/privacy-robustness.md quotes it). Run: PYTHONPATH=src python benchmarks/dp_aggregate_cost.py"""

import time

import torch

from fedprior.algorithms.base import Reply, RoundInfo, Runtime
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.differential_privacy import ClientLevelDp, with_client_level_dp
from fedprior.task import Task

torch.set_num_threads(1)
task = Task(num_classes=10, input_shape=(1, 28, 28), class_names=tuple(map(str, range(10))), num_clients=1000, prior={})
plain = fedavg(task, Runtime(1, 32))
dp = with_client_level_dp(plain, ClientLevelDp("server", 1.0, 0.5, 100), epsilon=None)
info = RoundInfo(0, "federated", 1)
state = dp.init(info)
own = {k: v for k, v in state.items() if not k.startswith("privacy.")}
g = torch.Generator().manual_seed(0)
replies = [Reply({k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in own.items()}, 60, client_id=i) for i in range(100)]
for name, alg, st in (("fedavg", plain, own), ("dp-fedavg", dp, state)):
    alg.aggregate(st, replies, info)
    t = time.perf_counter()
    n = 5
    for _ in range(n):
        alg.aggregate(st, replies, info)
    print(name, "aggregate of 100 replies:", round((time.perf_counter() - t) / n, 3), "s")
