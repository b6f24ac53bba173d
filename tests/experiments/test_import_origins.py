"""Custom algorithms everywhere (issue 20, item 3): ``--import MODULE``, ``run.imports`` kept in the run's config so a
resume finds the algorithm, the ``fedprior.algorithms`` entry points, and reports titled by the run's own algorithm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fedprior
from fedprior.algorithms import registry as algorithm_registry
from fedprior.algorithms.registry import ALGORITHMS, REGISTERED_HERE
from fedprior.errors import ConfigError
from tests.support.cli import TINY, error_line, invoke
from tests.support.cli import fedprior as fedprior_command

MODULE = '''
"""FedAvg whose server takes the plain mean of the client models; STOP_AT_ROUND stops the run there as a scheduler would (SIGTERM)."""
import os
import signal
from typing import Annotated

from pydantic import Field

import fedprior
from fedprior.algorithms.base import Algorithm, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.tensors import weighted_mean


def uniform_fedavg(task: Task, runtime: Runtime, *,
                   lr: Annotated[float, Field(gt=0, description="client SGD learning rate")] = 0.05,
                   mix: Annotated[float, Field(ge=0, le=1, description="weight of the clients' mean in the new model")] = 1.0) -> Algorithm:
    """FedAvg with the unweighted mean of the client models as the server update."""
    base = fedavg(task, runtime, lr=lr)

    def aggregate(state, replies, info):
        if info.round == int(os.environ.get("STOP_AT_ROUND", "0")):
            os.kill(os.getpid(), signal.SIGTERM)  # round 2 is not aggregated: the checkpoint holds round 1
        mean = weighted_mean([r.arrays for r in replies], [1.0] * len(replies))
        return {**state, **{k: mix * v + (1 - mix) * state[k] for k, v in mean.items()}}

    return base.with_(name="uniform-fedavg", aggregate=aggregate)


fedprior.register_algorithm("uniform-fedavg", uniform_fedavg)
'''

CONFIG = """\
description = "uniform FedAvg on digits"

[data]
dataset = "digits"

[algorithm]
name = "uniform-fedavg"
lr = 0.1
mix = 0.9

[federation]
rounds = 2
num_clients = 4
fraction = 0.5
batch_size = 32

[run]
workers = 1
"""


def write_module(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(MODULE)
    return folder


def fedprior_cli(*args, cwd: Path, modules: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m fedprior ARGS`` in ``cwd``, with ``modules`` on PYTHONPATH (not the working directory: found as an installed module would be)."""
    given = [os.path.abspath(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]  # cwd changes
    path = os.pathsep.join([str(modules), *given])
    environment = {**os.environ, "PYTHONPATH": path, **env}
    return subprocess.run([sys.executable, "-m", "fedprior", *map(str, args)], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)


def history(result: subprocess.CompletedProcess) -> list[float]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])["history"]


@pytest.mark.slow
def test_a_custom_algorithm_run_with_import_stopped_after_round_1_resumes_without_it_to_the_uninterrupted_numbers(tmp_path):
    modules = write_module(tmp_path / "mods", "my_algorithms")
    (tmp_path / "mine.toml").write_text(CONFIG)
    run = tmp_path / "stopped"

    stopped = fedprior_cli("run", "mine.toml", "--import", "my_algorithms", "--run-dir", run, "--json", cwd=tmp_path, modules=modules, STOP_AT_ROUND="2")
    assert stopped.returncode == 143, stopped.stderr  # SIGTERM, resumable
    assert "interrupted (SIGTERM); resume with `fedprior resume" in stopped.stderr, stopped.stderr
    from fedprior.runtime.checkpoint import load_checkpoint

    assert len(load_checkpoint(run / "checkpoint.safetensors").progress.history) == 1
    assert not (run / "result.json").exists()
    config = (run / "config.toml").read_text()
    assert 'imports = [\n    "my_algorithms",\n]' in config

    resumed = fedprior_cli("resume", run, "--json", cwd=tmp_path, modules=modules)  # no --import: config.toml names the module
    # the uninterrupted reference: the run's own config.toml run again, no --import either
    again = fedprior_cli("run", run / "config.toml", "--run-dir", tmp_path / "again", "--json", cwd=tmp_path, modules=modules)
    assert len(history(again)) == 2 and history(resumed) == history(again)
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["algorithm"] == "uniform-fedavg"

    report = (run / "report.md").read_text()
    assert report.startswith("# uniform-fedavg (mine)\n") and "| hyperparameters | lr = 0.1, mix = 0.9 |" in report


