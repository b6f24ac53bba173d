"""fedprior run --seeds/--sweep: a grid of runs in one --out, continued after a stop, and compare on the folder."""

import json
import os
import signal
from pathlib import Path

import pytest

from fedprior.errors import ConfigError, Interrupted
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.experiments.sweep import Swept, parse_seeds, parse_sweep, points, split_values
from fedprior.results.compare import compare_runs
from tests.support.cli import TINY, error_line, invoke

GRID = ["run", "fedavg-cnn", *TINY, "--seeds", "2", "--sweep", "algorithm.lr=0.01,0.03"]
"""2 values x 2 seeds of a 2-round digits run (a second each)."""
FOLDERS = ["lr=0.01--seed0", "lr=0.01--seed1", "lr=0.03--seed0", "lr=0.03--seed1"]


def sweep_json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def histories(document: dict) -> dict:
    return {run["run_dir"].rsplit("/", 1)[-1]: run["summary"]["history"] for run in document["runs"]}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The grid run once, uninterrupted, in this process."""
    root = tmp_path_factory.mktemp("sweep")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FEDPRIOR_CACHE", str(root / "cache"))
        result = invoke(*GRID, "--out", root / "out", "--json")
    return root / "out", sweep_json(result), result


def test_a_sweep_runs_every_value_and_seed_in_its_own_folder(swept, tmp_path):
    out, document, result = swept
    assert [run["run_dir"] for run in document["runs"]] == [str(out / name) for name in FOLDERS]
    assert [(run["swept"], run["seed"], run["action"]) for run in document["runs"]] == [
        (["algorithm.lr=0.01"], 0, "run"),
        (["algorithm.lr=0.01"], 1, "run"),
        (["algorithm.lr=0.03"], 0, "run"),
        (["algorithm.lr=0.03"], 1, "run"),
    ]
    for name in FOLDERS:
        _, config = load_config(str(out / name / "config.toml"))
        assert (config.algorithm.lr, config.run.seed) == (float(name[3:7]), int(name[-1]))
        assert config.federation.rounds == 2 and (out / name / "result.json").is_file()
    flat = " ".join(result.stderr.split())
    assert "fedavg-cnn: 4 run(s) (2 algorithm.lr x 2 seed(s)), 1 at once" in flat
    assert "[1/4] lr=0.01 seed 0 running in" in flat and "[4/4 done] lr=0.03 seed 1: final accuracy" in flat
    # a run of the grid is the run `fedprior run` makes with that value and seed
    overrides = [o for o in TINY if o != "--set"]
    alone = start(*load_config("fedavg-cnn", [*overrides, "algorithm.lr=0.03", "run.seed=1"]), tmp_path / "alone")
    assert document["runs"][3]["summary"]["history"] == alone["history"]
    assert document["runs"][3]["summary"]["final_accuracy"] == alone["final_accuracy"]


def test_compare_on_the_sweep_folder_folds_the_seeds(swept, tmp_path):
    out, document, _ = swept
    comparison = compare_runs([out])
    assert [(g.label, g.seeds, len(g.runs)) for g in comparison.groups] == [("fedavg lr=0.01", [0, 1], 2), ("fedavg lr=0.03", [0, 1], 2)]
    assert comparison.paired  # seed s of both values: one partition
    finals = [run["summary"]["final_accuracy"] for run in document["runs"]]
    result = invoke("compare", out, "--json", "--plot", tmp_path / "c.png")
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["groups"]
    assert [(g["group"], g["n"], g["seeds"]) for g in groups] == [("fedavg lr=0.01", 2, [0, 1]), ("fedavg lr=0.03", 2, [0, 1])]
    assert [g["final_accuracy_mean"] for g in groups] == [pytest.approx(sum(finals[:2]) / 2), pytest.approx(sum(finals[2:]) / 2)]


def test_a_stopped_sweep_continues_in_the_same_out(swept, tmp_path, monkeypatch):
    """A SIGTERM in round 2 of the third run; the same command (with --jobs 2) reuses two, resumes one, runs one."""
    from fedprior.experiments import runner

    _, reference, _ = swept
    out = tmp_path / "out"
    execute = runner.execute

    def stop_in_the_third(name, config, run, **callbacks):
        def on_round(record):
            if record.get("step") == 1 and run.path.name == FOLDERS[2]:
                raise Interrupted(signal.SIGTERM)

        return execute(name, config, run, **callbacks, on_round=on_round)

    monkeypatch.setattr(runner, "execute", stop_in_the_third)
    stopped = invoke(*GRID, "--out", out)
    monkeypatch.setattr(runner, "execute", execute)
    assert stopped.exit_code == 128 + signal.SIGTERM, stopped.output
    again = f"fedprior run fedavg-cnn {' '.join(TINY)} --sweep algorithm.lr=0.01,0.03 --seeds 2 --jobs 1 --out {out}"
    assert f"interrupted (SIGTERM); continue the sweep with `{again}`" in stopped.stderr
    assert [(out / name / "result.json").is_file() for name in FOLDERS] == [True, True, False, False]
    assert (out / FOLDERS[2] / "checkpoint.safetensors").is_file() and not (out / FOLDERS[3]).exists()
    finished = (out / FOLDERS[0] / "result.json").stat().st_mtime_ns

    result = invoke(*GRID, "--jobs", "2", "--out", out, "--json")
    document = sweep_json(result)
    assert "continuing the sweep in" in result.stderr and "2 finished run(s) reused, 1 resumed" in " ".join(result.stderr.split())
    assert [run["action"] for run in document["runs"]] == ["reused", "reused", "resumed", "run"]
    assert (out / FOLDERS[0] / "result.json").stat().st_mtime_ns == finished
    assert histories(document) == histories(reference)  # the numbers of the uninterrupted sweep

    changed = invoke(*GRID, "--set", "federation.rounds=3", "--out", out)
    assert error_line(changed) == (
        f"error: --out: run {FOLDERS[0]} ({out / FOLDERS[0]}) holds a run of another config: federation.rounds (2 there, 3 now); "
        "rerun the sweep with the settings it started with, or give another --out"
    )


def test_dry_run_lists_the_grid_and_writes_nothing(tmp_path):
    result = invoke("run", "fedavg-cnn", *TINY, "--seeds", "0,3", "--sweep", "algorithm.lr=0.01,0.03", "--out", tmp_path / "o", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [
        str(tmp_path / "o" / n) for n in ("lr=0.01--seed0", "lr=0.01--seed3", "lr=0.03--seed0", "lr=0.03--seed3")
    ]
    assert lines[1].endswith(" algorithm.lr=0.01 run.seed=3)") and all(": run (" in line for line in lines)
    assert not (tmp_path / "o").exists()


def test_seeds_alone_name_the_folders_by_seed(tmp_path):
    result = invoke("run", "fedavg-cnn", *TINY, "--seeds", "7,", "--out", tmp_path / "o", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"{tmp_path / 'o' / 'seed7'}: run ({' '.join(o for o in TINY if o != '--set')} run.seed=7)"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--seeds", "0"], "--seeds '0': the count must be at least 1"),
        (["--seeds", "1,x"], "--seeds '1,x': expected a count N"),
        (["--seeds", "1,1"], "--seeds '1,1': seed(s) 1 given twice"),
        (["--sweep", "run.seed=1,2"], "--sweep run.seed: give the seeds with --seeds"),
        (["--sweep", "algorithm.lr=0.1,,0.2"], "--sweep 'algorithm.lr=0.1,,0.2': an empty value"),
        (["--sweep", "algorithm.lr=0.1", "--sweep", "algorithm.lr=0.2"], "--sweep: algorithm.lr swept twice"),
        (["--sweep", "algorithm.lr=0.1,0.2", "--set", "algorithm.lr=0.3"], "--sweep algorithm.lr and --set algorithm.lr"),
        (["--seeds", "2", "--set", "run.seed=4"], "--seeds and --set run.seed"),
        (["--seeds", "2", "--run-dir", "x"], "--run-dir names one run; with --seeds or --sweep give --out"),
        (["--out", "x"], "--out is for a grid of runs (--seeds, --sweep)"),
        (["--sweep", "algorithm.lr=a b,0.2"], "algorithm.lr"),
        (["--sweep", "algo.lr=0.1,0.2"], "--sweep 'algo.lr=0.1,0.2': unknown section 'algo'; accepted: data"),
    ],
)
def test_a_bad_grid_is_one_line_before_anything_runs(options, message, tmp_path):
    result = invoke("run", "fedavg-cnn", *TINY, *options)
    assert message in error_line(result)


def test_seeds_and_values_are_parsed_as_written():
    assert parse_seeds("3") == [0, 1, 2] and parse_seeds("0,3,5") == [0, 3, 5] and parse_seeds("7,") == [7]
    assert split_values("[1, 2],[3,4], 'a,b'") == ["[1, 2]", "[3,4]", "'a,b'"]
    assert parse_sweep("partition.alpha=0.1,0.5") == Swept("partition.alpha", ("0.1", "0.5"))
    with pytest.raises(ConfigError, match="the key must be section.key"):
        parse_sweep("lr=0.1,0.2")
    grid = points([Swept("algorithm.lr", ("0.1", "0.2")), Swept("partition.lr", ("1",)), Swept("federation.rounds", ("2",))])
    assert [p.label for p in grid] == [
        "algorithm.lr=0.1--partition.lr=1--rounds=2",  # two swept keys end in lr: named in full
        "algorithm.lr=0.2--partition.lr=1--rounds=2",
    ]
    assert grid[1].overrides == ["algorithm.lr=0.2", "partition.lr=1", "federation.rounds=2"]


def test_compare_reads_a_folder_of_runs_in_the_order_of_their_values(tmp_path):
    from fedprior.results.compare import run_folders

    names = ["lr=0.2--seed10", "lr=0.2--seed2", "lr=0.05--seed1", "lr=1e-3--seed0"]
    for name in names:
        (tmp_path / "out" / name).mkdir(parents=True)
        (tmp_path / "out" / name / "config.toml").write_text("")
    (tmp_path / "out" / "notes").mkdir()  # no run: left out
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.toml").write_text("")  # a run directory: as it is
    assert [p.name for p in run_folders([tmp_path / "out", tmp_path / "run"])] == ["lr=1e-3--seed0", "lr=0.05--seed1", "lr=0.2--seed2", "lr=0.2--seed10", "run"]


@pytest.mark.parametrize(
    "command, what",
    [(["table", "fst-cbdg-table1", "--embedded"], "table"), (["run", "fedavg-cnn", *TINY, "--seeds", "2"], "sweep")],
    ids=["table", "sweep"],
)
def test_out_naming_a_file_is_blamed_on_out_before_anything_is_printed(tmp_path, command, what):
    taken = tmp_path / "taken.txt"
    taken.write_text("not a folder")
    for out in (taken, taken / "below"):
        result = invoke(*command, "--out", out)
        line = f"error: --out: {taken} is a file, not a folder; give a new folder, or the folder of a stopped {what} to continue it"
        assert error_line(result) == line and result.stderr.strip() == line  # no banner, no run started


def test_sweeping_algorithm_names_whose_fields_differ_points_to_a_config_per_algorithm():
    line = error_line(invoke("run", "fedavg-cnn", *TINY, "--sweep", "algorithm.name=fedavg,fedntd", "--dry-run"))
    assert line.endswith(
        "algorithm.model comes from the preset 'fedavg-cnn', written for its algorithm 'fedavg' (--sweep algorithm.name changes only the name): "
        "write a config for fedntd (fedprior presets show fedavg-cnn --algorithm fedntd > fedntd.toml) and run it on its own, "
        "or sweep only names that take these fields"
    )


@pytest.mark.parametrize(
    "option, message",
    [
        (["--seeds", "99999999999999999999"], "--seeds '99999999999999999999': a count of at most 10,000 seeds (one run each)"),
        (["--sweep", "=1,2"], "--sweep '=1,2': no field name before '='; give section.key=value1,value2,..."),  # probe 4 note 93
    ],
)
def test_a_huge_seed_count_and_a_sweep_without_key_are_one_line_quoting_what_was_given(tmp_path, option, message):
    assert error_line(invoke("run", "fedavg-cnn", *TINY, *option, "--out", tmp_path / "grid")).startswith(f"error: {message}")


@pytest.mark.parametrize("command, what", [(["table", "fst-cbdg-table2", "--embedded"], "table"), (["run", "fedavg-cnn", *TINY, "--seeds", "2"], "sweep")])
def test_an_out_that_is_a_run_folder_or_cannot_be_created_is_refused_naming_out(tmp_path, command, what):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text("")
    result = invoke(*command, "--out", run)
    assert error_line(result) == (
        f"error: --out: {run} is the folder of one run (it holds config.toml); the {what}'s runs each get a folder inside --out: "
        f"give a new folder, or the folder of a stopped {what} to continue it"
    )
    assert result.stderr.strip() == error_line(result)
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    blocked.chmod(0o555)
    unwritable = Path("/proc/1") if os.access(blocked, os.W_OK) else blocked  # root writes anywhere but into /proc
    result = invoke(*command, "--out", unwritable / "new")
    assert (
        error_line(result)
        == f"error: --out: cannot create {unwritable / 'new'}: {unwritable} is not writable (a read-only file system, or another user's folder)"
    )
    assert result.stderr.strip() == error_line(result)  # no banner, no run started
    result = invoke(*command, "--out", unwritable)  # probe 5 #14: an existing read-only --out failed after `[1/1] ... running`, naming --run-dir
    assert error_line(result) == (
        f"error: --out: {unwritable} is not writable (a read-only file system, or another user's folder), and the {what}'s runs make their "
        "folders in it; give another --out"
    )
    assert result.stderr.strip() == error_line(result)


def test_algorithm_with_seeds_and_sweep_runs_that_algorithm_in_every_run(tmp_path, monkeypatch):
    """``--algorithm`` with ``--seeds``/``--sweep``, the path users take to sweep their own algorithm (issue 56 item 3): each run's
    config holds the algorithm and its swept value, and the command that continues the grid names it."""
    from fedprior.cli.sweep import command_line

    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    options = ["run", "fedavg-cnn", *TINY, "--set", "federation.rounds=1", "--algorithm", "fedprox", "--seeds", "1", "--sweep", "algorithm.mu=0.01,0.1"]
    result = invoke(*options, "--out", tmp_path / "out", "--json")
    runs = sweep_json(result)["runs"]
    assert [Path(run["run_dir"]).name for run in runs] == ["mu=0.01--seed0", "mu=0.1--seed0"]
    for run, mu in zip(runs, (0.01, 0.1), strict=True):
        config = load_config(str(Path(run["run_dir"]) / "config.toml"))[1]
        assert (config.algorithm.name, config.algorithm.hyperparameters()["mu"]) == ("fedprox", mu)
    again = command_line("fedavg-cnn", [], ["algorithm.mu=0.01,0.1"], "1", tmp_path / "out", 1, [], "fedprox")
    assert " --algorithm fedprox " in again
