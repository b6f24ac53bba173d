"""The ``datasets`` library (the hf extra), imported so that it never reaches the network unless a download was asked for.

Shared by the data layer (``hf:PATH`` datasets, :mod:`fedprior.data.huggingface`) and the partition layer
(flwr-datasets' partitioners, :mod:`fedprior.partition.flower_datasets`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fedprior.errors import ConfigError

INSTALL = "pip install -c requirements.lock -e '.[hf]'"


@contextmanager
def hub_access(allowed: bool, field: str = "data.dataset") -> Iterator[Any]:
    """The ``datasets`` module, with its (and huggingface_hub's) offline mode on unless ``allowed``; restored afterwards.

    ``HF_DATASETS_OFFLINE`` and ``HF_HUB_OFFLINE`` are set before the first import (both libraries read them then);
    the flags they become are set for the time of the block either way. ``field`` names the config field in the error
    of a missing extra.
    """
    if not allowed:  # read by datasets (and huggingface_hub) when first imported
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import datasets
        import huggingface_hub.constants as hub_constants
    except ImportError:
        raise ConfigError(f"{field}: needs the datasets library, the hf extra ({INSTALL})") from None
    before = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = not allowed
    hub_constants.HF_HUB_OFFLINE = not allowed
    datasets.disable_progress_bars()
    try:
        yield datasets
    finally:
        datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = before[0]
        hub_constants.HF_HUB_OFFLINE = before[1]
