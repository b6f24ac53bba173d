"""BatchNorm recalibration (fedprior.models.bn_recalibration): the running statistics become the pool's."""

from __future__ import annotations

import torch
from torch import nn

from fedprior.models.bn_recalibration import batchnorm_layers, recalibrate_batchnorm


def two_layer_net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.5), nn.Conv2d(4, 5, 3, padding=1), nn.BatchNorm2d(5))


def test_recalibrated_running_statistics_are_the_pools_mean_and_unbiased_variance_layer_by_layer() -> None:
    net = two_layer_net()
    net.eval()
    with torch.no_grad():  # statistics far from the pool's: what a fresh or averaged layer holds
        for layer in batchnorm_layers(net):
            layer.running_mean.fill_(3.0)
            layer.running_var.fill_(9.0)
    pool = torch.randn(64, 3, 6, 6) * 2 + 1
    recalibrate_batchnorm(net, lambda: net(pool))
    conv1, bn1, _, _, conv2, bn2 = net
    with torch.no_grad():
        h1 = conv1(pool)
        assert torch.allclose(bn1.running_mean, h1.mean((0, 2, 3)), atol=1e-5)
        assert torch.allclose(bn1.running_var, h1.var((0, 2, 3), unbiased=True), rtol=1e-5)
        # the layer above sees the input normalized by the pool's own (biased) statistics, as in a training step
        mean, var = h1.mean((0, 2, 3), keepdim=True), h1.var((0, 2, 3), unbiased=False, keepdim=True)
        a1 = torch.relu((h1 - mean) / torch.sqrt(var + bn1.eps) * bn1.weight.view(1, -1, 1, 1) + bn1.bias.view(1, -1, 1, 1))
        h2 = conv2(a1)  # dropout in eval mode: identity
        assert torch.allclose(bn2.running_mean, h2.mean((0, 2, 3)), atol=1e-5)
        assert torch.allclose(bn2.running_var, h2.var((0, 2, 3), unbiased=True), rtol=1e-5)


def test_recalibration_restores_momentum_and_modes_and_leaves_the_weights() -> None:
    net = two_layer_net()
    net.eval()
    weights = {k: v.clone() for k, v in net.state_dict().items() if "running" not in k and "num_batches" not in k}
    recalibrate_batchnorm(net, lambda: net(torch.randn(8, 3, 6, 6)))
    assert all(layer.momentum == 0.1 and not layer.training for layer in batchnorm_layers(net))
    assert not net[3].training  # the dropout stayed in eval mode during the pass and after
    assert all(torch.equal(net.state_dict()[k], v) for k, v in weights.items())


def test_a_layer_without_running_statistics_is_left_alone() -> None:
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False))
    assert batchnorm_layers(net) == []
    recalibrate_batchnorm(net, lambda: net(torch.randn(4, 3, 5, 5)))
