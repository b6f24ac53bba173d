"""The algorithm registry: name -> factory; hyperparameters come from the factory's signature.

A factory's keyword-only parameters after ``task`` are its hyperparameters, each
annotated with its type, bounds and description (``Annotated[float, Field(gt=0,
description=...)]``). From them come the ``[algorithm]`` config fields, their
validation, and the help of ``fedprior algorithms``. What the run hands every factory
beside them (``[federation]``'s local epochs and batch size, the run's torch device,
``run.precision``, ``run.compile``) is not an algorithm field: it is one value, a
:class:`~fedprior.algorithms.base.Runtime`, built once where the factory is called
(``experiments.client_side.runtime_of``) and passed as the factory's ``runtime``:
``factory(task, runtime, *, hyperparameters...)``. Asking an algorithm for
``run.precision = 'bf16'`` or ``run.compile = true`` is a ConfigError naming those that accept it
(:meth:`AlgorithmSpec.check_runtime`), never a silent float32 or eager run, unless its factory declares it
with :func:`~fedprior.algorithms.base.runtime_options`.

A factory written before the Runtime (user code) still works: one without a ``runtime``
parameter is given the keywords of :data:`RUNTIME_PROVIDED` it declares (``device`` at least,
:func:`require_device`), and accepts ``'bf16'`` or ``compile = true`` where it declares
``precision`` or ``compile``. A shipped factory takes only the new form: one of the user's that calls it the
old way (``fedavg(task, local_epochs=..., device=..., lr=lr)``) gets a message naming the new signature and
docs/python-api.md (:func:`old_signature_call`), before any data loads. A bridge that accepted the old keywords
with a DeprecationWarning was not chosen: every shipped factory (and every decorator that binds their signatures)
would carry two calling conventions, and the fix is one line in the user's code, which the message spells out.

The shipped algorithms are imported on first use (:class:`ShippedFactory`): their modules import torch,
and a command that only reads configs (``fedprior presets show``) checks their hyperparameters against
:mod:`fedprior.algorithms.hyperparameter_snapshot` instead (:func:`hyperparameters_from_snapshot`); a
change to a shipped factory's hyperparameters is followed by
``python -m fedprior.algorithms.write_hyperparameter_snapshot`` (tests/algorithms/test_hyperparameter_snapshot.py says so).

Algorithms from outside fedprior join the registry three ways (docs/python-api.md):
:func:`register_algorithm` from user code; a module that does so, named by ``--import
MODULE`` on the command line or in ``run.imports`` (recorded in a run's config.toml, so a
resume imports it again: :func:`import_modules`); and the entry-point group
``fedprior.algorithms`` of installed packages, loaded once, the first time the registry is
used (:func:`load_entry_points`). A broken entry point is a warning naming it and is
skipped: one installed package must not stop every command; a config that asks for its
algorithm then fails with the unknown-algorithm error, which repeats why it did not load.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from fedprior.algorithms.pieces.robust_aggregation_fields import NAMES as ROBUST_OPTION_NAMES
from fedprior.errors import ConfigError, FedpriorError, UserCodeError
from fedprior.validation import CheckedModel, describe_validation_error

if TYPE_CHECKING:
    from fedprior.algorithms.base import Algorithm, Runtime, Task

RUNTIME_PROVIDED = ("local_epochs", "batch_size", "device", "precision", "compile")
"""The fields of :class:`~fedprior.algorithms.base.Runtime`, given one by one to a factory without a ``runtime`` parameter
(written before the Runtime) that declares them; never algorithm fields."""

RUNTIME_PARAMETER = "runtime"

RETIRED_FIELDS = {
    "norm_groups": (
        "algorithm.norm_groups was the number of channel groups of PN and GN; it is now algorithm.norm_group_channels, the paper's "
        "Lambda = channels per group (the MFCL paper's Sec. 2.2, Eq. 3), and a layer of C channels has C / Lambda groups. The old default of "
        "32 groups was Lambda = 2 at 64 channels but Lambda = 1 (InstanceNorm) at 16; replace norm_groups = G by norm_group_channels = "
        "width / G (default 2)"
    ),
}
"""Fields an algorithm no longer has -> what replaces them (a config or run directory that still names one fails with this)."""


class Hyperparameters(CheckedModel):
    """The base of every algorithm's hyperparameter model: unknown keys refused, numbers finite and not bool."""

    model_config = ConfigDict(extra="forbid")


