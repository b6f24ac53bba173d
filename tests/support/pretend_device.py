"""A pretend accelerator for tests without one: tensors on "the device" hold real CPU numbers.

``PretendDevice()`` is a context in which torch's ``meta`` device behaves like an
accelerator that computes: a tensor sent there (``.to(device)``, a factory with
``device=``, a module's ``.to``) is an :class:`OnDevice` wrapper that reports
``device == meta`` and carries a real CPU tensor, so code runs to the end and gives
the numbers it gives on the CPU. Inside the context:

- an operation mixing device tensors with CPU tensors (0-dim CPU tensors aside, and
  the cross-device copies) raises, as CUDA does ("Expected all tensors to be on the
  same device");
- a random draw on the device from a CPU ``torch.Generator`` raises, as CUDA does;
  ``torch.Generator(device=<the device>)`` gives a :class:`PretendGenerator` (a CPU
  generator that reports the device), which draws there;
- ``.numpy()`` of a device tensor raises, as for a CUDA tensor;
- every convolution and matrix product is recorded with the device it ran on
  (``compute``), and every module called with its parameters' and buffers' devices
  (``modules``);
- every operation that makes the host wait for the device (``syncs``) is recorded with
  where it was called from: a scalar read (``.item()``, ``float()``, ``bool()``: aten's
  ``_local_scalar_dense``), ``nonzero`` and the operations that call it on a GPU
  (boolean-mask indexing, ``masked_select``, ``unique``, ``repeat_interleave`` without
  ``output_size``, ``bincount``), a copy from the device to the host, and a blocking copy
  from the host to the device (what ``.to(device)`` of a CPU tensor is unless
  ``non_blocking=True``; kornia's parameters drawn on the CPU arrive so).

Concurrent client updates (``run.concurrent_clients``) run inside it too: the runtime's lanes
take the caller's torch modes (``fedprior.runtime.concurrent``), and what a call notes for
its own dispatch (a PretendGenerator in use) is kept per thread.

So an algorithm that ignores the ``device`` it was given runs its convolutions on
the CPU (recorded as such), and one that forgets to move something fails as it
would on a GPU. (The meta device is the label because torch never computes on it
and no code special-cases it the way it does ``cuda``; real meta tensors, which hold
no numbers, never appear inside the context.)
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import fedprior

DEVICE = torch.device("meta")

COMPUTE = {
    "aten::convolution",
    "aten::convolution_backward",
    "aten::_convolution",
    "aten::mkldnn_convolution",
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::mv",
    "aten::addmv",
    "aten::dot",
    "aten::_scaled_dot_product_attention_math",
}
"""The operations whose device decides where the work runs (the convolution and matrix-product families)."""

CPU_BY_DESIGN = {
    ("algorithms/engines/supervised.py", "init"),
    ("algorithms/fedetf.py", "simplex_etf"),
    ("algorithms/fedbm.py", "condition_distribution"),
    ("models/decomposed.py", "decompose"),
    ("algorithms/pieces/tensors.py", "weighted_mean"),
    ("algorithms/pieces/dma.py", "uniform_distance"),
    ("algorithms/pieces/dma.py", "algorithm2"),
}
"""(file, function) of fedprior allowed to compute on the CPU whatever the device, each by design:

