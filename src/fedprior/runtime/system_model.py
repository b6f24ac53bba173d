"""The system model: how long a client takes in simulated seconds, and whether it can take part in a round.

Built from the ``[system]`` section (:class:`~fedprior.runtime.system_config.SystemConfig`) with the run seed and
the number of clients (:meth:`SystemModel.of_config`; None where the section is off, so nothing of it runs then).
A client's update takes

    duration_k = download_bytes / b_k + work_k x s_k + upload_bytes / b_k

simulated seconds: ``work`` is the examples it trains on, counted once per pass (its training examples x
``federation.local_epochs``, fewer with partial work), ``s_k`` its device's seconds per example and ``b_k`` its link's
bytes a second (the bytes are those fedprior counts, ``download_bytes`` and ``upload_bytes``). This is FedScale's
completion time (computation: seconds per sample x samples; communication: (download + upload) / bandwidth; Lai et al.,
"FedScale: Benchmarking Model and System Performance of Federated Learning at Scale", ICML 2022;
``ClientMetadata.get_completion_time_lognormal`` of SymbioticLab/FedScale), with the device factor drawn once per
client (a device keeps its speed) rather than per task, and the backward pass counted in ``s_k``.

``s_k`` is ``seconds_per_example`` ('constant') or ``seconds_per_example x exp(speed_sigma z_k)`` ('lognormal'), and
``b_k`` is ``bandwidth x exp(bandwidth_sigma z'_k)``, with z_k, z'_k ~ N(0, 1) drawn from generators seeded by
(run seed, client id): deterministic, O(1) time and memory per query, nothing held per client, so a population of
10^6 costs nothing until its clients are asked about.

Availability (``availability``): 'always'; 'bernoulli', client k available in round t with probability p, drawn
from (seed, t, k); 'diurnal', available in round t when (t + phi_k) mod P < p P, the phase phi_k in [0, P) drawn once
per client (a device on for a share p of every period of P rounds, e.g. a day). Rounds are the run's steps counted
over all stages (1-based).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from fedprior.runtime.system_config import SystemConfig, system_on
from fedprior.seeding import numpy_rng


class SystemModel:
    """Simulated device speeds, bandwidths and availability of a run's clients (see the module docstring).

    ``seconds_per_example`` and ``bandwidths`` (client id -> value), for tests and hand-made federations, replace the
    drawn values of the clients they name.
    """

    def __init__(
        self,
        config: SystemConfig,
        seed: int,
        num_clients: int,
        *,
        seconds_per_example: dict[int, float] | None = None,
        bandwidths: dict[int, float] | None = None,
    ) -> None:
        self.config, self.seed, self.num_clients = config, int(seed), int(num_clients)
        self._speeds = dict(seconds_per_example or {})
        self._bandwidths = dict(bandwidths or {})

    def _key(self) -> tuple:
        return (self.config, self.seed, self.num_clients, sorted(self._speeds.items()), sorted(self._bandwidths.items()))

    def __eq__(self, other: object) -> bool:
        """Two models are equal where they give every client the same values (the same config, seed, population and hand-made values)."""
        if not isinstance(other, SystemModel):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.seed, self.num_clients, self.config.model_dump_json()))

    def __repr__(self) -> str:
        return f"SystemModel({self.config!r}, seed={self.seed}, num_clients={self.num_clients})"

    @classmethod
    def of_config(cls, config: SystemConfig | None, seed: int, num_clients: int) -> SystemModel | None:
        """The run's model, or None where ``[system]`` is off (``speed = 'none'``): the round loop then simulates nothing."""
        if config is None or not system_on(config):
            return None
        return cls(config, seed, num_clients)

    def _check(self, client_id: int) -> int:
        if not 0 <= int(client_id) < self.num_clients:
            raise ValueError(f"client {client_id} is not one of the {self.num_clients} clients")
        return int(client_id)

    def seconds_per_example(self, client_id: int) -> float:
        """s_k: the seconds client ``client_id``'s device takes to train on one example once."""
        client_id = self._check(client_id)
        if client_id in self._speeds:
            return float(self._speeds[client_id])
        c = self.config
        if c.speed == "lognormal" and c.speed_sigma > 0:
            z = float(numpy_rng(self.seed, "system", "speed", client_id).standard_normal())
            return c.seconds_per_example * math.exp(c.speed_sigma * z)
        return float(c.seconds_per_example)

    def bandwidth(self, client_id: int) -> float:
        """b_k: the bytes a second client ``client_id``'s link carries (download and upload)."""
        client_id = self._check(client_id)
        if client_id in self._bandwidths:
            return float(self._bandwidths[client_id])
        c = self.config
        if c.bandwidth_sigma > 0:
            z = float(numpy_rng(self.seed, "system", "bandwidth", client_id).standard_normal())
            return c.bandwidth * math.exp(c.bandwidth_sigma * z)
        return float(c.bandwidth)

    def communication_seconds(self, client_id: int, download_bytes: int, upload_bytes: int) -> float:
        """(download + upload) / b_k."""
        return (int(download_bytes) + int(upload_bytes)) / self.bandwidth(client_id)

    def client_duration(self, client_id: int, round: int, work: float, download_bytes: int, upload_bytes: int) -> float:
        """Simulated seconds of client ``client_id``'s update in ``round``: download_bytes / b_k + work x s_k + upload_bytes / b_k.

        ``work``: the examples it trains on, counted once per pass (training examples x local epochs for the full update).
        A device's speed and link do not change between rounds; ``round`` is part of the call for models whose do.
        """
        return (
            int(download_bytes) / self.bandwidth(client_id) + float(work) * self.seconds_per_example(client_id) + int(upload_bytes) / self.bandwidth(client_id)
        )

    def available(self, client_id: int, round: int) -> bool:
        """Whether client ``client_id`` can take part in ``round`` (1-based, counted over all stages)."""
        client_id = self._check(client_id)
        c = self.config
        if c.availability == "always":
            return True
        if c.availability == "bernoulli":
            return bool(numpy_rng(self.seed, "system", "availability", int(round), client_id).random() < c.availability_p)
        period = c.diurnal_period
        phase = int(numpy_rng(self.seed, "system", "phase", client_id).integers(period))
        return (int(round) + phase) % period < c.availability_p * period


def update_durations(model: SystemModel, sizes: Sequence[int], epochs: int) -> Callable[[int, int, int], float]:
    """``duration(client, version, model_bytes)``: the simulated seconds of client ``client``'s full update on model version
    ``version``, for a server on a simulated clock (asynchronous aggregation, ``Runtime.client_duration``): the model's
    bytes down and up (``model_bytes``, a reply the size of the broadcast) and ``sizes[client]`` x ``epochs`` examples of work."""

    def duration(client: int, version: int, model_bytes: int) -> float:
        return model.client_duration(client, version, local_work(sizes[client], epochs), model_bytes, model_bytes)

    return duration


def local_work(examples: int, epochs: int) -> float:
    """The work of a full update: ``examples`` x ``epochs`` (the unit of :meth:`SystemModel.client_duration`)."""
    return float(int(examples) * int(epochs))
