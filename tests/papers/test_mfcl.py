"""MFCL's paper package: scenarios by name, the embedded subset, Table 8's formula and measurement, the grids, the report."""

import json

import numpy as np
import pytest

from fedprior.errors import ConfigError
from fedprior.experiments.config import load_config
from fedprior.papers import table_by_name
from fedprior.papers.mfcl import communication
from fedprior.partition.scenarios import scenario
from fedprior.partition.subset import balanced_subset
from fedprior.reproduce.tables import aggregate_table, cells

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------- scenarios and the embedded subset


def test_scenarios_by_name():
    assert (scenario("Sc1").window, scenario("sc10").window, scenario("Sc2").num_clients) == (1, 10, 10)
    named = scenario("Sc70")
    assert (named.name, named.window, named.num_clients, named.num_classes, named.table) == ("Sc70", 60, 100, 100, "Table 4")
    assert scenario("Sc110").window == 100 and scenario("Sc11").window == 1
    for bad in ("Sc0", "Sc111", "S2", "two"):
        with pytest.raises(ConfigError, match="partition.scenario: unknown scenario"):
            scenario(bad)


def test_scenario_in_a_config_sets_the_window_and_checks_the_clients():
    _, config = load_config("mfcl")
    assert (config.partition.scheme, config.partition.window, config.partition.scenario) == ("window", 2, "Sc2")
    _, config = load_config("mfcl", ["partition.scenario=Sc5"])
    assert config.partition.window == 5
    with pytest.raises(ConfigError, match=r"partition.scenario: Sc12 is defined for 100 clients \(the MFCL paper's Table 4\); federation.num_clients is 10"):
        load_config("mfcl", ["partition.scenario=Sc12"])
    _, config = load_config("mfcl", ['partition.scenario=""', "partition.scheme=iid", "federation.num_clients=7"])
    assert config.partition.scenario is None and config.partition.scheme == "iid"


def test_a_scenario_needs_its_number_of_classes():
    from fedprior.experiments.build import build_experiment

    name, config = load_config("mfcl", ["partition.scenario=Sc11", "federation.num_clients=100", "data.dataset=digits", "data.train_subset=0"])
    with pytest.raises(ConfigError, match="Sc11 is defined on 100 classes.*digits has 10"):
        build_experiment(name, config)


def test_balanced_subset():
    labels = np.repeat(np.arange(4), [10, 20, 3, 30])
    pool = np.arange(labels.size)
    chosen = balanced_subset(labels, pool, 21, seed=1)  # 5 per class; class 2 has only 3
    assert np.bincount(labels[chosen]).tolist() == [5, 5, 3, 5]
    assert np.array_equal(chosen, np.sort(chosen)) and np.array_equal(chosen, balanced_subset(labels, pool, 21, seed=1))
    assert not np.array_equal(chosen, balanced_subset(labels, pool, 21, seed=2))
    with pytest.raises(ConfigError, match="data.train_subset: 3 images cannot hold one of each of the 4 classes"):
        balanced_subset(labels, pool, 3, seed=0)


# ---------------------------------------------------------------- Table 8


def test_table_8_formula_reproduces_the_papers_phase_1_rows_and_fedsimclr():
    for method in ("FedSimCLR", "MFCL"):
        ours, printed = communication.paper_formula(method), communication.PAPER[method]
        for row in ("params_per_round", "bits_per_round", "phase1_bits"):
            assert ours[row] == pytest.approx(printed[row], rel=0.1), (method, row)  # printed to 2 digits
    # FedSimCLR: 2 x 11e6 x 96 bits per round (20e8), x 800 rounds (16e11), x 10 clients (16e12).
    fedsimclr = communication.paper_formula("FedSimCLR")
    assert fedsimclr["bits_per_round"] == 2 * 11e6 * 96 and fedsimclr["total_bits"] == pytest.approx(16e12, rel=0.1)


def test_table_8_phase_2_rows_do_not_follow_from_the_papers_sizes():
    # 5,000 samples x 32 x 32 x 64 elements x 96 bits = 3.1e10, printed 30e10; the printed total follows the printed row.
    mfcl = communication.paper_formula("MFCL")
    assert mfcl["rep_bits"] == 5000 * 32 * 32 * 64 * 96
    assert communication.PAPER["MFCL"]["rep_bits"] / mfcl["rep_bits"] == pytest.approx(9.5, rel=0.05)
    assert communication.PAPER["MFCL"]["total_bits"] == pytest.approx(10 * communication.PAPER["MFCL"]["rep_bits"], rel=0.01)


