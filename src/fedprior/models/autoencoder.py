"""MFCL's sensor module: the convolutional autoencoder of the MFCL paper's Table 5 (Appendix C.3).

    1  Conv2D(C, w, 3, 1, 1)            encoder
    2  Norm, ReLU, MaxPool2D(2, 2)
    3  Conv2D(w, w, 3, 1, 1)
    4  Norm, ReLU                       -> the representation z = f(x), (w, H/2, W/2)
    5  Conv2DTranspose(w, w, 3, 2, 1)   decoder
    6  Norm, ReLU
    7  Conv2DTranspose(w, C, 3, 1, 1)
    8  Norm, ReLU
    9  Conv2D(C, C, 3, 1, 1)            -> reconstruction logits (binary cross-entropy on [0, 1] pixels)

``w`` is 64 in the paper. A norm layer follows every convolution but the last (Sec. 2.1,
"inserted right after each Conv2D and each Conv2DTranspose, except for the last layer of
the decoder"); ``norm`` is ``pn`` (the paper's), ``gn``, ``bn`` or ``none``
(:func:`fedprior.models.norm.norm2d`). One departure: Table 5 prints layer 5 with
stride 1, which would leave the reconstruction at half the input's side after the max
pool; layer 5 here has stride 2 (sized to the input with ``output_size``), so the
decoder undoes the pooling and the reconstruction matches the input.

Groups: PN and GN group ``group_channels`` channels (Lambda, Sec. 2.2) in every layer, so
the ``w``-channel layers 2, 4 and 6 have w / Lambda groups (``w`` must be a multiple of
Lambda). Layer 8 has the image's channels (1 or 3), which a Lambda of 2 or more need not
divide (Table 5's 3 channels accept no group of 2): there Lambda is used if it divides
them, otherwise the layer's channels form one group (Lambda <= C, as Sec. 2.2 requires).

With PN, a training batch is view-major pairs ``[view 1 of K samples; view 2 of the same
K]``; single images are encoded under ``peer_views(model, 1)`` (see :meth:`encode`).
"""

from __future__ import annotations

import torch
from torch import nn

from fedprior.models.norm import norm2d
from fedprior.models.peer_norm import peer_views


class SensorModule(nn.Module):
    """Table 5's autoencoder: ``encoder`` (images -> representations) and ``decoder`` (-> reconstruction logits).

    ``group_channels`` is Lambda of PN and GN (ignored by ``bn`` and ``none``).
    """

    def __init__(self, in_channels: int, width: int = 64, norm: str = "pn", group_channels: int = 2) -> None:
        super().__init__()
        self.in_channels, self.width = in_channels, width
        image_group = group_channels if in_channels % group_channels == 0 else in_channels  # layer 8: see the module docstring
        self.encoder = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, 1, 1),
            norm2d(norm, width, group_channels=group_channels),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(width, width, 3, 1, 1),
            norm2d(norm, width, group_channels=group_channels),
            nn.ReLU(),
        )
        self.up = nn.ConvTranspose2d(width, width, 3, 2, 1)
        self.decoder = nn.Sequential(
            norm2d(norm, width, group_channels=group_channels),
            nn.ReLU(),
            nn.ConvTranspose2d(width, in_channels, 3, 1, 1),
            norm2d(norm, in_channels, group_channels=image_group),
            nn.ReLU(),
            nn.Conv2d(in_channels, in_channels, 3, 1, 1),
        )

    def representation_shape(self, image_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """Shape of z for one image of ``image_shape`` (C, H, W): (width, H // 2, W // 2)."""
        return (self.width, image_shape[1] // 2, image_shape[2] // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Reconstruction logits of ``x`` (same shape as ``x``); a PN batch is view-major pairs."""
        z = self.encoder(x)
        return self.decoder(self.up(z, output_size=list(x.shape[-2:])))

    def encode(self, x: torch.Tensor, views: int = 2) -> torch.Tensor:
        """z = f(x) for a batch of ``views`` views per sample (PN pools over them; other norms ignore it)."""
        with peer_views(self.encoder, views):
            return self.encoder(x)
