"""The commands that only read configs start without torch (issue 33 item 9; benchmarks/startup.py measures the time)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

RUN_THEN_LIST_MODULES = textwrap.dedent(
    """
    import json, runpy, sys
    sys.argv = ["fedprior", *sys.argv[1:]]
    try:
        runpy.run_module("fedprior", run_name="__main__")
    except SystemExit as stop:
        code = stop.code
    else:
        code = 0
    print(json.dumps({"code": code, "torch": "torch" in sys.modules}), file=sys.stderr)
    """
)
"""Run a fedprior command in this fresh process, then say on stderr's last line whether torch was imported."""


@pytest.mark.parametrize("command", [["--help"], ["presets"], ["presets", "--fields"], ["presets", "show", "fixmatch"]])
def test_config_only_commands_do_not_import_torch(command):
    done = subprocess.run([sys.executable, "-c", RUN_THEN_LIST_MODULES, *command], capture_output=True, text=True, timeout=600)
    after = json.loads(done.stderr.strip().splitlines()[-1])
    assert after["code"] == 0, done.stderr
    assert not after["torch"], f"`fedprior {' '.join(command)}` imported torch"


def test_version_prints_the_installed_version():
    from importlib import metadata

    from typer.testing import CliRunner

    from fedprior.cli import app

    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.output) == (0, f"fedprior {metadata.version('fedprior')}\n")