def test_table_8_measured_from_a_summary():
    summary = {
        "algorithm": "mfcl",
        "num_clients": 2,
        "stage_communication": {
            "sensor": {"participations": 4, "download_bytes": 4 * 400, "upload_bytes": 4 * 400},
            "upload": {"participations": 2, "download_bytes": 2 * 100, "upload_bytes": 3000 + 1000},
            "server": {"participations": 0, "download_bytes": 0, "upload_bytes": 0},
        },
    }
    rows = communication.measured(summary)
    assert rows["params_per_round"] == 100  # 400 bytes of 32-bit numbers
    assert rows["bits_per_round"] == 800 * 24  # both ways, 8 bits x 3 (code rate 1/3) a byte
    assert rows["phase1_bits"] == 3200 / 2 * 24 and rows["rep_elements"] == 4000 / 2 / 4 and rows["rep_bits"] == 2000 * 24
    assert rows["total_bits"] == (3200 + 200 + 4000) * 24
    fedsimclr = communication.measured({**summary, "algorithm": "fedsimclr", "stage_communication": {"federated": summary["stage_communication"]["sensor"]}})
    assert fedsimclr["rep_bits"] == 0 and fedsimclr["total_bits"] == 3200 * 24


# ---------------------------------------------------------------- the grids


def test_table_2_grid_and_paper_numbers():
    table = table_by_name("mfcl-table2")
    embedded = cells(table, embedded=True)
    # 16 rows, the two central controls (issue 31) and the two matched in the federation's sequential steps (issue 44)
    assert {c.column for c in embedded} == {"Sc1", "Sc2", "Sc5", "Sc10"} and len(embedded) == 4 * 20
    # Issue 18's control rows: each norm's network untrained, raw pixels, the sensor's representations trained or not.
    controls = {c.row: load_config(c.preset, c.overrides)[1] for c in embedded if c.column == "Sc2" and c.paper is None}
    assert set(controls) == {f"{r} untrained" for r in ("MFCL(PN)", "MFCL(GN)", "MFCL(BN)", "FedSimCLR")} | {
        "raw pixels",
        "MFCL(PN) sensor",
        "MFCL(PN) sensor untrained",
        "Central MFCL(PN)",
        "Central FedSimCLR",
        "Central MFCL(PN) (sequential steps)",
        "Central FedSimCLR (sequential steps)",
    }
    assert controls["Central MFCL(PN)"].federation.num_clients == 1 and controls["Central FedSimCLR"].partition.scenario is None
    assert controls["raw pixels"].algorithm.name == "raw-pixels" and controls["MFCL(BN) untrained"].algorithm.hyperparameters()["norm"] == "bn"
    sensor = controls["MFCL(PN) sensor"]
    assert sensor.algorithm.hyperparameters()["eval_features"] == "sensor" and sensor.federation.rounds == 15
    assert controls["MFCL(PN) sensor untrained"].federation.rounds == 0
    assert {(c.above, c.below, c.margin) for c in table.controls} == {
        ("MFCL(PN)", "MFCL(PN) untrained", 5.0),
        ("FedSimCLR", "FedSimCLR untrained", 5.0),
        ("Central MFCL(PN)", "MFCL(PN) untrained", 5.0),
        ("Central FedSimCLR", "FedSimCLR untrained", 5.0),
        ("Central MFCL(PN) (sequential steps)", "MFCL(PN) untrained", 5.0),
        ("Central FedSimCLR (sequential steps)", "FedSimCLR untrained", 5.0),
        ("MFCL(BN)", "MFCL(BN) untrained", 5.0),  # every compared self-supervised row its own control (issue 52)
        ("MFCL(GN)", "MFCL(GN) untrained", 5.0),
        ("FedAvg", "raw pixels", 0.0),  # supervised FedAvg at least the raw pixels' probe
    }
    claimed = {(c.better, c.worse, c.column) for c in table.claims}
    for sc in ("Sc1", "Sc2"):  # the claims issue 18 lists
        assert {("MFCL(PN)", w, f"CIFAR-10 {sc}") for w in ("MFCL(GN)", "MFCL(BN)", "FedSimCLR")} <= claimed
    untrained = next(c for c in embedded if c.row == "MFCL(PN) untrained" and c.column == "Sc2")
    hyper = load_config(untrained.preset, untrained.overrides)[1]
    assert hyper.federation.rounds == 0 and hyper.algorithm.hyperparameters()["server_epochs"] == 0 and untrained.paper is None
    mfcl_sc2 = next(c for c in embedded if c.row == "MFCL(PN)" and c.column == "Sc2")
    assert mfcl_sc2.paper == 84 and mfcl_sc2.preset == "mfcl" and "partition.scenario=Sc2" in mfcl_sc2.overrides
    assert next(c for c in embedded if c.row == "MFCL(BN)" and c.column == "Sc1").paper == 10
    real = cells(table, embedded=False, rows=["MFCL(PN)", "FedSimCLR"])
    assert len(real) == 20 and {c.row for c in real} == {"MFCL(PN)", "FedSimCLR"}
    pn = next(c for c in real if c.row == "MFCL(PN)" and c.column == "CIFAR-10 Sc10")
    assert "data.dataset=cifar10" in pn.overrides and "algorithm.sensor_width=64" in pn.overrides and pn.paper == 85
    for cell in [*embedded, *real]:
        load_config(cell.preset, cell.overrides)  # every cell is a valid config
    with pytest.raises(ConfigError, match="--rows: unknown row.*accepted: FedAvg"):
        cells(table, embedded=True, rows=["MFCL"])
    two = cells(table, embedded=True, rows=["MFCL(PN)"], columns=["Sc10", "Sc2"])
    assert [c.column for c in two] == ["Sc2", "Sc10"]
    with pytest.raises(ConfigError, match="--columns: unknown column.*'Sc3'.*accepted: Sc1, Sc2, Sc5, Sc10"):
        cells(table, embedded=True, columns=["Sc3"])


