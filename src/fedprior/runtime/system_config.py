"""The ``[system]`` config section: device speeds, bandwidths, availability, a round deadline, stragglers, over-selection.

Off by default (``speed = 'none'`` and every other field at its default): the round loop then runs exactly as
without the section, and no number of a run changes. What the fields do is in
:mod:`fedprior.runtime.system_model` (the model) and :mod:`fedprior.runtime.system_round` (a round under it), and in
docs/system-heterogeneity.md. The fields are checked together here (:func:`check_system`), before any data loads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fedprior.errors import ConfigError
from fedprior.validation import ConfigSection

FEDSCALE_SECONDS_PER_EXAMPLE = 0.005 * 2.718281828459045
"""The median seconds a device takes per training example in FedScale's log-normal model: its
``ClientMetadata.get_completion_time_lognormal`` (Lai et al., "FedScale: Benchmarking Model and System Performance of
Federated Learning at Scale", ICML 2022; SymbioticLab/FedScale, fedscale/cloud/internal/client_metadata.py) takes
``mean_seconds_per_sample = 0.005`` times a device factor ``lognormal(1, tail_skew = 0.6)``, whose median is e."""

FEDSCALE_SIGMA = 0.6
"""FedScale's ``tail_skew``: the sigma of that log-normal device factor."""


class SystemConfig(ConfigSection):
    speed: Literal["none", "constant", "lognormal"] = "none"
    """How fast each client's device trains: 'none' (no system model: every client takes no time, the default; the other fields then apply only as system.deadline on Flower, its round timeout), 'constant' (every device takes seconds_per_example), 'lognormal' (client k takes seconds_per_example x exp(speed_sigma z_k), z_k ~ N(0, 1) drawn once per client from the run seed: FedScale's log-normal device model, its parameters the defaults)."""
    seconds_per_example: float = Field(FEDSCALE_SECONDS_PER_EXAMPLE, gt=0)
    """The (median) seconds a device takes to train on one example once; a client's local work is its training examples x federation.local_epochs. Default 0.005 e = 0.01359: FedScale's log-normal model (mean_seconds_per_sample 0.005 times lognormal(1, 0.6), whose median is e)."""
    speed_sigma: float = Field(FEDSCALE_SIGMA, ge=0)
    """sigma of the log-normal device factor with speed = 'lognormal' (FedScale's tail_skew, 0.6)."""
    bandwidth: float = Field(1.25e6, gt=0)
    """The (median) bytes a second a client's link carries, both ways: download and upload take their bytes (those fedprior counts, download_bytes and upload_bytes) over it. Default 1.25e6 (10 Mbit/s), a round figure, not a measured one (FedScale's measured device profiles cannot be fetched here): set your own."""
    bandwidth_sigma: float = Field(0.0, ge=0)
    """sigma of a log-normal factor on each client's bandwidth, exp(bandwidth_sigma z'_k), drawn once per client; 0: every client has the same bandwidth."""
    availability: Literal["always", "bernoulli", "diurnal"] = "always"
    """When a client can take part: 'always'; 'bernoulli' (in each round, independently, with probability availability_p); 'diurnal' (on for availability_p of every diurnal_period rounds, at a phase drawn once per client). A sampled client that is not available fails the round ('unavailable'), counted in failed_clients."""
    availability_p: float = Field(1.0, gt=0, le=1)
    """With availability 'bernoulli': the probability a client is available in a round; 'diurnal': the share of the period it is on."""
    diurnal_period: int = Field(24, ge=2)
    """With availability 'diurnal': the period of the on/off cycle, in rounds."""
    deadline: float | None = Field(None, gt=0)
    """Simulated seconds a round waits for its clients (download + local training + upload): a client past it is dropped (its reply discarded, counted in deadline_dropped), or does the work that fits with partial_work = true; unset: no deadline. On Flower runtimes, where the clients' real time counts: the round timeout (seconds of wall-clock time)."""
    partial_work: bool = False
    """With a deadline: a client that would miss it does less local work instead of being dropped, as straggler_rule says (algorithms whose local SGD takes a step budget: fedavg, fedprox, moon on image models)."""
    straggler_rule: Literal["fedprox", "fl-bench"] = "fedprox"
    """With partial_work: 'fedprox' (the client runs the mini-batch steps that fit before the deadline; none fit: dropped; FedProx's variable local work, Li et al., MLSys 2020, Sec. 3), or 'fl-bench' (the client runs E_k epochs, E_k drawn once per client uniformly from [straggler_min_epochs, federation.local_epochs), and its reply is kept even if it is still late: FL-bench's straggler rule, KarhouTam/FL-bench src/server/fedavg.py)."""
    straggler_min_epochs: int = Field(0, ge=0)
    """With straggler_rule 'fl-bench': the fewest epochs a straggler runs (FL-bench's straggler_min_local_epoch; 0 sends the received model back)."""
    over_selection: float = Field(0.0, ge=0)
    """x: sample ceil(m (1 + x)) clients and keep the m that finish first in simulated time, the others' replies discarded (Bonawitz et al., "Towards Federated Learning at Scale: System Design", MLSys 2019: Sec. 2.2's reporting ignores stragglers, and the paper's operational profile selects 130% of the target count, x = 0.3, to absorb drop-outs); 0: none."""


DEFAULTS = {name: field.default for name, field in SystemConfig.model_fields.items()}


def system_on(system: SystemConfig) -> bool:
    """Whether the run has a system model (``speed`` set): the round loop simulates time only then."""
    return system.speed != "none"


SYNCHRONOUS_ONLY = ("deadline", "partial_work", "over_selection", "availability")
"""The ``[system]`` fields of a synchronous round (who is waited for, who is cut short); an asynchronous server waits for no one."""


def check_asynchronous_system(algorithm: str, system: SystemConfig) -> None:
    """An algorithm on its own simulated clock (``Algorithm.dispatch``: ``fedbuff``, ``fedasync``) takes the device model's speeds
    and links (its clients' durations), not a synchronous round's deadline, partial work, over-selection or availability."""
    defaults = DEFAULTS
    set_fields = [name for name in SYNCHRONOUS_ONLY if getattr(system, name) != defaults[name]]
    if set_fields:
        raise ConfigError(
            f"system.{set_fields[0]}: algorithm '{algorithm}' runs on its own simulated clock (asynchronous aggregation: no round to wait "
            f"for or cut short); it reads system.speed, the speeds and bandwidths; accepted: leave {', '.join(f'system.{n}' for n in SYNCHRONOUS_ONLY)} out"
        )


def check_system(system: SystemConfig, runtime: str, sampler: str, local_epochs: int) -> None:
    """The ``[system]`` fields against each other, the runtime and the sampler: one ConfigError line naming the field."""
    if not system_on(system):
        allowed = {"deadline"} if runtime != "local" else set()  # on Flower, the deadline alone is the round timeout
        extra = [name for name, default in DEFAULTS.items() if name not in allowed | {"speed"} and getattr(system, name) != default]
        if extra:
            where = "" if runtime == "local" else f" (on runtime '{runtime}' system.deadline alone applies without it, as the round timeout)"
            raise ConfigError(f"system.{extra[0]}: applies with a system model; set system.speed ('constant' or 'lognormal'){where}, or leave it out")
        return
    if runtime != "local":
        raise ConfigError(
            f"system.speed: the simulated device model runs with run.runtime = 'local' only; on '{runtime}' the clients' real time counts "
            "(system.deadline alone is the round timeout); accepted there: none"
        )
    if system.availability == "always" and system.availability_p != 1.0:
        raise ConfigError("system.availability_p: applies with system.availability = 'bernoulli' or 'diurnal'; set one, or leave it out")
    if system.availability != "diurnal" and system.diurnal_period != DEFAULTS["diurnal_period"]:
        raise ConfigError("system.diurnal_period: applies with system.availability = 'diurnal'; set it, or leave diurnal_period out")
    if system.speed == "constant" and system.speed_sigma != DEFAULTS["speed_sigma"]:
        raise ConfigError("system.speed_sigma: applies with system.speed = 'lognormal'; accepted with 'constant': leave it out")
    if system.partial_work and system.deadline is None:
        raise ConfigError("system.partial_work: a client does the work that fits before system.deadline, which is unset; set a deadline too")
    if not system.partial_work and (system.straggler_rule != DEFAULTS["straggler_rule"] or system.straggler_min_epochs != 0):
        field = "straggler_rule" if system.straggler_rule != DEFAULTS["straggler_rule"] else "straggler_min_epochs"
        raise ConfigError(f"system.{field}: applies with system.partial_work = true; set it, or leave {field} out")
    if system.straggler_rule != "fl-bench" and system.straggler_min_epochs != 0:
        raise ConfigError("system.straggler_min_epochs: applies with system.straggler_rule = 'fl-bench'; accepted with 'fedprox': 0")
    if system.straggler_rule == "fl-bench" and system.partial_work and system.straggler_min_epochs >= local_epochs:
        raise ConfigError(
            f"system.straggler_min_epochs: a straggler runs fewer epochs than federation.local_epochs ({local_epochs}), from [min, local_epochs); "
            f"accepted: 0 to {local_epochs - 1}"
        )
    if system.over_selection > 0 and sampler not in ("uniform", "size-weighted"):
        raise ConfigError(
            f"system.over_selection: samples ceil(m (1 + x)) clients of a fixed-size draw; federation.sampler '{sampler}' is not one; accepted: uniform, size-weighted"
        )