class ShippedFactory:
    """A shipped algorithm's factory, imported on first use: ``"fedprior.algorithms.fedavg:fedavg"``.

    Its module imports torch; a command that only reads configs (``fedprior presets show``)
    never calls, inspects or imports it. It is called like the factory, and
    :func:`inspect.signature` and :func:`inspect.unwrap` reach the factory through
    ``__wrapped__``.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    @functools.cached_property
    def function(self) -> Callable[..., Algorithm]:
        module, name = self.path.split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def loaded(self) -> bool:
        """Whether the factory has been imported (its module is then in this process anyway)."""
        return "function" in self.__dict__

    @property
    def __wrapped__(self) -> Callable[..., Algorithm]:
        return self.function

    def __call__(self, *args: Any, **kwargs: Any) -> Algorithm:
        return self.function(*args, **kwargs)

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return ShippedFactory, (self.path,)

    def __repr__(self) -> str:
        return f"ShippedFactory({self.path!r})"


FROM_SNAPSHOT = {"on": False}
"""Set by :func:`hyperparameters_from_snapshot`: shipped algorithms not yet imported are checked against the snapshot."""


@contextlib.contextmanager
def hyperparameters_from_snapshot() -> Iterator[None]:
    """Within it, a shipped algorithm whose module is not imported yet is checked against
    :mod:`fedprior.algorithms.hyperparameter_snapshot` instead of its factory: no torch.

    For the commands that only read configs (``fedprior presets show``); a run reads the
    factory, so that a snapshot out of date (tests/algorithms/test_hyperparameter_snapshot.py catches it) never changes
    what runs.
    """
    before = FROM_SNAPSHOT["on"]
    FROM_SNAPSHOT["on"] = True
    try:
        yield
    finally:
        FROM_SNAPSHOT["on"] = before


MODELS: dict[tuple[str, bool], tuple[Callable[..., Any], type[BaseModel]]] = {}
"""The hyperparameter model of each algorithm name (and whether it came from the snapshot), with the factory it was made from."""


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    factory: Callable[..., Algorithm]
    centralized: bool = False
    """Trains on the pooled training data as one client (a centralized baseline)."""

    @property
    def summary(self) -> str:
        """The first line of the factory's docstring; a factory without one (user code) is described by its name."""
        factory = inspect.unwrap(self.factory)
        lines = (inspect.getdoc(factory) or "").strip().splitlines()
        return lines[0] if lines else f"{getattr(factory, '__qualname__', self.name)} (its factory has no docstring)"

    def hyperparameters(self) -> dict[str, inspect.Parameter]:
        params = inspect.signature(self.factory, eval_str=True).parameters
        return {n: p for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n not in (RUNTIME_PARAMETER, *RUNTIME_PROVIDED)}

    def config_model(self, from_snapshot: bool | None = None) -> type[BaseModel]:
        """A pydantic model of the hyperparameters (unknown keys rejected): from the factory's signature, or from the
        snapshot for a shipped algorithm where ``from_snapshot`` says so (unset: within :func:`hyperparameters_from_snapshot`
        and not imported yet)."""
        from fedprior.algorithms.hyperparameter_snapshot import read_snapshot, snapshot_model

        if from_snapshot is None:
            from_snapshot = FROM_SNAPSHOT["on"] and is_shipped(self) and not self.factory.loaded  # type: ignore[attr-defined]
        snapshot = bool(from_snapshot and is_shipped(self) and self.name in read_snapshot())
        cached = MODELS.get((self.name, snapshot))
        if cached is not None and cached[0] is self.factory:  # made once per factory: a sweep plans thousands of configs
            return cached[1]
        if snapshot:
            model = snapshot_model(self.name, read_snapshot()[self.name], Hyperparameters)
        else:
            fields: dict[str, Any] = {n: (p.annotation, p.default) for n, p in self.hyperparameters().items()}
            model = create_model(f"{self.name}_hyperparameters", __base__=Hyperparameters, **fields)
        MODELS[(self.name, snapshot)] = (self.factory, model)
        return model

    def validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Checked hyperparameters with defaults filled in; ConfigError naming the field otherwise."""
        model = self.config_model()
        accepted = list(model.model_fields)
        retired = [k for k in values if k in RETIRED_FIELDS and k not in accepted]
        if retired:
            raise ConfigError(" ".join(RETIRED_FIELDS[k] for k in retired))
        robust = [k for k in values if k in ROBUST_FIELDS and k not in accepted]
        if robust:
            raise ConfigError(
                f"algorithm.{robust[0]}: robust aggregation replaces a mean of client models; algorithm '{self.name}' aggregates otherwise "
                f"(it has no algorithm.aggregation_rule); accepted with: {', '.join(robust_algorithms())}"
            )
        try:
            return model(**values).model_dump()
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, ("algorithm",), lambda _: accepted)) from None

    def check_runtime(self, precision: str = "fp32", compile: bool = False) -> None:
        """ConfigError unless the factory declares what ``run.precision`` and ``run.compile`` ask of it (checked before the data loads)."""
        if precision != "fp32" and not accepts(self.factory, "precision"):
            raise ConfigError(
                f"run.precision: algorithm '{self.name}' trains and evaluates in fp32 only (its factory does not declare 'precision': runtime_options); "
                f"accepted for it: fp32; bf16 for: {', '.join(supports_precision())}"
            )
        if compile and not accepts(self.factory, "compile"):
            raise ConfigError(
                f"run.compile: algorithm '{self.name}' does not compile its networks (its factory does not declare 'compile': runtime_options); "
                f"accepted for it: false; true for: {', '.join(supports_compile())}"
            )

    def build(self, task: Task, values: dict[str, Any], runtime: Runtime) -> Algorithm:
        """The algorithm with checked hyperparameters and the run's ``runtime`` (:func:`runtime_arguments`)."""
        self.check_runtime(runtime.precision, runtime.compile)
        provided = runtime_arguments(self.factory, runtime)
        if is_shipped(self):
            return self.factory(task, **self.validate(values), **provided)
        from fedprior.algorithms.base import Algorithm

        with self.user_code("factory"):
            algorithm = self.factory(task, **self.validate(values), **provided)
        if not isinstance(algorithm, Algorithm):
            raise UserCodeError(f"{self.origin}: its factory returned {type(algorithm).__name__}, not an Algorithm (fedprior.algorithms.base.Algorithm)")
        server_side = {name: UserFunction(self, name, getattr(algorithm, name)) for name in USER_SERVER_SIDE if getattr(algorithm, name) is not None}
        return algorithm.with_(**server_side)

    def check_without_data(self, values: dict[str, Any], runtime: Runtime) -> None:
        """The checks the factory makes before it looks at the task (a field that applies only with another, such as
        ``server_lr`` with ``server_optimizer = 'none'``), run for a config before any data is loaded: the factory is called
        with a task that stops it at its first look (:class:`_NoTask`). Its ConfigError is raised; any other exception is
        left to the build on the real task, which reports it with the data at hand."""
        self.check_runtime(runtime.precision, runtime.compile)
        provided = runtime_arguments(self.factory, runtime)
        try:
            self.factory(_NoTask(), **self.validate(values), **provided)
        except FedpriorError:
            raise
        except _TaskNeeded:
            return
        except Exception as error:
            if not is_shipped(self) and old_signature_call(error):  # known before the data: say it now
                raise self.factory_error(error) from error
            return

    @property
    def origin(self) -> str:
        """``algorithm 'NAME' (module M)``: where an error of the user's own algorithm comes from."""
        module = getattr(inspect.unwrap(self.factory), "__module__", None)
        return f"algorithm '{self.name}'" + (f" (module {module})" if module else "")

    @contextlib.contextmanager
    def user_code(self, what: str) -> Iterator[None]:
        """An exception of the user's ``what`` (its factory, its aggregate) as a UserCodeError naming the algorithm and its
        module; fedprior's own errors and Ctrl-C pass as they are."""
        try:
            yield
        except FedpriorError:
            raise
        except Exception as error:
            if what == "factory":
                raise self.factory_error(error) from error
            raise UserCodeError(f"{self.origin}: its {what} raised {type(error).__name__}: {error}") from error

    def factory_error(self, error: Exception) -> UserCodeError:
        """The user's factory raised ``error``: one line naming the algorithm and its module, and, where the factory called a
        shipped one the way of fedprior 0.1.0 (:func:`old_signature_call`), the signature it has now and where it is described."""
        line = f"{self.origin}: its factory raised {type(error).__name__}: {error}"
        if old_signature_call(error):
            line += f"; {OLD_SIGNATURE_HINT}"
        return UserCodeError(line)