def test_table_3_embedded_columns_keep_the_class_fraction():
    table = table_by_name("mfcl-table3")
    embedded = cells(table, embedded=True, rows=["MFCL(PN)"])
    assert [c.column for c in embedded] == ["W=1/10, M=100 (as Sc11)", "W=2/10, M=100 (as Sc30)", "W=6/10, M=100 (as Sc70)", "W=10/10, M=100 (as Sc110)"]
    _, config = load_config(embedded[2].preset, embedded[2].overrides)
    assert (config.partition.scheme, config.partition.window, config.federation.num_clients) == ("window", 6, 100)
    real = cells(table, embedded=False, rows=["MFCL(PN)"])
    _, config = load_config(real[0].preset, real[0].overrides)
    assert (config.data.dataset, config.partition.window, config.federation.num_clients) == ("cifar100", 1, 100)
    assert real[0].paper == 43


def test_table_7_has_its_controls_and_the_claims_of_appendix_d3():
    table = table_by_name("mfcl-table7")
    embedded = cells(table, embedded=True)
    rows = {c.row for c in embedded}
    assert {"MFCL (PN) untrained", "FedSimCLR (BN) untrained", "raw pixels", "MFCL (PN) sensor", "FedAvg (supervised)"} <= rows
    for cell in embedded:
        load_config(cell.preset, cell.overrides)
    assert {(c.above, c.below) for c in table.controls} == {
        ("MFCL (PN)", "MFCL (PN) untrained"),
        ("FedSimCLR (BN)", "FedSimCLR (BN) untrained"),
        ("Central MFCL (PN)", "MFCL (PN) untrained"),
        ("Central FedSimCLR (BN)", "FedSimCLR (BN) untrained"),
        ("Central MFCL (PN) (sequential steps)", "MFCL (PN) untrained"),
        ("Central FedSimCLR (BN) (sequential steps)", "FedSimCLR (BN) untrained"),
        ("MFCL (BN)", "MFCL (BN) untrained"),  # every compared self-supervised row its own control (issue 52)
        ("MFCL (GN)", "MFCL (GN) untrained"),
        ("FedSimCLR (GN)", "FedSimCLR (GN) untrained"),
        ("FedSimCLR (PN)", "FedSimCLR (PN) untrained"),
    }
    claimed = {(c.better, c.worse, c.column) for c in table.claims}
    for sc in ("Sc2", "Sc10"):
        column = f"CIFAR-10 {sc}"
        assert {("FedSimCLR (PN)", "FedSimCLR (BN)", column), ("FedSimCLR (PN)", "FedSimCLR (GN)", column), ("MFCL (PN)", "FedSimCLR (PN)", column)} <= claimed
    assert ("MFCL (PN)", "MFCL (GN)", "CIFAR-10 Sc2") in claimed and ("MFCL (PN)", "MFCL (BN)", "CIFAR-10 Sc2") in claimed
    real = {c.row for c in cells(table, embedded=False)}
    assert "MFCL (PN) sensor" not in real and "raw pixels" in real  # the sensor rows are embedded only (3.3 GB of features at full size)


