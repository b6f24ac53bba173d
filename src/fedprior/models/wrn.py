"""Wide ResNet (Zagoruyko & Komodakis, 2016), WRN-28-2 by default: FedDB's network (the FedDB
paper, "Estimating before Debiasing: A Bayesian Approach to Detaching Prior Bias in Federated Semi-Supervised Learning", Sec. 5.1).

The pre-activation form FixMatch and the FedDB authors' code (github.com/GuogangZhu/FedDB,
``src/models/wresnet.py``, SemiFL-based) use: a 3x3 stem with 16 channels, three groups
of ``n = (depth - 4) / 6`` basic blocks with ``16k, 32k, 64k`` channels (``k`` the widen
factor; strides 1, 2, 2), a final norm + ReLU, global average pooling and a linear head.
WRN-28-2 has 4 blocks per group, 128 features and about 1.47M parameters on 3x32x32
CIFAR-10. The code's initialization: Kaiming-normal (fan_out) convolutions, norm
weights 1 and biases 0, linear biases 0. No dropout (the code's drop_rate is 0).

``norm`` (:func:`fedprior.models.norm.norm2d`): ``bn-batch``, BatchNorm without running
statistics, is the authors' code (``track_running_stats=False``: batch statistics at
test time too); ``bn`` is the usual BatchNorm; ``gn`` is FedRGD's GroupNorm.

It splits into ``embed`` (images -> (N, feature_dim)) and ``head`` like every
classifier in fedprior.
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.models.norm import norm2d


class WideBasicBlock(nn.Module):
    """Pre-activation block: norm-ReLU-conv3x3-norm-ReLU-conv3x3, plus the (1x1-projected when shapes change) input."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, norm: str) -> None:
        super().__init__()
        self.norm1 = norm2d(norm, in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.norm2 = norm2d(norm, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.equal = in_channels == out_channels and stride == 1
        self.shortcut: nn.Module = nn.Identity() if self.equal else nn.Conv2d(in_channels, out_channels, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = torch.relu(self.norm1(x))
        out = self.conv2(torch.relu(self.norm2(self.conv1(activated))))
        # As in the code: an identity shortcut adds the raw input, a projection sees the activated one.
        return out + (x if self.equal else self.shortcut(activated))


class WideResNet(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, depth: int = 28, widen: int = 2, norm: str = "bn-batch") -> None:
        super().__init__()
        if (depth - 4) % 6:
            raise ValueError(f"WRN depth must be 6n + 4 (e.g. 28), got {depth}")
        blocks_per_group = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        layers: list[nn.Module] = [nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)]
        for group, stride in enumerate((1, 2, 2)):
            for i in range(blocks_per_group):
                layers.append(WideBasicBlock(widths[group] if i == 0 else widths[group + 1], widths[group + 1], stride if i == 0 else 1, norm))
        layers += [norm2d(norm, widths[-1]), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.body = nn.Sequential(*layers)
        self.feature_dim = widths[-1]
        self.head: nn.Module = nn.Linear(widths[-1], num_classes) if num_classes > 0 else nn.Identity()
        self._initialize()

    def _initialize(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, (nn.BatchNorm2d, nn.GroupNorm)) and module.affine:
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Images (N, C, H, W) -> features (N, feature_dim)."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))