def test_without_the_recorded_module_the_resume_names_what_is_missing(tmp_path):
    """The negative of the test above: a config naming the algorithm but not its module fails with a hint, not a crash."""
    (tmp_path / "mine.toml").write_text(CONFIG)
    line = error_line(invoke("run", tmp_path / "mine.toml", "--run-dir", tmp_path / "run"))
    assert "unknown algorithm 'uniform-fedavg'" in line and "--import MODULE or in run.imports" in line


def test_an_imported_algorithm_is_refused_on_flower_before_any_work(tmp_path, monkeypatch, registry):
    """Flower's nodes are other processes that do not import run.imports: one line, and no run folder left behind."""
    monkeypatch.syspath_prepend(str(write_module(tmp_path / "mods", "flower_algorithms")))
    sys.modules.pop("flower_algorithms", None)
    (tmp_path / "mine.toml").write_text(CONFIG)
    line = error_line(invoke("run", tmp_path / "mine.toml", "--import", "flower_algorithms", "--runtime", "flower-sim", "--run-dir", tmp_path / "run"))
    assert "run.runtime: 'flower-sim' runs clients in other processes, which do not know the algorithm 'uniform-fedavg'" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "fedavg-cnn"],
        ["run", "fedavg-cnn", "--dry-run"],
        ["resume", "no/such/run"],
        ["table", "fst-cbdg-table2", "--embedded"],
        ["compare", "no/such/run"],
        ["algorithms"],
        ["presets", "show", "fedavg-cnn"],
    ],
)
def test_a_module_that_cannot_be_imported_is_one_line_naming_it_and_the_python_error(args, tmp_path):
    line = error_line(invoke(*args, "--import", "no_such_module_xyz"))
    assert line == "error: --import: cannot import module 'no_such_module_xyz' (ModuleNotFoundError: No module named 'no_such_module_xyz')"


