"""A config that two cells of a table share trains once (``table_runs.twins``, ``copy_twin``): MFCL's central rows clear
the column's scenario, so ``Central FedSimCLR`` is the same run in every column."""

from __future__ import annotations

import json

from fedprior.experiments.config import load_config
from fedprior.experiments.run_config import write_config
from fedprior.experiments.table_runs import COPIED, REUSED, RUN, CellRun, copy_twin, plan_cell, twins
from fedprior.papers import table_by_name
from fedprior.reproduce.tables import cells
from fedprior.results.run_dir import RunDir


def planned(folder, rows: list[str], seeds=(0,)) -> list[CellRun]:
    out = []
    for cell in cells(table_by_name("mfcl-table2"), embedded=True, rows=rows, columns=["Sc2", "Sc10"]):
        for seed in seeds:
            name, config = load_config(cell.preset, [*cell.overrides, f"run.seed={seed}"])
            out.append(plan_cell(folder, cell, seed, name, config))
    return out


def test_central_cells_of_two_columns_are_twins_and_federated_ones_or_other_seeds_are_not(tmp_path):
    runs = planned(tmp_path, ["Central FedSimCLR", "FedSimCLR"], seeds=(0, 1))
    labels = [(r.cell.row, r.cell.column, r.seed) for r in runs]
    found = {labels[i]: labels[j] for i, j in twins(runs).items()}
    assert found == {
        ("Central FedSimCLR", "Sc10", 0): ("Central FedSimCLR", "Sc2", 0),
        ("Central FedSimCLR", "Sc10", 1): ("Central FedSimCLR", "Sc2", 1),
    }


def test_a_twin_copies_a_finished_run_even_when_the_finished_one_comes_later(tmp_path):
    first, second = planned(tmp_path, ["Central FedSimCLR"])
    assert (first.action, second.action) == (RUN, RUN)
    second.path.mkdir(parents=True)
    write_config(RunDir(second.path), second.name, second.config)
    (second.path / "result.json").write_text(json.dumps({"initial_accuracy": 0.5, "final_accuracy": 0.7, "run_dir": str(second.path)}))
    finished = CellRun(second.cell, second.seed, second.name, second.config, second.path, REUSED, {"final_accuracy": 0.7})
    runs = [first, finished]
    assert twins(runs) == {0: 1}
    copied = copy_twin(finished, first)
    assert copied.action == COPIED and copied.result["final_accuracy"] == 0.7
    saved = json.loads((first.path / "result.json").read_text())
    assert saved["run_dir"] == str(first.path) and saved["final_accuracy"] == 0.7
    again = plan_cell(tmp_path, first.cell, 0, first.name, first.config)  # the copy is a finished run of this cell's config
    assert again.action == REUSED


def test_a_tables_runs_go_resumed_first_then_seed_by_seed_across_cells():
    """A table stopped part-way has the same seeds of every cell (a paired claim gains each seed both cells finished)."""
    from types import SimpleNamespace

    from fedprior.experiments.table_runs import RESUMED, run_order

    def run(row: str, seed: int, action: str = RUN) -> SimpleNamespace:
        return SimpleNamespace(cell=SimpleNamespace(row=row, column="c"), seed=seed, action=action)

    runs = [run("A", 0, REUSED), run("A", 1), run("A", 2), run("B", 0), run("B", 1, RESUMED), run("B", 2), run("C", 1)]
    assert [f"{r.cell.row}{r.seed}" for r in sorted(runs, key=run_order)] == ["B1", "A0", "B0", "A1", "C1", "A2", "B2"]


def test_reproduce_table_hands_its_runs_over_seed_by_seed(tmp_path, monkeypatch):
    from fedprior.experiments import table_runs
    from fedprior.reproduce.pipeline import reproduce_table

    handed: list[tuple[str, str, int]] = []

    def capture(runs, jobs, on_done, on_start=None):
        handed.extend((r.cell.row, r.cell.column, r.seed) for r in runs)
        raise KeyboardInterrupt  # nothing trains

    monkeypatch.setattr(table_runs, "execute_runs", capture)
    try:
        reproduce_table("fst-cbdg-table1", embedded=True, seeds=2, rows=["CLIP-ZS", "FedAvg"], out=tmp_path / "t", jobs=1)
    except KeyboardInterrupt:
        pass
    assert [seed for _, _, seed in handed] == [0, 0, 1, 1] and [row for row, _, _ in handed] == ["CLIP-ZS", "FedAvg"] * 2
