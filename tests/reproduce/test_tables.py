"""The paper tables as grids, and fedprior table end to end on a tiny setting."""

import json
import shutil
import signal

import pytest

from fedprior.errors import ConfigError, Interrupted
from fedprior.experiments.config import load_config
from fedprior.papers import all_tables, table_by_name
from fedprior.reproduce.tables import aggregate_table, cells
from tests.support.cli import STANDIN, error_line, fedprior, invoke, summary


def test_every_cell_of_every_table_is_a_valid_config():
    for table in all_tables().values():
        for embedded in (False, True):
            for cell in cells(table, embedded):
                load_config(cell.preset, cell.overrides)


def test_paper_setting_uses_clip_rn50_and_the_papers_datasets():
    grid = cells(table_by_name("fst-cbdg-table1"), embedded=False)
    assert len(grid) == 15
    first = next(c for c in grid if c.row == "FST-CBDG" and c.column == "CIFAR-100 iid")
    assert "encoder.name=openclip:RN50" in first.overrides and "data.dataset=cifar100" in first.overrides
    assert first.paper == 43.2


def test_embedded_setting_keeps_the_cifar10_columns_on_the_stand_in():
    grid = cells(table_by_name("fst-cbdg-table2"), embedded=True)
    assert {c.column for c in grid} == {"s=2", "s=3", "s=5", "s=10", "a=0.05", "a=0.1", "a=0.3", "a=0.5"}
    assert all("encoder.name=locked-text" in c.overrides and "data.dataset=fashion-mnist" in c.overrides for c in grid)
    paper = {(c.row, c.column): c.paper for c in grid}
    assert paper[("FedAvg", "s=2")] == 32.3 and paper[("FST-CBDG", "a=0.5")] == 72.4


def test_table_command_runs_every_cell(shared_cache, tmp_path):
    extra = [arg for o in [*STANDIN, "federation.num_clients=10", "federation.rounds=2"] for arg in ("--set", o)]
    rows = ["--rows", "Equal sampling,Balanced sampling"]
    result = fedprior(
        "table", "fst-cbdg-table4", "--embedded", *extra, *rows, "--seeds", "2", "--jobs", "1", "--out", str(tmp_path / "t"), "--json", cache=shared_cache
    )
    document = summary(result)
    cells_out = document["cells"]
    assert [(c["row"], c["column"]) for c in cells_out] == [
        ("Equal sampling", "s=10"),
        ("Equal sampling", "iid"),
        ("Balanced sampling", "s=10"),
        ("Balanced sampling", "iid"),
    ]
    for c in cells_out:
        assert len(c["finals"]) == 2 and abs(c["ours"] - sum(c["finals"]) / 2) < 0.01
    assert all({"row", "column", "ours", "paper"} <= c.keys() and 0 <= c["ours"] <= 100 for c in cells_out)
    assert [c["paper"] for c in cells_out] == [68.6, 68.6, 73.2, 74.0]
    assert (tmp_path / "t" / "table.md").is_file() and json.loads((tmp_path / "t" / "table.json").read_text()) == document
    assert [f["claim"] for f in document["findings"]] == ["Balanced > Equal sampling (s=10)", "Balanced > Equal sampling (iid)"]
    assert all(f["n"] == 2 and f["verdict"] in ("holds", "reversed", "not resolved") for f in document["findings"])
    assert {c["status"] for c in document["controls"]} == {"not run"}  # the control rows were left out
    assert "control not run at s=10, iid: CLIP-FC-Centralized at least 8 points above CLIP-ZS" in (tmp_path / "t" / "table.md").read_text()