- round 0's model, built on the CPU so that every device starts from the same weights
  (``GlobalModel.init``); FedETF's fixed classifier and FedBM's class-conditional
  distributions, made once the same way when the algorithm is built; FedMatch's sigma + psi
  split of a model freshly built on the CPU (torch's parametrize calls the new module once);
- the server's example-weighted mean of the client models where the replies are host tensors
  (it runs where they are; docs/runtime.md) and FedDB's DMA weights over the clients' K-class APP-U vectors
  (server side, small and overhead-bound).

A convolution or product under any other call on CPU tensors counts as "ran on the CPU".
"""

CROSS_DEVICE = {"aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::set_", "aten::lift_fresh"}
"""Operations allowed to take tensors from both devices (copies between them)."""

SYNCING = {
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::masked_select",
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_dim",
    "aten::unique_consecutive",
    "aten::bincount",
}
"""Operations on device tensors that wait for the device (a scalar read, or an output size that depends on the data)."""

INDEXING = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}
"""Operations whose ``indices`` may stay on the CPU (CUDA moves them)."""


class OnDevice(torch.Tensor):
    """A tensor on the pretend device: reports ``DEVICE``, holds the CPU tensor ``elem``."""

    elem: torch.Tensor
    __slots__ = ("elem",)

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> OnDevice:
        assert type(elem) is torch.Tensor and elem.device.type == "cpu", (type(elem), elem.device)
        with torch.inference_mode(elem.is_inference()):  # a view of a normal tensor made in inference mode is normal
            wrapper = torch.Tensor._make_wrapper_subclass(
                cls,
                elem.size(),
                strides=elem.stride(),
                storage_offset=elem.storage_offset(),
                dtype=elem.dtype,
                layout=elem.layout,
                device=DEVICE,
                requires_grad=False,
            )
        wrapper.elem = elem
        return wrapper

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"a pretend-device tensor reached {func} outside PretendDevice()")

    def __repr__(self) -> str:  # type: ignore[override]
        return f"OnDevice({self.elem!r})"

    def numpy(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise TypeError("can't convert a device tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self.numpy()

    def tolist(self) -> Any:  # type: ignore[override]
        for record in ACTIVE:
            record.syncs.append(f"tolist <- {fedprior_caller(fedprior_frames())}")
        return self.elem.tolist()  # a copy to the host, as for a CUDA tensor


ACTIVE: list[Record] = []
"""The records of the PretendDevice() contexts now open (``tolist`` bypasses the dispatcher)."""


REAL_GENERATOR = torch.Generator


class PretendGenerator(REAL_GENERATOR):
    """A generator on the pretend device: a CPU generator (the numbers are the CPU's) whose ``device`` is the device."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return DEVICE


class _GeneratorType(type):
    """``torch.Generator`` inside PretendDevice(): makes a PretendGenerator for the device, a real generator otherwise."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, REAL_GENERATOR)

    def __call__(cls, device: Any = None) -> torch.Generator:
        if device is not None and is_device(device):
            return PretendGenerator()
        return REAL_GENERATOR() if device is None else REAL_GENERATOR(device)


class Generator(metaclass=_GeneratorType):
    pass


@dataclass
class Record:
    compute: list[tuple[str, str]] = field(default_factory=list)
    """(operation, 'device', 'cpu' or 'cpu by design') for every convolution and matrix product."""
    modules: list[tuple[str, set[str]]] = field(default_factory=list)
    """(module class, devices of its parameters and buffers) for every module call (not those by design)."""
    cpu_calls: list[str] = field(default_factory=list)
    """Where the first convolutions and products on the CPU were called from (fedprior's frames)."""
    module_calls: list[str] = field(default_factory=list)
    """Where the first modules with weights off the device were called from."""
    syncs: list[str] = field(default_factory=list)
    """One entry per host sync: ``operation <- fedprior caller`` (see the module docstring)."""

    def sync_count(self) -> int:
        return len(self.syncs)

    def ran_on_the_cpu(self) -> list[str]:
        """The convolution and product operations that ran on the CPU (and, after them, where the first were called)."""
        ops = sorted({op for op, where in self.compute if where == "cpu"})
        return [*ops, *self.cpu_calls] if ops else []

    def modules_off_the_device(self) -> list[str]:
        """The module classes called with a parameter or buffer off the device (and, after them, where the first were called)."""
        names = sorted({name for name, devices in self.modules if devices - {"device"}})
        return [*names, *self.module_calls] if names else []


Frame = tuple[str, str, int]
"""(file relative to the fedprior package, function, line) of a frame."""

PACKAGE = os.path.dirname(os.path.abspath(fedprior.__file__)) + os.sep
"""The folder of the fedprior package: a frame is fedprior's own when its file lies under it (not when its path merely
contains "/fedprior/", as every file does in a checkout named fedprior, the virtual environment's torch included)."""


def fedprior_frames() -> list[Frame]:
    """The calling frames in fedprior's own files, innermost first (no source read: this runs per operation)."""
    frames: list[Frame] = []
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(PACKAGE):
            frames.append((filename[len(PACKAGE) :], frame.f_code.co_name, frame.f_lineno))
        frame = frame.f_back
    return frames


def by_design(frames: list[Frame]) -> bool:
    return any((file, function) in CPU_BY_DESIGN for file, function, _ in frames)


def fedprior_caller(frames: list[Frame]) -> str:
    """The innermost fedprior frames, innermost first (file:line function <- ...)."""
    return " <- ".join(f"{file}:{line} {function}" for file, function, line in frames[:4])


def where(t: torch.Tensor) -> str:
    if isinstance(t, OnDevice):
        return "device"
    if t.device.type == "meta":
        raise AssertionError("a real meta tensor (no numbers) inside PretendDevice(): something was built on 'meta' outside the context")
    return t.device.type


def unwrap(x: Any) -> Any:
    return x.elem if isinstance(x, OnDevice) else x


def is_device(d: Any) -> bool:
    return d is not None and torch.device(d) == DEVICE


def tensors_in(values: Any) -> list[torch.Tensor]:
    """The tensors among an operation's arguments (an argument may be a list of tensors)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def unwrapped(value: Any) -> Any:
    if isinstance(value, OnDevice):
        return value.elem
    if isinstance(value, (list, tuple)):
        return type(value)(unwrapped(v) for v in value)
    return value


def wrapped(value: Any) -> Any:
    if type(value) is torch.Tensor:
        return OnDevice(value)
    if isinstance(value, (list, tuple)):
        return type(value)(wrapped(v) for v in value)
    return value


WRITES: dict[Any, list[tuple[int, int, str]]] = {}
"""Per operation: (return index, argument index, argument name) of each result that is a written argument."""


def writes(func: Any) -> list[tuple[int, int, str]]:
    if func not in WRITES:
        schema = func._schema
        WRITES[func] = [
            (i, k, a.name)
            for i, ret in enumerate(schema.returns)
            if ret.alias_info is not None and ret.alias_info.is_write
            for k, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.before_set == ret.alias_info.before_set
        ]
    return WRITES[func]


def copy_kind(source: str, target: str, non_blocking: bool | None) -> str | None:
    """A copy device -> host (always a sync), host -> device unless non-blocking, or None."""
    if source == "device" and target == "cpu":
        return "copy device -> host"
    if source == "cpu" and target == "device" and not non_blocking:
        return "blocking copy host -> device"
    return None


class Dispatch(TorchDispatchMode):
    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record
        self._calls = threading.local()  # per thread: concurrent client updates (run.concurrent_clients) share the mode

    @property
    def pretend_generator(self) -> bool:
        """Set by :class:`Functions` while a call with a PretendGenerator runs in this thread (the dispatcher hands over a plain generator)."""
        return getattr(self._calls, "pretend_generator", False)

    @pretend_generator.setter
    def pretend_generator(self, value: bool) -> None:
        self._calls.pretend_generator = value

    @staticmethod
    def sync_kind(name: str, args: tuple, kwargs: dict, on_device: bool) -> str | None:
        """What makes this operation a host sync on a GPU, or None (see the module docstring)."""
        if name == "aten::_to_copy":
            source = where(args[0])
            target = source if kwargs.get("device") is None else "device" if is_device(kwargs["device"]) else "cpu"
            return copy_kind(source, target, kwargs.get("non_blocking", False))
        if name == "aten::copy_":
            non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            return copy_kind(where(args[1]), where(args[0]), non_blocking)
        if not on_device:
            return None
        if name in SYNCING:
            return name
        if name == "aten::repeat_interleave" and kwargs.get("output_size") is None and (len(args) < 4 or args[3] is None):
            return name
        if name in INDEXING and len(args) > 1:
            indices = [i for i in (args[1] or []) if isinstance(i, torch.Tensor)]
            if any(i.dtype in (torch.bool, torch.uint8) for i in indices):
                return f"{name} with a boolean mask"
        return None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = func._schema.name
        tensors = tensors_in([*args, *kwargs.values()])
        on_device = any([where(t) == "device" for t in tensors])
        if on_device and name not in CROSS_DEVICE:
            checked = tensors_in([args[0], *args[2:], *kwargs.values()]) if name in INDEXING else tensors  # the indices may stay on the CPU
            strays = [t for t in checked if not isinstance(t, OnDevice) and t.dim() > 0]
            if strays:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found a CPU tensor of shape {tuple(strays[0].shape)} in {func} (pretend device)"
                )
        sync = self.sync_kind(name, args, kwargs, on_device)
        if sync is not None:
            self.record.syncs.append(f"{sync} <- {fedprior_caller(fedprior_frames())}")
        if name in COMPUTE:
            if on_device:
                self.record.compute.append((name, "device"))
            else:
                frames = fedprior_frames()
                allowed = by_design(frames)
                self.record.compute.append((name, "cpu by design" if allowed else "cpu"))
                if not allowed and len(self.record.cpu_calls) < 5:
                    self.record.cpu_calls.append(f"{name} from {fedprior_caller(frames)}")
        to_device = on_device
        if "device" in kwargs:
            to_device = is_device(kwargs["device"])
            if to_device:
                kwargs["device"] = torch.device("cpu")
        generator = kwargs.get("generator")
        if to_device and generator is not None and generator.device.type == "cpu" and not self.pretend_generator:
            raise RuntimeError(f"Expected a 'cuda' device type for generator but found 'cpu' in {func} (pretend device)")
        out = func(*unwrapped(args), **{k: unwrapped(v) for k, v in kwargs.items()})
        if to_device:
            out = wrapped(out)
        for i, k, arg in writes(func):  # in-place and out= results are the caller's own tensors
            value = args[k] if k < len(args) else kwargs[arg]
            out = (*out[:i], value, *out[i + 1 :]) if isinstance(out, tuple) else value
        return out


class Functions(TorchFunctionMode):
    """``torch.tensor(..., device=meta)`` and kin skip the dispatcher for meta: build on the CPU, then move."""

    MAKERS = (torch.tensor, torch.as_tensor, torch.asarray, torch.scalar_tensor)

    def __init__(self, dispatch: Dispatch) -> None:
        super().__init__()
        self.dispatch = dispatch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if isinstance(kwargs.get("generator"), PretendGenerator):
            self.dispatch.pretend_generator = True
            try:
                return func(*args, **kwargs)
            finally:
                self.dispatch.pretend_generator = False
        if func in self.MAKERS and is_device(kwargs.get("device")):
            if func is torch.as_tensor and args and isinstance(args[0], OnDevice):
                return args[0].to(dtype=kwargs.get("dtype"))  # already there: no copy, as on a GPU
            kwargs["device"] = torch.device("cpu")
            return func(*args, **kwargs).to(DEVICE)
        return func(*args, **kwargs)


@contextmanager
def PretendDevice() -> Iterator[Record]:  # noqa: N802 (used like a class)
    """Inside: ``torch.device('meta')`` computes like an accelerator; yields the record of where work ran."""
    record = Record()

    def module_devices(module: torch.nn.Module, inputs: Any) -> None:
        held = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        if held:
            devices = {where(t) for t in held}
            if devices - {"device"}:
                frames = fedprior_frames()
                if by_design(frames):
                    return
                if len(record.module_calls) < 5:
                    record.module_calls.append(f"{type(module).__name__} with weights on {sorted(devices)} from {fedprior_caller(frames)}")
            record.modules.append((type(module).__name__, devices))

    with ExitStack() as stack:
        handle = torch.nn.modules.module.register_module_forward_pre_hook(module_devices)
        stack.callback(handle.remove)
        torch.Generator = Generator  # type: ignore[misc]
        stack.callback(setattr, torch, "Generator", REAL_GENERATOR)
        dispatch = Dispatch(record)
        stack.enter_context(Functions(dispatch))
        stack.enter_context(dispatch)
        ACTIVE.append(record)
        stack.callback(ACTIVE.remove, record)
        # load_state_dict warns that copying into a meta parameter is a no-op; here a "meta" tensor holds
        # real numbers and the copy happens (torch copies after warning), so the warning is only noise.
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message=r"for .*: copying from a non-meta parameter in the checkpoint to a meta parameter")
        yield record