def test_a_module_failing_at_import_or_a_path_is_named_too(tmp_path, monkeypatch):
    (tmp_path / "fails_at_import.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = error_line(invoke("run", "fedavg-cnn", "--import", "fails_at_import"))
    assert line == "error: --import: cannot import module 'fails_at_import' (RuntimeError: no GPU here)"
    line = error_line(invoke("run", "fedavg-cnn", "--import", "algos/mine.py"))
    assert "--import: 'algos/mine.py' is not a module name" in line
    (tmp_path / "bad.toml").write_text('[run]\nimports = ["no_such_module_xyz"]\n')
    line = error_line(invoke("run", tmp_path / "bad.toml"))
    assert line == "error: run.imports: cannot import module 'no_such_module_xyz' (ModuleNotFoundError: No module named 'no_such_module_xyz')"


def test_import_adds_to_run_imports_once_and_a_resume_may_change_them(tmp_path):
    from fedprior.experiments.config import load_config
    from fedprior.experiments.resume_check import check_same_config, checkpoint_metadata

    path = tmp_path / "c.toml"
    path.write_text('[run]\nimports = ["json"]\n')
    _, config = load_config(str(path), ["run.seed=1"], ["json", "csv"])
    assert config.run.imports == ["json", "csv"] and config.run.seed == 1
    shown = invoke("presets", "show", "fedavg-cnn", "--import", "csv")
    assert shown.exit_code == 0 and 'imports = [\n    "csv",\n]' in shown.stdout and "--import csv" in shown.stdout
    # which modules define the algorithm is where its code is (a package renamed): a resume accepts a change
    _, before = load_config(str(path))
    check_same_config(checkpoint_metadata(before), load_config(str(path), ["run.imports=['csv']"])[1], path)
    with pytest.raises(ConfigError, match="run.seed"):  # while a field that changes the numbers is still refused
        check_same_config(checkpoint_metadata(before), config, path)
    with pytest.raises(ConfigError, match="run.imports: 'a b' is not a module name"):
        load_config("fedavg-cnn", ["run.imports=['a b']"])


def test_the_report_is_titled_by_the_runs_algorithm_and_lists_only_its_fields(tmp_path, monkeypatch, registry):
    """From a preset of another algorithm (the Python API's whole-section override): not the preset's title, nor fedavg's fields."""
    monkeypatch.syspath_prepend(str(write_module(tmp_path / "mods", "report_algorithms")))
    sys.modules.pop("report_algorithms", None)
    __import__("report_algorithms")
    tiny = [o for o in TINY if o != "--set"]
    config = fedprior.load_config("fedavg-cnn", tiny).override({"algorithm": {"name": "uniform-fedavg", "lr": 0.1}})
    result = fedprior.run(config, run_dir=tmp_path / "run")
    report = (result.run_dir / "report.md").read_text()
    lines = report.splitlines()
    assert lines[0] == "# uniform-fedavg (fedavg-cnn)", lines[0]
    # described as the run that ran, not as the preset (issue 33 item 2: the Python API's overrides too)
    assert lines[2] == "uniform-fedavg on digits: 4 clients, IID, 50% per round, 2 rounds, 1 local epoch, batch 32 (made from the preset 'fedavg-cnn')"
    assert result.summary["description"] == lines[2]
    note = next(line for line in lines if line.startswith("Changed from the preset"))
    assert "algorithm.name = 'uniform-fedavg' (preset: 'fedavg')" in note and "algorithm.lr = 0.1 (preset: 0.05)" in note
    assert "algorithm.mix = 1.0 (not in the preset)" in note
    for field in ("model", "momentum", "weight_decay", "lr_decay", "init"):  # fedavg's, not uniform-fedavg's
        assert f"algorithm.{field}" not in report and f"{field} =" not in report, field
    assert "| hyperparameters | lr = 0.1, mix = 1.0 |" in report


def test_a_shipped_presets_report_keeps_its_name_beside_the_algorithm(tmp_path):
    from fedprior.experiments.config import preset_note
    from fedprior.results.report import hyperparameters_text, report_title

    assert report_title("fedavg-cnn", "fedavg") == "fedavg (fedavg-cnn)" and report_title("fedavg", "fedavg") == "fedavg"
    assert hyperparameters_text({}) == "none" and hyperparameters_text({"lr": 0.1}) == "lr = 0.1"
    config = fedprior.load_config("fedprox-cnn", ["federation.rounds=3"]).settings
    assert preset_note("fedprox-cnn", config) == "Changed from the preset 'fedprox-cnn', whose description this is: federation.rounds = 3 (preset: 20)."


def test_table_import_reaches_every_cells_config_and_the_command_that_continues_it(tmp_path, monkeypatch):
    (tmp_path / "table_helpers.py").write_text("IMPORTED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "t"
    options = ["--rows", "raw pixels", "--columns", "Sc2", "--seeds", "1", "--jobs", "1", "--out", out]
    small = ["--set", "data.dataset=digits", "--set", "data.train_subset=200", "--set", "run.workers=1"]
    result = invoke("table", "mfcl-table2", "--embedded", *small, "--import", "table_helpers", *options)  # raw pixels: nothing trained
    assert result.exit_code == 0, result.output
    configs = list(out.glob("*/config.toml"))
    assert len(configs) == 1 and 'imports = [\n    "table_helpers",\n]' in configs[0].read_text()
    command = next(line for line in (out / "table.md").read_text().splitlines() if line.startswith("command: "))
    assert command.startswith("command: `fedprior table mfcl-table2 --embedded --import table_helpers --set data.dataset=digits"), command
    assert json.loads((out / "table.json").read_text())["imports"] == ["table_helpers"]


ENTRY_POINTS = """\
[fedprior.algorithms]
ep-fedavg = ep_algorithms:uniform_fedavg
ep-module = ep_module
ep-broken = ep_missing_module:factory
ep-not-a-factory = ep_algorithms:NUMBER
"""


def install_fake_package(folder: Path) -> Path:
    """A package 'ep-pkg' as pip would leave it: its modules and a dist-info folder with entry_points.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ep_algorithms.py").write_text(MODULE.replace('fedprior.register_algorithm("uniform-fedavg", uniform_fedavg)', "NUMBER = 3"))
    (folder / "ep_module.py").write_text(
        "import fedprior\nfrom ep_algorithms import uniform_fedavg\n\nfedprior.register_algorithm('ep-registered-by-module', uniform_fedavg)\n"
    )
    info = folder / "ep_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


def test_entry_points_are_loaded_once_and_a_broken_one_warns_naming_it(tmp_path, monkeypatch, registry):
    monkeypatch.syspath_prepend(str(install_fake_package(tmp_path / "site")))
    algorithm_registry._ENTRY_POINTS["loaded"] = False  # as in a fresh process
    with pytest.warns(UserWarning) as caught:
        known = algorithm_registry.registered()
    messages = [str(w.message) for w in caught]
    assert any(
        m.startswith("entry point 'ep-broken = ep_missing_module:factory' of group fedprior.algorithms (package ep-pkg) failed: ModuleNotFoundError")
        for m in messages
    ), messages
    assert any("ep-not-a-factory" in m and "not a factory, an AlgorithmSpec or a module (got int)" in m for m in messages), messages
    assert len(messages) == 2
    assert {"ep-fedavg", "ep-registered-by-module"} <= set(known) and "fedavg" in known
    assert not {"ep-fedavg", "ep-registered-by-module"} & REGISTERED_HERE  # installed: every process (Flower's nodes too) loads them
    assert algorithm_registry.registered() is known  # once: no second round of warnings (pytest.warns is over)
    with pytest.raises(ConfigError, match=r"unknown algorithm 'ep-broken'.*\(entry point 'ep-broken = ep_missing_module:factory'"):
        algorithm_registry.algorithm_spec("ep-broken")
    with pytest.raises(ConfigError, match="'ep-fedavg' is already registered"):
        fedprior.register_algorithm("ep-fedavg", known["ep-fedavg"].factory)


def test_an_installed_algorithm_runs_from_the_cli_without_import(tmp_path):
    site = install_fake_package(tmp_path / "site")
    listed = fedprior_cli("algorithms", cwd=tmp_path, modules=site)
    assert listed.returncode == 0, listed.stderr
    assert "ep-fedavg: FedAvg with the unweighted mean" in listed.stdout and "ep-registered-by-module" in listed.stdout
    warnings = [line for line in listed.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and "'ep-broken = ep_missing_module:factory'" in warnings[0] + warnings[1], listed.stderr


def test_a_factory_without_a_docstring_is_listed_not_a_crash(tmp_path, monkeypatch, registry):
    """Issue 33 item 1: `fedprior algorithms --import m` read the first line of the factory's docstring, and one without crashed."""
    module = MODULE.replace('    """FedAvg with the unweighted mean of the client models as the server update."""\n', "")
    assert module != MODULE
    (tmp_path / "undocumented_algorithms.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("undocumented_algorithms", None)
    result = invoke("algorithms", "--import", "undocumented_algorithms")
    assert result.exit_code == 0, result.output
    assert "uniform-fedavg: uniform_fedavg (its factory has no docstring)" in result.stdout.splitlines()
    assert fedprior.list_algorithms()["uniform-fedavg"] == "uniform_fedavg (its factory has no docstring)"


def test_algorithm_replaces_the_presets_whole_algorithm_section(tmp_path, monkeypatch, registry):
    """Issue 33 item 6: --set algorithm.name=NAME keeps the preset's other algorithm keys, and the error says so and names --algorithm."""
    monkeypatch.syspath_prepend(str(write_module(tmp_path / "mods", "section_algorithms")))
    sys.modules.pop("section_algorithms", None)
    line = error_line(invoke("run", "fedavg-cnn", "--import", "section_algorithms", "--set", "algorithm.name=uniform-fedavg", "--dry-run"))
    assert line == (  # the preset sets model and lr; uniform-fedavg has an lr, not a model
        "error: algorithm.model: unknown key; accepted: lr, mix; algorithm.model comes from the preset 'fedavg-cnn', written for its "
        "algorithm 'fedavg' (--set algorithm.name changes only the name): give --algorithm uniform-fedavg instead, which replaces the "
        "whole [algorithm] section (then --set algorithm.KEY=VALUE sets its fields)"
    )

    shown = invoke("run", "fedavg-cnn", "--import", "section_algorithms", "--algorithm", "uniform-fedavg", "--set", "algorithm.mix=0.5", "--dry-run")
    assert shown.exit_code == 0, shown.output
    section = shown.stdout.split("[algorithm]\n")[1].split("\n\n")[0]
    assert section == 'name = "uniform-fedavg"\nlr = 0.05\nmix = 0.5', section  # the defaults but mix; none of fedavg's keys
    assert "`fedprior run fedavg-cnn --algorithm uniform-fedavg --set algorithm.mix=0.5 --import section_algorithms`" in shown.stdout
    assert 'imports = [\n    "section_algorithms",\n]' in shown.stdout  # the run needs the module that defines its algorithm

    plain = invoke("presets", "show", "fedavg-cnn", "--import", "section_algorithms")  # fedavg: the module is not needed
    assert plain.exit_code == 0 and "imports = []" in plain.stdout and 'imports = [\n    "section_algorithms"' not in plain.stdout
    mine = invoke("presets", "show", "fedavg-cnn", "--import", "section_algorithms", "--algorithm", "uniform-fedavg")
    assert mine.exit_code == 0 and 'imports = [\n    "section_algorithms",\n]' in mine.stdout and 'name = "uniform-fedavg"' in mine.stdout


@pytest.mark.slow
def test_a_resume_from_another_folder_finds_the_module_where_the_run_did_or_says_what_to_do(tmp_path):
    """Issue 33 item 6: my_algorithms.py in the folder the run started from (not on PYTHONPATH); the resume runs elsewhere."""
    start, elsewhere, run = tmp_path / "start", tmp_path / "elsewhere", tmp_path / "runs" / "mine"
    write_module(start, "folder_algorithms")
    (start / "mine.toml").write_text(CONFIG)
    elsewhere.mkdir()
    nothing = tmp_path / "nothing"  # PYTHONPATH holds no module of the test
    nothing.mkdir()
    stopped = fedprior_cli("run", "mine.toml", "--import", "folder_algorithms", "--run-dir", run, cwd=start, modules=nothing, STOP_AT_ROUND="2")
    assert stopped.returncode == 143, stopped.stderr
    recorded = json.loads((run / "imports.json").read_text())["modules"]["folder_algorithms"]
    assert recorded == {"file": str((start / "folder_algorithms.py").resolve()), "search_path": str(start.resolve())}

    resumed = fedprior_cli("resume", run, "--json", cwd=elsewhere, modules=nothing)
    assert len(history(resumed)) == 2
    assert f"warning: run.imports: module 'folder_algorithms' imported from {start.resolve()}, where the run found it" in resumed.stderr

    (start / "folder_algorithms.py").rename(tmp_path / "moved.py")
    gone = fedprior_cli("resume", run, cwd=elsewhere, modules=nothing)
    assert gone.returncode == 2 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr
    assert gone.stderr.startswith("error: run.imports: cannot import module 'folder_algorithms': not found on sys.path, in the working directory, ")
    assert f"where the run imported it from ({start.resolve() / 'folder_algorithms.py'})" in gone.stderr
    assert "run from the folder holding folder_algorithms.py or with PYTHONPATH=FOLDER set to it" in gone.stderr


def test_algorithms_name_shows_that_algorithm_alone():
    """Issue 46 item 7: `fedprior algorithms NAME` was refused; it shows NAME's line and hyperparameters, an unknown NAME is one line."""
    result = invoke("algorithms", "fedadam")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fedadam: FedAdam") and all(line.startswith("    ") for line in lines[1:])
    assert "    server_lr = 0.01  server learning rate eta" in " ".join(result.stdout.split("\n"))
    assert {line.split()[0] for line in lines[1:]} == set(ALGORITHMS["fedadam"].hyperparameters())
    line = error_line(invoke("algorithms", "fedadma"))
    assert line.startswith("error: NAME: unknown algorithm 'fedadma'; accepted: fedavg, fedprox, ") and "fedadam" in line


def test_a_module_that_exits_while_imported_is_one_error_line(tmp_path):
    (tmp_path / "exits.py").write_text("import sys\n\nsys.exit(3)\n")
    done = fedprior_command("algorithms", "--import", "exits", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: --import: importing module 'exits' called sys.exit(3); a module named here is imported, not run: "
        'put what runs as a script under `if __name__ == "__main__":`'
    )
