"""``run.device`` and ``run.deterministic``: where tensors live and how reproducible the kernels are.

``run.device`` is ``auto`` (CUDA when this machine has it, else the CPU), ``cpu``,
``cuda`` or ``cuda:N``. It is resolved once, before any data is loaded, so asking for
CUDA where there is none is a one-line :class:`ConfigError`, not a failure mid-run.
Algorithms receive the resolved :class:`torch.device` (the runtime-provided ``device``
keyword of their factory): they move the model and a client's data there once per
update (or keep them there: ``experiments/resident.py``, ``GlobalModel.receive``) and hand
back CPU tensors or, where the algorithm aggregates on the device, tensors on the device;
what crosses to Flower, a worker pipe, a checkpoint or the run's result is copied to the
host first, so it never depends on the device.

``run.deterministic`` asks torch for deterministic kernels
(``torch.use_deterministic_algorithms``, cuDNN's deterministic mode, no cuDNN
benchmarking, and cuBLAS's fixed workspace). On the CPU fedprior's numbers are
already reproducible for a given thread count; on CUDA some kernels (atomic adds in
backward passes, cuDNN's algorithm search) are not, and this switch trades speed for
bit-for-bit repeatability on the same GPU model and software. ``run.cudnn_benchmark`` says whether cuDNN autotunes its convolution algorithms
(``torch.backends.cudnn.benchmark``; CUDA only, the CPU ignores it): it times every
algorithm for each new input shape and keeps the fastest. That pays where shapes repeat
(mini-batches of one size) and costs where they do not: FedDB's full-batch client steps
bring new shapes with every client and, as the confident subset changes, every round; on
an H200 a FedDB round with new shapes took 16-22 s with autotuning and 1.7-3.0 s without
(2026-11-28, docs/runtime.md). ``auto`` (the default) autotunes only algorithms whose
batch shapes are fixed (``Algorithm.batch_shapes``); ``on`` and ``off`` decide for every
algorithm; ``run.deterministic`` turns it off (autotuning may pick other algorithms in
another run, changing the last bits).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from fedprior.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICE_PATTERN = r"^(auto|cpu|cuda(:[0-9]+)?)$"
ACCEPTED = "auto, cpu, cuda, cuda:N"


def check_device_syntax(spec: str) -> None:
    """ValueError unless ``spec`` is one of the accepted forms (the config's check, before CUDA is asked)."""
    if not re.match(DEVICE_PATTERN, spec):
        raise ValueError(f"unknown device '{spec}'; accepted: {ACCEPTED}")


def resolve_device(spec: str) -> torch.device:
    """The torch device ``run.device`` names on this machine; ConfigError if it names CUDA and there is none."""
    try:
        check_device_syntax(spec)
    except ValueError as error:
        raise ConfigError(f"run.device: {error}") from None
    import torch  # here, not above: the config's check (check_device_syntax) runs without torch

    cpu = torch.device("cpu")
    if spec == "cpu":
        return cpu
    available = torch.cuda.is_available()
    if spec == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if available else cpu
    if not available:
        raise ConfigError(
            f"run.device: '{spec}' asks for CUDA, but this machine has no usable CUDA device "
            "(a CPU-only torch build or no GPU driver); accepted here: auto, cpu"
        )
    index = int(spec.split(":")[1]) if ":" in spec else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(f"run.device: '{spec}' but this machine has {count} CUDA device(s); accepted: auto, cpu, cuda, cuda:0..cuda:{count - 1}")
    return torch.device("cuda", index)


def set_deterministic(enabled: bool) -> None:
    """Deterministic kernels on (or back to torch's defaults): see the module docstring.

    cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` when CUDA starts, so this must run before
    anything touches the GPU (``build_experiment`` calls it first thing).
    """
    import torch

    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if enabled != torch.are_deterministic_algorithms_enabled():  # the call imports torch._inductor: seconds
        torch.use_deterministic_algorithms(enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = False  # until the algorithm is known: cudnn_autotune


def cudnn_autotune(setting: str, deterministic: bool, batch_shapes: str) -> bool:
    """Whether cuDNN autotunes (``torch.backends.cudnn.benchmark``, set here; see the module docstring).

    ``setting`` is ``run.cudnn_benchmark`` (``auto``, ``on``, ``off``); ``batch_shapes`` the
    algorithm's (``fixed`` or ``varying``). Never with ``deterministic``.
    """
    import torch

    enabled = not deterministic and (setting == "on" or (setting == "auto" and batch_shapes == "fixed"))
    torch.backends.cudnn.benchmark = enabled
    return enabled
