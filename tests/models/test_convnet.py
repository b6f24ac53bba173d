"""The small ConvNet with each of its normalizations."""

import pytest
import torch

from fedprior.models.convnet import ConvNet
from fedprior.models.norm import NORMS, norm2d


@pytest.mark.parametrize("norm", NORMS)
def test_convnet_and_its_normalizations(norm):
    net = ConvNet(1, 10, width=8, norm=norm)
    assert net(torch.randn(4, 1, 28, 28)).shape == (4, 10) and net.feature_dim == 32
    layer = norm2d(norm, 8)
    if norm == "bn-batch":  # no running statistics: eval mode still normalizes with the batch's own
        x = 3 + 2 * torch.randn(16, 8, 4, 4)
        out = layer.eval()(x)
        assert out.mean().abs() < 1e-5 and layer.running_mean is None
    with pytest.raises(ValueError, match="accepted"):
        norm2d("nope", 8)
