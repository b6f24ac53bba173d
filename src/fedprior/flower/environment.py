"""The environment every Flower process of fedprior runs in: no telemetry, no update check, no Ray usage statistics.

Shared by the simulation engine (:mod:`fedprior.flower.simulation`, this process) and the local
federation's SuperLink and SuperNodes (:mod:`fedprior.flower.local`, child processes).
"""

from __future__ import annotations

import os

QUIET_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",  # Ray's future default; silences its warning (no GPU is used)
}


def quiet_environment() -> None:
    """No telemetry, no update check, no Ray usage statistics, no runtime dependency installation."""
    os.environ.update(QUIET_ENV)