OLD_SIGNATURE_HINT = (
    "factories now take the run as one value, factory(task, runtime, *, hyperparameters...), where runtime is a "
    "fedprior.algorithms.base.Runtime holding local_epochs, batch_size, device, precision and compile: call a shipped factory as "
    "fedavg(task, runtime, lr=lr), not with local_epochs=, batch_size=, device= (docs/python-api.md, 'Add an algorithm from your own code')"
)
"""What a factory of the user's that calls a shipped factory the old way is told (:meth:`AlgorithmSpec.factory_error`)."""


def old_signature_call(error: BaseException) -> bool:
    """Whether ``error`` is the TypeError of a call in fedprior 0.1.0's form, ``factory(task, *, local_epochs, batch_size,
    device, ...)``, to a factory that now takes ``factory(task, runtime, *, ...)``: ``runtime`` missing, or one of
    :data:`RUNTIME_PROVIDED` given as a keyword it does not take."""
    if not isinstance(error, TypeError):
        return False
    text = str(error)
    missing = "missing" in text and f"'{RUNTIME_PARAMETER}'" in text
    return missing or ("unexpected keyword" in text and any(f"'{name}'" in text for name in RUNTIME_PROVIDED))


def runtime_arguments(factory: Callable[..., Algorithm], runtime: Runtime) -> dict[str, Any]:
    """What ``factory`` is given of the run: ``runtime=runtime``, or for a factory without a ``runtime`` parameter (written
    before the Runtime) the fields of :data:`RUNTIME_PROVIDED` it declares, one keyword each."""
    declared = inspect.signature(factory).parameters
    if RUNTIME_PARAMETER in declared:
        return {RUNTIME_PARAMETER: runtime}
    return {name: getattr(runtime, name) for name in RUNTIME_PROVIDED if name in declared}