def test_table_8_grid_reports_bits_from_derived_metrics():
    table = table_by_name("mfcl-table8")
    assert table.metrics[0] == "total_bits" and table.scales["total_bits"] == 1.0

    def fake_run(cell, seed):
        algorithm = "mfcl" if cell.row == "MFCL" else "fedsimclr"
        stage = "sensor" if algorithm == "mfcl" else "federated"
        return {
            "algorithm": algorithm,
            "num_clients": 10,
            "initial_accuracy": 0.1,
            "wall_seconds": 1.0,
            "stage_communication": {stage: {"participations": 10, "download_bytes": 1000, "upload_bytes": 1000}},
        }

    results = aggregate_table(table, True, None, fake_run)
    mfcl = next(r for r in results if r["row"] == "MFCL")
    assert mfcl["ours"] == 2000 * 24 and mfcl["paper"] == 30e11
    assert mfcl["metrics"]["bits_per_round"]["mean"] == 200 * 24 and mfcl["metrics"]["rep_bits"]["paper"] == 30e10
    assert mfcl["metrics"]["bits_per_round"]["scale"] == 1.0  # bits as counts, as the paper prints them


# ---------------------------------------------------------------- a whole run with its report


def test_mfcl_run_report_has_figures_6_7_and_table_8(tmp_path, monkeypatch):
    from fedprior.experiments.runner import start
    from fedprior.papers.mfcl import report

    monkeypatch.setattr(report, "TSNE_POINTS", 60)
    monkeypatch.setattr(report, "DROPS", (0.5,))
    name, config = load_config(
        "mfcl",
        [
            "data.dataset=digits",
            "data.train_subset=300",
            "algorithm.sensor_width=4",
            "algorithm.disc_width=4",
            "algorithm.projection_dim=8",
            "algorithm.server_epochs=1",
            "federation.rounds=1",
            "run.threads=1",
        ],
    )
    summary = start(name, config, tmp_path / "run")
    folder = tmp_path / "run"
    text = (folder / "report.md").read_text()
    assert (folder / "figure6_tsne.png").stat().st_size > 5000 and (folder / "figure7_drop.png").stat().st_size > 5000
    assert "Communication burden (Table 8)" in text and "Figure 7" in text
    assert set(summary["figure7"]) == {"0.0", "0.5"} and all(0 <= a <= 1 for a in summary["figure7"].values())
    assert summary["figure7"]["0.0"] == summary["final_accuracy"]
    measured, formula = summary["table8"]["measured"], summary["table8"]["formula"]
    # PN has no integer buffers: the bytes shipped in phase 1 are exactly the formula's 32-bit numbers, both ways.
    assert measured["bits_per_round"] == formula["bits_per_round"] and measured["phase1_bits"] == formula["phase1_bits"]
    assert measured["rep_bits"] == pytest.approx(formula["rep_bits"])  # two views of every image, 4 x 4 x 4 numbers each
    assert summary["stage_communication"]["server"] == {"participations": 0, "download_bytes": 0, "upload_bytes": 0}
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in records] == ["sensor", "upload", "server"]


def test_table_8_prints_bits_in_three_digits():
    from fedprior.reproduce.table_page import markdown

    results = [
        {
            "row": "MFCL",
            "column": "Sc2",
            "ours": 2.88e8,
            "std": 0.0,
            "paper": 30e11,
            "seeds": 1,
            "metrics": {"total_bits": {"mean": 2.88e8, "std": 0.0, "paper": 30e11}, "rep_bits": {"mean": 1.23e7, "std": 0.0, "paper": None}},
        }
    ]
    text = markdown("Table 8", results)
    assert "| MFCL | 2.88e+08 (3e+12) | 1.23e+07 (-) |" in text


def test_fedsimclr_runs_its_800_rounds_in_every_paper_setting_table():
    """Appendix D.4: "FedSimCLR needs 800 FL rounds to achieve the reported accuracy in Table 2" (Table 3: "other settings are
    the same as in Table 2"; Table 7's FedSimCLR is Table 2's); the embedded grids keep the presets' 15, untrained rows 0."""
    for name in ("mfcl-table2", "mfcl-table3", "mfcl-table7", "mfcl-table8"):
        table = table_by_name(name)
        real = {c.row: load_config(c.preset, c.overrides)[1] for c in cells(table, embedded=False)}
        simclr = [row for row in real if row.startswith("FedSimCLR")]
        assert simclr, name
        for row in simclr:
            assert real[row].federation.rounds == (0 if row.endswith("untrained") else 800), (name, row)
        for row in ("FedSwAV", "Orchestra", "FedAvg", "MFCL(PN)", "MFCL (PN)", "MFCL"):
            if row in real:
                assert real[row].federation.rounds == 15, (name, row)
        embedded = {c.row: load_config(c.preset, c.overrides)[1] for c in cells(table, embedded=True)}
        assert all(embedded[row].federation.rounds == 15 for row in embedded if row.startswith("FedSimCLR") and not row.endswith("untrained"))
