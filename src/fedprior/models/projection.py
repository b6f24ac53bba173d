"""The non-linear projection head of the MFCL paper's Table 6 (Appendix C.3), after SimCLR (Chen et al., 2020).

    Dense -> BN, ReLU -> Dense -> BN, ReLU -> Dense -> BN

MFCL puts it on top of the server's discriminator; the contrastive loss is computed on
its output and the paper's linear evaluation reads its output too ("one linear Dense
layer is used on top of the projection layers", Sec. 3). The self-supervised baselines
use the same head on their backbones, so all are scored alike. The paper gives no
widths: ``hidden_dim`` defaults to the input's, ``out_dim`` to SimCLR's 128.
"""

from __future__ import annotations

from torch import nn


class ProjectionHead(nn.Sequential):
    def __init__(self, in_dim: int, out_dim: int = 128, hidden_dim: int | None = None) -> None:
        hidden = hidden_dim or in_dim
        super().__init__(
            nn.Linear(in_dim, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_dim),
            nn.BatchNorm1d(out_dim),
        )
        self.out_dim = out_dim