def accepts(factory: Callable[..., Algorithm], option: str) -> bool:
    """Whether ``factory`` carries out ``option`` (``'precision'``: bf16; ``'compile'``): declared with
    :func:`~fedprior.algorithms.base.runtime_options`, or, for a factory without a ``runtime`` parameter, taken as a keyword."""
    if RUNTIME_PARAMETER not in inspect.signature(factory).parameters:
        return option in inspect.signature(factory).parameters
    marked = inspect.unwrap(factory, stop=lambda f: hasattr(f, "runtime_options"))
    return option in getattr(marked, "runtime_options", ())


class _TaskNeeded(BaseException):
    """Raised by :class:`_NoTask` where a factory looks at its task (a BaseException: no ``except Exception`` of a factory catches it)."""


class _NoTask:
    """The task :meth:`AlgorithmSpec.check_without_data` gives a factory: any attribute ends the call (:class:`_TaskNeeded`)."""

    def __getattr__(self, name: str) -> Any:
        raise _TaskNeeded(name)


USER_SERVER_SIDE = ("init", "broadcast", "aggregate", "evaluate", "validate")
"""The server-side functions of an algorithm of the user's own whose exceptions :class:`UserFunction` names (a client's
update that raises is a failed client, reported by the runtime)."""


@dataclass(frozen=True)
class UserFunction:
    """``function`` of the user's algorithm ``spec``, whose exceptions become a UserCodeError naming the algorithm, its
    module and ``name`` (picklable where ``function`` is)."""

    spec: AlgorithmSpec
    name: str
    function: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.spec.user_code(self.name):
            return self.function(*args, **kwargs)


