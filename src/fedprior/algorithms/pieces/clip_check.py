"""The server's check of client-side clipping (``privacy.dp = 'client'``): no reply may move the model by more than C.

DP-FedAvg's sensitivity argument (McMahan et al., "Learning Differentially Private Recurrent Language Models",
ICLR 2018, Sec. 2 and Algorithm 1) needs every summed update within C. With client-side clipping a client that
skips the clip (a bug, or an attacker who sends whatever it wants) would move the sum by its whole update, so the
server recomputes each reply's update norm ||w_k - w_t|| (:func:`fedprior.algorithms.pieces.differential_privacy.flat_norm`)
and handles a reply above C beyond the float tolerance of an honest clip (:func:`norm_tolerance`):

- ``'clip'`` (default, ``privacy.overnorm``): the server clips it to C itself (FlatClip, as with ``dp = 'server'``);
- ``'drop'``: the reply is left out of the sum (the denominator stays m, so the sensitivity stays C / m).

Either way the round counts it (``dp_overnorm_replies``). The bit b_k = 1[||Delta_k|| <= C] a client sends for adaptive
clipping (Andrew et al., "Differentially Private Learning with Adaptive Clipping", NeurIPS 2021, Algorithm 1) is
checked against the norm too (:func:`checked_bit`): a missing bit, a value other than 0 or 1 (which would move the
count by more than the sensitivity 1 the accounting assumes), or one the norm contradicts is replaced by the bit the
norm implies, and counted (``dp_corrected_bits``).

What the check cannot see: a reply within C is accepted whatever it is (a malicious client may still send any update
of norm <= C: DP bounds its influence, it does not detect it); and under SecAgg+ the server sees only the sum of the
replies, so it checks none (``dp_checked_replies`` = 0; docs/privacy-robustness.md, "Threat model").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Overnorm = Literal["clip", "drop"]


def norm_tolerance(clip_norm: float, model_norm: float, dtype: torch.dtype = torch.float32) -> float:
    """How far above C the norm of an honestly clipped update may come out when the server recomputes it: 4 eps (C + ||w_k||).

    An honest client scales its update to norm C in its arrays' precision (eps = ``torch.finfo(dtype).eps``, 2^-23 for
    float32), adds it to w_t and rounds the sum w_k to that precision; the server subtracts w_t again. Each of those
    roundings moves a coordinate by at most eps / 2 of its magnitude, so the recomputed norm lies within about
    eps (C + ||w_k||) of C (the rounding of w_k's coordinates dominates where the model is large against C). Twice
    that is the tolerance: no honest float32 clip is ever above it, and it lets through at most 4.8e-7 (C + ||w_k||)
    more than C (server-side clipping's own result, stored in float32, has the same slack).
    """
    eps = torch.finfo(dtype).eps
    return 4 * eps * (clip_norm + model_norm)


def reply_dtype(arrays: dict[str, torch.Tensor]) -> torch.dtype:
    """The coarsest floating dtype of a reply's arrays (the one whose rounding bounds the check's tolerance)."""
    floats = [v.dtype for v in arrays.values() if v.is_floating_point()]
    return max(floats, key=lambda d: torch.finfo(d).eps, default=torch.float32)


def checked_bit(sent: object, norm: float, clip_norm: float, tolerance: float) -> tuple[float, bool]:
    """(the bit the server counts, whether it differs from the one sent) for a reply whose update has ``norm``.

    A clipped update's norm tells the bit where it is not C: below C - tolerance the update was within C (b = 1);
    above C + tolerance it was not (b = 0; the reply is over the norm anyway). At C itself both are honest, and the
    client's bit is kept if it is 0 or 1. A missing or non-binary bit there counts as 0 (clipped).
    """
    valid = isinstance(sent, int | float) and not isinstance(sent, bool) and float(sent) in (0.0, 1.0)
    if norm < clip_norm - tolerance:
        implied = 1.0
    elif norm > clip_norm + tolerance:
        implied = 0.0
    else:
        implied = float(sent) if valid else 0.0  # type: ignore[arg-type]
    return implied, not valid or float(sent) != implied  # type: ignore[arg-type]


@dataclass(frozen=True)
class ReplyCheck:
    """What the server found in one reply: its update's norm, whether it is above C beyond tolerance, the bit it counts."""

    norm: float
    overnorm: bool
    bit: float
    bit_corrected: bool


def check_reply(update_norm: float, model_norm: float, dtype: torch.dtype, clip_norm: float, sent_bit: object) -> ReplyCheck:
    """The server's verdict on one reply of a client that was to clip its update to ``clip_norm`` (the module docstring)."""
    tolerance = norm_tolerance(clip_norm, model_norm, dtype)
    bit, corrected = checked_bit(sent_bit, update_norm, clip_norm, tolerance)
    return ReplyCheck(update_norm, update_norm > clip_norm + tolerance, bit, corrected)
