"""FLOPs of real work and the device's peak rate, so that "fast" is a ratio (``benchmarks/paper_scale.py``).

:class:`FlopTally` counts the floating-point operations of whatever runs inside it with
``torch.utils.flop_counter.FlopCounterMode``: each matrix product and convolution (forward
and backward) at the dispatcher, whatever code issued it and in whatever dtype, 2 FLOPs a
multiply-add (a Conv2d forward is 2 * Cin * Cout * k * k * H_out * W_out * N). Elementwise
ops, normalization, pooling, softmax and the optimizer's update are not counted: on a
convolutional network they are a few percent of the work and do not run on the tensor
cores that the peak rate describes.

:func:`peak_tflops` gives the dense peak of a known accelerator for a precision (vendors'
data-sheet figures, without sparsity), or None where none is known (the CPU): a ratio to
peak is then not reported.
"""

from __future__ import annotations

from types import TracebackType

import torch
from torch.utils.flop_counter import FlopCounterMode

PEAK_TFLOPS: dict[str, dict[str, float]] = {
    # NVIDIA data sheets, SXM, dense (no 2:4 sparsity). fp32 is the non-tensor-core rate; cuDNN convolutions run in TF32 by
    # default (torch.backends.cudnn.allow_tf32), whose dense peak is ~495 TFLOP/s on H100/H200, so an fp32 ratio can pass 1.
    "H100": {"bf16": 989.0, "fp32": 67.0},
    "H200": {"bf16": 989.0, "fp32": 67.0},
    "A100": {"bf16": 312.0, "fp32": 19.5},
}
"""Dense peak TFLOP/s by a substring of the CUDA device's name, per ``run.precision``."""


def device_name(device: torch.device) -> str:
    """The accelerator's name (``torch.cuda.get_device_name``), or ``cpu``."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def peak_tflops(device: torch.device, precision: str) -> float | None:
    """The dense peak TFLOP/s of ``device`` at ``precision`` ('fp32' or 'bf16'); None for the CPU or an unknown GPU."""
    if device.type != "cuda":
        return None
    name = device_name(device)
    for key, peaks in PEAK_TFLOPS.items():
        if key in name:
            return peaks[precision]
    return None


class _NoModules:
    """Stands in for FlopCounterMode's module tracker: every count goes to ``Global``, and no autograd hook is installed."""

    parents = ("Global",)

    def __enter__(self) -> _NoModules:
        return self

    def __exit__(self, *args: object) -> None:
        return None


class FlopTally:
    """A context that counts the FLOPs run inside it; ``total()`` reads the count so far (mark, run, subtract).

    ``by_module`` (the default) attributes the counts to modules, through FlopCounterMode's module tracker, whose
    backward hooks torch refuses inside ``torch.autograd.grad`` (FedMatch's disjoint learning computes its gradients so);
    ``by_module=False`` counts the same total without it.
    """

    def __init__(self, by_module: bool = True) -> None:
        self.mode = FlopCounterMode(display=False)
        if not by_module:
            self.mode.mod_tracker = _NoModules()  # type: ignore[assignment]  # the tracker's parents and context protocol only

    def __enter__(self) -> FlopTally:
        self.mode.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        self.mode.__exit__(kind, value, traceback)

    def total(self) -> int:
        return int(self.mode.get_total_flops())

    def by_module(self) -> dict[str, int]:
        """FLOPs per module (fully qualified names, ``Global`` for all), as FlopCounterMode attributes them."""
        return {name: int(sum(ops.values())) for name, ops in self.mode.get_flop_counts().items()}