def require_device(spec: AlgorithmSpec) -> AlgorithmSpec:
    """``spec`` if its factory declares the parameter ``runtime`` (a :class:`~fedprior.algorithms.base.Runtime`, whose
    ``device`` is the run's torch device) or, written before the Runtime, the keyword parameter ``device``; ConfigError otherwise.

    The runtime passes ``run.device`` only to a factory that declares one of them; one that does not
    would silently train on the CPU with ``run.device = 'cuda'``. The factory must also put
    its models and the tensors it computes with on that device (tested for every shipped
    algorithm in tests/runtime/test_device.py); States and Replies stay on the CPU.
    """
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    declared = inspect.signature(spec.factory).parameters
    if not any(name in declared and declared[name].kind in kinds for name in (RUNTIME_PARAMETER, "device")):
        raise ConfigError(
            f"algorithm '{spec.name}': the factory must declare the parameter 'runtime: Runtime' (fedprior.algorithms.base) "
            "and build its models and tensors on runtime.device (the runtime passes run.device in it; "
            "without it the algorithm would train on the CPU whatever run.device says)"
        )
    return spec


SHIPPED = (
    ("fedavg", "fedavg:fedavg"),
    ("fedprox", "fedprox:fedprox"),
    ("scaffold", "scaffold:scaffold"),
    ("fedavgm", "fedopt:fedavgm"),
    ("fedadagrad", "fedopt:fedadagrad"),
    ("fedadam", "fedopt:fedadam"),
    ("fedyogi", "fedopt:fedyogi"),
    ("fedbuff", "fedbuff:fedbuff"),
    ("fedasync", "fedasync:fedasync"),
    ("fedbn", "fedbn:fedbn"),
    ("fedntd", "fedntd:fedntd"),
    ("fst-cbdg", "fst_cbdg:fst_cbdg"),
    ("zero-shot", "baselines:zero_shot"),
    ("linear-probe", "baselines:linear_probe"),
    ("mfcl", "mfcl:mfcl"),
    ("fedsimclr", "fedsimclr:fedsimclr"),
    ("fedswav", "fedswav:fedswav"),
    ("orchestra", "orchestra:orchestra"),
    ("raw-pixels", "raw_pixels:raw_pixels"),
    ("moon", "moon:moon"),
    ("feddb", "feddb:feddb"),
    ("fedavg-labeled", "fixmatch:fedavg_labeled"),
    ("fixmatch", "fixmatch:fixmatch"),
    ("fedmatch", "fedmatch:fedmatch"),
    ("fedrgd", "fedrgd:fedrgd"),
    ("semifl", "semifl:semifl"),
    ("fedbm", "fedbm:fedbm"),
    ("feddyn", "feddyn:feddyn"),
    ("fedrep", "fedrep:fedrep"),
    ("fedrod", "fedrod:fedrod"),
    ("fednh", "fednh:fednh"),
    ("fedproto", "fedproto:fedproto"),
    ("fedetf", "fedetf:fedetf"),
    ("central", "central:central"),
)
"""The shipped algorithms: name -> ``module:factory`` in ``fedprior.algorithms`` (imported on first use)."""

CENTRALIZED = ("linear-probe", "central")

ALGORITHMS: dict[str, AlgorithmSpec] = {
    name: AlgorithmSpec(name, ShippedFactory(f"fedprior.algorithms.{path}"), centralized=name in CENTRALIZED) for name, path in SHIPPED
}
"""Every registered algorithm. The shipped factories declare ``device`` as :func:`require_device` asks (tests/runtime/test_device.py)."""


def is_shipped(spec: AlgorithmSpec) -> bool:
    """Whether ``spec`` is one of fedprior's own algorithms (imported on first use), not one registered from other code."""
    return isinstance(spec.factory, ShippedFactory)


ENTRY_POINT_GROUP = "fedprior.algorithms"
"""The entry-point group of installed packages' algorithms: ``NAME = "package.module:factory"`` registers the factory
as NAME; an entry point naming a module (``"package.algorithms"``) or an :class:`AlgorithmSpec` is imported (the module
registers its algorithms itself) or registered as it is."""

_ENTRY_POINTS = {"loaded": False, "loading": False}
ENTRY_POINT_ERRORS: dict[str, str] = {}
"""Entry points that failed to load: their name -> why (repeated by the unknown-algorithm error)."""


