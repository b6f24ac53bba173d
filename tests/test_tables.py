"""The paper tables as grids, and fedprior table end to end on a tiny setting."""

from cli import fedprior, summary
from conftest import STANDIN

from fedprior.experiments.config import load_config
from fedprior.experiments.tables import cells
from fedprior.papers import all_tables, table_by_name


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
    result = fedprior("table", "fst-cbdg-table4", "--embedded", *extra, "--seeds", "2", "--out", str(tmp_path / "t"), "--json", cache=shared_cache)
    cells_out = summary(result)
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
    assert (tmp_path / "t" / "table.md").is_file() and (tmp_path / "t" / "table.json").is_file()
