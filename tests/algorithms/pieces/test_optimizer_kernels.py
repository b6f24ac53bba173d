"""Fused optimizer kernels on CUDA only (fedprior.algorithms.pieces.optimizer_kernels)."""

import copy

import pytest
import torch
from torch import nn

from fedprior.algorithms.engines.body_training import LocalOptimizer
from fedprior.algorithms.engines.semi_supervised import Training, make_optimizer
from fedprior.algorithms.engines.supervised import sgd
from fedprior.algorithms.pieces.optimizer_kernels import fused_on_cuda


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))


def test_the_cpu_keeps_torchs_default_kernels_in_every_engine():
    """CPU numbers must not change: no engine asks the CPU for fused kernels."""
    net = small_net()
    params = list(net.parameters())
    assert fused_on_cuda(params) is None and fused_on_cuda([{"params": params}]) is None and fused_on_cuda([]) is None
    optimizers = [
        make_optimizer(params, Training(epochs=1), lr=0.1),
        make_optimizer(params, Training(epochs=1, optimizer="adam"), lr=0.1),
        LocalOptimizer().build(net.parameters(), 1),
        LocalOptimizer(kind="adam").build([{"params": params}], 1),
        sgd(net, 0.1, 0.9, 5e-4),
    ]
    assert all(not o.defaults.get("fused") for o in optimizers)


def test_cuda_parameters_ask_for_fused_kernels():
    class OnCuda(torch.Tensor):  # a stand-in whose is_cuda is True: no GPU needed to check the decision
        @property
        def is_cuda(self) -> bool:  # type: ignore[override]
            return True

    tensors = [torch.zeros(3).as_subclass(OnCuda), torch.zeros(2).as_subclass(OnCuda)]
    assert fused_on_cuda(tensors) is True
    assert fused_on_cuda([{"params": tensors}]) is True
    assert fused_on_cuda([*tensors, torch.zeros(1)]) is None  # mixed devices: the default kernels


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_a_fused_step_gives_the_default_steps_numbers(kind):
    """What fused kernels change is the number of launches, not the update: on the CPU (where torch has them too) five
    fused steps of SGD with Nesterov momentum and weight decay, or of Adam, end where the default kernels end, within
    float32 rounding (the fused kernels order the update's arithmetic their own way: SGD's were equal to the bit alone,
    not after other tests changed the thread count)."""
    plain, fused = small_net(), small_net()
    options = dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4) if kind == "sgd" else dict(lr=1e-3, weight_decay=5e-4)
    make = torch.optim.SGD if kind == "sgd" else torch.optim.Adam
    optimizers = [make(plain.parameters(), **options), make(fused.parameters(), **options, fused=True)]
    x, y = torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,))
    for _ in range(5):
        for net, optimizer in zip((plain, fused), optimizers, strict=True):
            optimizer.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
    for a, b in zip(plain.parameters(), fused.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # float32's default tolerances
    assert copy.deepcopy(optimizers[1]).defaults["fused"]


def test_param_groups_holding_generators_keep_every_parameter():
    """FedRoD hands LocalOptimizer groups whose params are ``module.parameters()`` generators: deciding the kernels must not
    exhaust them (it did once, and FedRoD's shared body stopped training: the 30-round drift check caught it)."""
    net = small_net()
    groups = [{"params": net[0].parameters()}, {"params": net[4].parameters(), "momentum": 0.0}]
    optimizer = LocalOptimizer().build(groups, 1)
    assert [len(g["params"]) for g in optimizer.param_groups] == [2, 2]
    assert optimizer.param_groups[1]["momentum"] == 0.0
