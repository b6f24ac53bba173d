"""Parameter checks shared by the partitioners, with messages that name the field."""

from __future__ import annotations

from fedprior.errors import ConfigError


def check_num_clients(num_clients: int, num_samples: int | None = None) -> int:
    if isinstance(num_clients, bool) or not isinstance(num_clients, int) or num_clients < 1:
        raise ConfigError(f"federation.num_clients: must be a positive integer, got {num_clients!r}")
    if num_samples is not None and num_clients > num_samples:
        raise ConfigError(f"federation.num_clients: {num_clients} clients but only {num_samples} training samples to share; use at most {num_samples}")
    return num_clients