def load_entry_points() -> None:
    """Register the algorithms of the ``fedprior.algorithms`` entry points, once per process.

    A broken entry point (its module does not import, its object is no factory, its name is
    taken or not a valid algorithm name) is a warning naming it, and skipped.
    """
    if _ENTRY_POINTS["loaded"]:
        return
    _ENTRY_POINTS["loaded"] = True  # first: an entry point's module may call register_algorithm, which comes back here
    import warnings
    from importlib.metadata import entry_points

    _ENTRY_POINTS["loading"] = True  # what a module registers now is installed, as its entry point's own factory
    try:
        _load_each(entry_points(group=ENTRY_POINT_GROUP), warnings.warn)
    finally:
        _ENTRY_POINTS["loading"] = False


def _load_each(points: Any, warn: Callable[..., None]) -> None:
    for point in points:
        package = f" (package {point.dist.name})" if point.dist is not None else ""
        try:
            loaded = point.load()
            if isinstance(loaded, AlgorithmSpec):
                _register(loaded, entry_point=True)
            elif callable(loaded) and not isinstance(loaded, type):
                _register(AlgorithmSpec(point.name, loaded), entry_point=True)
            elif not inspect.ismodule(loaded):
                raise ConfigError(f"{point.value} is not a factory, an AlgorithmSpec or a module (got {type(loaded).__name__})")
        except Exception as error:
            reason = f"entry point '{point.name} = {point.value}' of group {ENTRY_POINT_GROUP}{package} failed: {type(error).__name__}: {error}"
            ENTRY_POINT_ERRORS[point.name] = reason
            warn(f"{reason}; skipped", stacklevel=4)


def registered() -> dict[str, AlgorithmSpec]:
    """Every algorithm this process knows: the shipped ones, those registered here, and the installed entry points'."""
    load_entry_points()
    return ALGORITHMS


def supports_precision() -> list[str]:
    """The registered algorithms whose factory takes ``precision`` (``run.precision = 'bf16'`` runs them under autocast)."""
    return [name for name, spec in registered().items() if accepts(spec.factory, "precision")]


ROBUST_FIELDS = ROBUST_OPTION_NAMES
"""The fields of ``algorithm.aggregation_rule`` (declared in ``pieces/robust_aggregation_fields.py``), named where an algorithm without the option is given one."""


def robust_algorithms() -> list[str]:
    """The registered algorithms whose aggregate is a mean of client models, so that a robust rule can replace it (their factory takes ``aggregation_rule``)."""
    return [name for name, spec in registered().items() if "aggregation_rule" in inspect.signature(spec.factory).parameters]


def supports_compile() -> list[str]:
    """The registered algorithms whose factory takes ``compile`` (``run.compile = true`` compiles the network their clients train)."""
    return [name for name, spec in registered().items() if accepts(spec.factory, "compile")]


def algorithm_spec(name: str) -> AlgorithmSpec:
    known = registered()
    if name not in known:
        hint = (
            f" ({ENTRY_POINT_ERRORS[name]})"
            if name in ENTRY_POINT_ERRORS
            else " (an algorithm from your own code: name its module with --import MODULE or in run.imports)"
        )
        raise ConfigError(f"algorithm.name: unknown algorithm '{name}'; accepted: {', '.join(known)}{hint}")
    return known[name]


MODULE_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
"""What ``--import`` and ``run.imports`` take: a dotted Python module name (``mypkg.algos``), not a file path."""


def import_modules(names: Sequence[str], where: str = "--import") -> None:
    """Import each module of ``names`` (each registers its algorithms when imported); a ConfigError naming the module and the Python error otherwise.

    ``where`` names the option in errors (``--import``, ``run.imports``). A module is looked
    for like Python's own imports (installed packages, ``PYTHONPATH``), and in the working
    directory last, as ``python -m`` does, since the ``fedprior`` script's own folder is not it.
    Importing a module twice does nothing the second time.
    """
    import importlib
    import re
    import sys

    for name in names:
        if not isinstance(name, str) or not re.fullmatch(MODULE_PATTERN, name):
            raise ConfigError(f"{where}: {name!r} is not a module name; give a dotted Python module name such as 'mypkg.algorithms' (no path, no '.py')")
        if name in sys.modules:
            continue
        search_working_directory()
        load_entry_points()  # before the module registers: its names then meet the installed ones in a fixed order
        before = set(REGISTERED_HERE)
        try:
            importlib.import_module(name)
        except Exception as error:  # not found, a syntax error, or its own code failing (a register_algorithm refused)
            raise ConfigError(f"{where}: cannot import module '{name}' ({type(error).__name__}: {error})") from None
        except SystemExit as error:  # its top level calls sys.exit() (a script's `main()` not behind `if __name__ == "__main__"`)
            raise ConfigError(
                f"{where}: importing module '{name}' called sys.exit({error.code!r}); a module named here is imported, not run: "
                'put what runs as a script under `if __name__ == "__main__":`'
            ) from None
        REGISTERED_BY[name] = REGISTERED_HERE - before