def test_table_md_records_every_override_and_the_command(tmp_path):
    """A table whose cells ran with changed fields says which, in table.md and table.json (raw pixels: nothing trained)."""
    overrides = ["data.dataset=digits", "data.train_subset=200", "run.workers=1"]
    out = tmp_path / "t"
    result = invoke(
        "table", "mfcl-table2", "--embedded", "--rows", "raw pixels", "--columns", "Sc2", "--seeds", "1", "--jobs", "1",
        *(arg for o in overrides for arg in ("--set", o)), "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = (out / "table.md").read_text().splitlines()
    assert "overrides (--set, in every cell): `data.dataset=digits`, `data.train_subset=200`, `run.workers=1`  " in lines
    command = next(line for line in lines if line.startswith("command: "))
    assert command == (
        "command: `fedprior table mfcl-table2 --embedded --set data.dataset=digits --set data.train_subset=200 --set run.workers=1 "
        f"--rows 'raw pixels' --columns Sc2 --seeds 1 --jobs 1 --out {out}`"
    )
    assert lines.index(command) < lines.index("| method | Sc2 |")  # above the numbers it qualifies
    assert json.loads((out / "table.json").read_text())["overrides"] == overrides


def test_table_md_says_when_nothing_was_overridden():
    from fedprior.reproduce.table_page import code_span, markdown

    text = markdown("Toy", [], overrides=[])
    assert "overrides (--set, in every cell): none (every cell as its table defines it)" in text.splitlines()
    assert "overrides" not in markdown("Toy", [])  # a caller that does not say
    assert code_span("a=`b`") == "`` a=`b` ``"


def test_an_empty_rows_or_columns_selection_is_an_error_not_the_whole_grid():
    table = table_by_name("fst-cbdg-table2")
    with pytest.raises(ConfigError, match="--rows: no row named .*accepted: CLIP-ZS, CLIP-FC-Centralized, FedAvg, FedNTD, FST-CBDG"):
        cells(table, True, rows=[])
    with pytest.raises(ConfigError, match="--columns: no column named .*accepted: s=2, s=3"):
        cells(table, True, columns=[])
    assert len(cells(table, True, rows=None, columns=None)) == 40  # left out: all
    for option, value in (("--rows", ""), ("--columns", " , ")):
        result = invoke("table", "fst-cbdg-table2", "--embedded", option, value, "--set", "federation.rounds=0")  # (rounds: were it ignored, no grid runs)
        assert result.exit_code == 2
        assert error_line(result).startswith(f"error: {option}: no ")
    nothing = invoke("table", "fedbm-table3", "--embedded")  # none of its datasets is embedded
    assert nothing.exit_code == 2 and "fedbm-table3: no cell of this table runs in the embedded setting" in error_line(nothing)


def test_a_mistyped_command_suggests_the_right_one_once():
    result = invoke("compar")
    assert result.exit_code == 2
    assert result.output.count("Did you mean 'compare'?") == 1, result.output


GRID = ["fst-cbdg-table2", "--embedded", "--columns", "s=2", "--rows", "FedAvg,FedNTD,FST-CBDG", "--seeds", "1", "--jobs", "1"]
"""Three cells (FedAvg, FedNTD, FST-CBDG at s=2) of 2 rounds on the digits stand-in, one seed, in this process."""


def summary_of(result) -> list:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["cells"]


def grid_options():
    return [arg for o in [*STANDIN, "federation.num_clients=10", "federation.rounds=2", "run.workers=1"] for arg in ("--set", o)]


def test_a_stopped_table_continues_where_it_stopped(shared_cache, tmp_path, monkeypatch):
    """A SIGTERM in round 2 of the second cell; the same command then reuses the first, resumes the second, runs the third."""
    from fedprior.experiments import runner

    reference = summary_of(invoke("table", *GRID, "--rows", "FedNTD", *grid_options(), "--out", tmp_path / "ref", "--json", cache=shared_cache))
    out = tmp_path / "t"
    execute = runner.execute

    def stop_in_fedntd(name, config, run, **callbacks):
        def on_round(record):
            if record.get("step") == 1 and run.path.name.startswith("FedNTD"):
                raise Interrupted(signal.SIGTERM)

        return execute(name, config, run, **callbacks, on_round=on_round)

    monkeypatch.setattr(runner, "execute", stop_in_fedntd)
    stopped = invoke("table", *GRID, *grid_options(), "--out", out, "--json", cache=shared_cache)
    monkeypatch.setattr(runner, "execute", execute)
    assert stopped.exit_code == 128 + signal.SIGTERM, stopped.output
    again = f"fedprior table fst-cbdg-table2 --embedded {' '.join(grid_options())} --rows FedAvg,FedNTD,FST-CBDG --columns s=2 --seeds 1 --jobs 1 --out {out} --json"
    assert f"interrupted (SIGTERM); continue the table with `{again}`" in stopped.stderr
    assert "fedprior resume" not in stopped.stderr
    first, second = out / "FedAvg--s=2--seed0", out / "FedNTD--s=2--seed0"
    assert (first / "result.json").is_file() and (second / "checkpoint.safetensors").is_file() and not (second / "result.json").exists()
    third = out / "FST-CBDG--s=2--seed0"  # stopped before its first checkpoint: a folder with its config only
    third.mkdir()
    (third / "config.toml").write_text((second / "config.toml").read_text())
    finished = (first / "result.json").stat().st_mtime_ns

    result = invoke("table", *GRID, *grid_options(), "--out", out, "--json", cache=shared_cache)
    table = summary_of(result)
    flat = " ".join(result.stderr.split())  # the console wraps long lines
    assert f"continuing the table in {out}: 1 finished run(s) reused, 1 resumed" in flat
    assert flat.count(", reused)") == 1 and flat.count(", resumed)") == 1  # FedAvg, FedNTD; FST-CBDG ran
    assert (first / "result.json").stat().st_mtime_ns == finished
    assert [(c["row"], c["column"]) for c in table] == [("FedAvg", "s=2"), ("FedNTD", "s=2"), ("FST-CBDG", "s=2")]
    assert table[1]["finals"] == reference[0]["finals"] and table[1]["initial"] == reference[0]["initial"]
    resumed = json.loads((second / "result.json").read_text())
    assert resumed["history"] == json.loads((tmp_path / "ref" / "FedNTD--s=2--seed0" / "result.json").read_text())["history"]
    assert resumed["rounds"] == 2 and json.loads((third / "result.json").read_text())["rounds"] == 2
    assert json.loads((out / "table.json").read_text())["cells"] == table

    changed = invoke("table", *GRID, *grid_options(), "--set", "federation.rounds=3", "--out", out, cache=shared_cache)
    assert changed.exit_code == 2
    assert error_line(changed) == (
        f"error: --out: cell FedAvg / s=2 seed 0 ({first}) holds a run of another config: federation.rounds (2 there, 3 now); "
        "rerun the table with the settings it started with, or give another --out"
    )


def without_seconds(cells: list) -> list:
    return [{k: v for k, v in c.items() if k != "seconds"} for c in cells]


def test_jobs_give_the_serial_numbers_and_a_stopped_table_continues_in_processes(shared_cache, tmp_path):
    """Three seeds (the embedded default) of one cell: --jobs 2 gives --jobs 1's table; a table left as a kill leaves
    it (a run with a checkpoint but no result.json, a run with no folder) continues under --jobs 2, the finished run reused."""
    grid = ["fst-cbdg-table2", "--embedded", "--columns", "s=2", "--rows", "FedAvg", *grid_options()]
    serial = summary_of(invoke("table", *grid, "--jobs", "1", "--out", tmp_path / "serial", "--json", cache=shared_cache))
    assert len(serial) == 1 and len(serial[0]["finals"]) == 3
    out = tmp_path / "parallel"
    result = invoke("table", *grid, "--jobs", "2", "--out", out, "--json", cache=shared_cache)
    assert "1 cells x 3 seed(s), 2 at once" in " ".join(result.stderr.split())
    assert without_seconds(summary_of(result)) == without_seconds(serial)
    runs = [out / f"FedAvg--s=2--seed{seed}" for seed in range(3)]
    assert all("threads = 1" in (run / "config.toml").read_text() for run in runs)  # each process on one thread
    (runs[1] / "result.json").unlink()
    shutil.rmtree(runs[2])
    finished = (runs[0] / "result.json").stat().st_mtime_ns

    again = invoke("table", *grid, "--jobs", "2", "--out", out, "--json", cache=shared_cache)
    flat = " ".join(again.stderr.split())
    assert "continuing the table in" in flat and "1 finished run(s) reused, 1 resumed" in flat
    assert flat.count(", reused)") == 1 and flat.count(", resumed)") == 1 and flat.count("seed ") == 3  # one line per run
    assert (runs[0] / "result.json").stat().st_mtime_ns == finished
    assert without_seconds(summary_of(again)) == without_seconds(serial)


def test_a_table_whose_cells_break_a_cross_field_rule_is_refused_before_its_banner(tmp_path):
    out = tmp_path / "table"
    result = invoke("table", "fst-cbdg-table2", "--embedded", "--rows", "FedAvg", "--columns", "s=2", "--set", "run.precision=bf16", "--out", out)
    line = error_line(result)
    assert line.startswith("error: cell FedAvg / s=2: run.precision: model = 'linear' trains batched heads on features in fp32 only")
    assert result.stderr.strip() == line and not out.exists()


def test_a_paper_tables_numbers_say_their_unit():
    """table.json is read beside the paper's numbers (accuracy in %); each metric's scale says how it relates to result.json."""
    table = table_by_name("fst-cbdg-table2")
    summary = {"final_accuracy": 0.625, "best_accuracy": 0.75, "initial_accuracy": 0.1, "wall_seconds": 1.0}
    (first, *_) = aggregate_table(table, True, None, lambda cell, seed: summary)
    metric = first["metrics"][table.metrics[0]]
    assert metric["scale"] == 100.0 and metric["mean"] == 100 * summary[table.metrics[0]] == first["ours"]
