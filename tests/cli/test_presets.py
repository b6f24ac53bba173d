"""``fedprior presets``: a preset name that is empty is named as such."""

from __future__ import annotations

import pytest

from tests.support.cli import error_line, invoke


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_preset_name_is_named_as_such(name):
    line = error_line(invoke("presets", "show", name))
    assert line.startswith(f"error: an empty preset name {name!r}; accepted: dp-fedavg-cnn, fedadagrad-cnn, ") and line.endswith("(or a path to a .toml file)")