def search_working_directory() -> None:
    """Let imports find modules in the working directory, last, as ``python -m`` does (the ``fedprior`` script's folder is not it)."""
    import os
    import sys

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())


def registers_other_algorithms(module: str, algorithm: str) -> bool:
    """Whether importing ``module`` (by :func:`import_modules`) registered algorithms, none of them ``algorithm``: a config
    running ``algorithm`` does not need it. False for a module that registered nothing (it may be needed for another reason)
    or was imported otherwise (what it registered is not known)."""
    registered = REGISTERED_BY.get(module, set())
    return bool(registered) and algorithm not in registered


REGISTERED_BY: dict[str, set[str]] = {}
"""Module -> the algorithms its import registered, for the modules :func:`import_modules` imported."""

REGISTERED_HERE: set[str] = set()
"""Names registered from user code in this process (other processes, e.g. Flower's nodes, do not know them);
not those of installed entry points, which every process loads."""

NAME_PATTERN = r"[a-z0-9][a-z0-9_.-]*"
"""What an algorithm name may be: lowercase letters, digits, '-', '_', '.' (a config value and a folder name)."""


def register_algorithm(spec: AlgorithmSpec, *, replace: bool = False) -> AlgorithmSpec:
    """Add ``spec`` to ``ALGORITHMS`` (an algorithm from user code), after checking that its factory can be configured.

    The factory takes the :class:`Task` first, then ``runtime`` (a :class:`~fedprior.algorithms.base.Runtime`:
    local epochs, batch size, the run's device, precision and compile), then keyword-only hyperparameters, each with
    an annotation and a default (``Annotated[float, Field(gt=0, description=...)] = 0.1``). It must build its models
    and the tensors it computes with on ``runtime.device``, returning States and Replies on the CPU. A factory
    written before the Runtime, declaring ``device`` (and ``local_epochs``, ``batch_size``, ``precision``,
    ``compile`` as it needs) instead, is given those keywords (:func:`runtime_arguments`).
    """
    load_entry_points()  # an installed algorithm of the same name is then refused here, whatever runs first
    return _register(spec, replace=replace, entry_point=_ENTRY_POINTS["loading"])


def _register(spec: AlgorithmSpec, *, replace: bool = False, entry_point: bool = False) -> AlgorithmSpec:
    import re

    if not isinstance(spec.name, str) or not re.fullmatch(NAME_PATTERN, spec.name):
        raise ConfigError(f"algorithm name {spec.name!r}: use lowercase letters, digits, '-', '_' or '.' (e.g. 'my-fedavg')")
    if spec.name in ALGORITHMS and not replace:
        raise ConfigError(f"algorithm '{spec.name}' is already registered; pass replace=True to replace it")
    if not callable(spec.factory):
        raise ConfigError(f"algorithm '{spec.name}': the factory must be a function (task, *, hyperparameters...) -> Algorithm")
    params = list(inspect.signature(spec.factory).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ConfigError(f"algorithm '{spec.name}': the factory's first parameter must be the task (positional)")
    require_device(spec)
    for name, param in spec.hyperparameters().items():
        if param.default is param.empty:
            raise ConfigError(f"algorithm '{spec.name}': hyperparameter '{name}' needs a default value")
    try:
        spec.validate({})  # the defaults pass their own annotations
    except Exception as error:
        raise ConfigError(f"algorithm '{spec.name}': its hyperparameters cannot be checked: {error}") from None
    ALGORITHMS[spec.name] = spec
    if entry_point:
        REGISTERED_HERE.discard(spec.name)
    else:
        REGISTERED_HERE.add(spec.name)
    return spec
