"""The hyperparameter snapshot the config-only commands read (issue 33 item 9) is the factories' own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from fedprior.algorithms.hyperparameter_snapshot import read_snapshot
from fedprior.algorithms.registry import ALGORITHMS, is_shipped, require_device
from fedprior.algorithms.write_hyperparameter_snapshot import current_snapshot
from fedprior.experiments.config import list_presets, load_config


def test_the_snapshot_is_what_the_factories_declare():
    """Fails when a shipped factory's hyperparameters changed: rerun `python -m fedprior.algorithms.write_hyperparameter_snapshot`."""
    assert json.loads(json.dumps(current_snapshot())) == read_snapshot(), "rerun `python -m fedprior.algorithms.write_hyperparameter_snapshot`"


@pytest.mark.parametrize("name", sorted(n for n, spec in ALGORITHMS.items() if is_shipped(spec)))
def test_a_snapshot_model_checks_as_the_factorys_model(name):
    spec = ALGORITHMS[name]
    require_device(spec)  # the shipped factories are imported on first use, so the registry no longer checks them at import
    live, snapshot = spec.config_model(from_snapshot=False), spec.config_model(from_snapshot=True)
    assert snapshot is not live and snapshot.model_json_schema() == live.model_json_schema()


PRESETS_FROM_SNAPSHOT = textwrap.dedent(
    """
    import json, sys
    from fedprior.algorithms.registry import hyperparameters_from_snapshot
    from fedprior.experiments.config import list_presets, load_config
    with hyperparameters_from_snapshot():
        shown = {name: load_config(name)[1].to_toml() for name in list_presets()}
    print(json.dumps({"torch": "torch" in sys.modules, "shown": shown}))
    """
)


def test_every_preset_reads_the_same_from_the_snapshot_as_from_the_factories():
    done = subprocess.run([sys.executable, "-c", PRESETS_FROM_SNAPSHOT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    fresh = json.loads(done.stdout)
    assert not fresh["torch"]
    assert fresh["shown"] == {name: load_config(name)[1].to_toml() for name in list_presets()}
