"""FedBM's tables (both settings resolve to the right cells) and its report's generated-image grid."""

from __future__ import annotations

import torch

from fedprior.algorithms import fedbm as fedbm_module
from fedprior.experiments.config import load_config
from fedprior.experiments.runner import start
from fedprior.papers import table_by_name
from fedprior.reproduce.tables import cells


def test_paper_setting_cells_carry_the_datasets_settings_and_fedbms_tuned_values():
    grid = cells(table_by_name("fedbm-table1"), embedded=False)
    assert len(grid) == 26
    balanced = next(c for c in grid if c.row == "FedBM + balanced softmax" and c.column == "OCT-C8 beta=0.05")
    assert "algorithm.tau=17.5" in balanced.overrides and balanced.overrides[-1] == "algorithm.loss=balanced-softmax" and balanced.paper is None
    fedbm = next(c for c in grid if c.row == "FedBM" and c.column == "OCT-C8 beta=0.05")
    _, config = load_config(fedbm.preset, fedbm.overrides)
    assert (config.data.dataset, config.algorithm.model, config.federation.num_clients, config.federation.rounds) == ("oct-c8", "resnet18-imagenet", 12, 200)
    hyper = config.algorithm.hyperparameters()
    assert (hyper["tau"], hyper["lambda_dis"], hyper["synthetic_batch"], hyper["prompts"]) == (17.5, 0.1, 16, "oct")
    assert config.partition.alpha == 0.05 and config.federation.batch_size == 8 and config.run.model_selection == "validation"
    assert config.data.train_subset == 0 and config.data.validation_fraction == 0.1  # the embedded 0.28 stays out of the paper's setting
    assert fedbm.paper == 84.84 and fedbm.paper_metrics == {"selected_macro_f1": 84.55}
    fedavg = next(c for c in grid if c.row == "FedAvg" and c.column == "OCT-C8 beta=0.1")
    assert not any("tau" in o for o in fedavg.overrides) and fedavg.paper == 78.64
    kvasir = next(c for c in cells(table_by_name("fedbm-table6"), embedded=False) if c.row == "FedBM" and c.column == "Kvasir-v2 beta=0.1")
    assert "algorithm.tau=7.5" in kvasir.overrides and "data.dataset=kvasir" in kvasir.overrides
    femnist = cells(table_by_name("fedbm-table5"), embedded=False)
    assert all("partition.scheme=natural" in c.overrides and "federation.num_clients=35" in c.overrides for c in femnist)


def test_embedded_grids_run_on_fashion_mnist_with_the_oct_columns_only():
    grid = cells(table_by_name("fedbm-table1"), embedded=True)
    assert len(grid) == 26 and {c.column for c in grid} == {"beta=0.05", "beta=0.1"}
    assert all("data.dataset=fashion-mnist" in c.overrides for c in grid)
    _, config = load_config(grid[0].preset, grid[0].overrides)
    assert config.algorithm.model == "convnet-small" and config.data.train_subset == 7500
    held_out = round(config.data.validation_fraction * config.data.train_subset // 10) * 10
    assert held_out >= 2000 and config.data.train_subset - held_out >= 5400  # issue 16: a validation split that can pick a round
    switched = {c.row: load_config(c.preset, c.overrides)[1].algorithm for c in grid if c.column == "beta=0.1"}
    assert switched["FedBM + balanced softmax"].name == "fedbm" and switched["FedBM + balanced softmax"].loss == "balanced-softmax"
    assert switched["FedETF (plain CE)"].name == "fedetf" and switched["FedETF (plain CE)"].loss == "cross-entropy"
    assert switched["FedBM"].loss == "eq4" and switched["FedETF"].loss == "balanced-softmax"
    for name in ("fedbm-table2", "fedbm-table3", "fedbm-table4", "fedbm-table5"):
        assert cells(table_by_name(name), embedded=True) == []
    assert [c.row for c in cells(table_by_name("fedbm-table12"), embedded=True)] == [
        r for r in ("Central Learning", "FedAvg", "MiniLM (bundled)") for _ in range(2)
    ]
    ablation = {(c.row, c.column): c for c in cells(table_by_name("fedbm-table6"), embedded=True)}
    assert len(ablation) == 10 and "algorithm.classifier=linear" in ablation[("w/o LKCC", "beta=0.1")].overrides
    assert ablation[("Central Learning", "beta=0.05")].preset == "fedbm-central" and ablation[("Central Learning", "beta=0.05")].paper == 93.85
    assert "partition.alpha=0.1" in ablation[("w/o LKCC", "beta=0.1")].overrides


def test_a_fedbm_run_reports_the_generated_images(tmp_path, monkeypatch):
    monkeypatch.setattr(fedbm_module, "concept_embeddings", lambda names, *a, **k: torch.randn(len(names), 5, 12, generator=torch.Generator().manual_seed(0)))
    overrides = [
        "data.dataset=digits",
        "data.train_subset=0",
        "federation.num_clients=4",
        "federation.rounds=2",
        "algorithm.generator_every=1",
        "algorithm.generator_steps=2",
        "algorithm.generator_batch=8",
        "algorithm.generator_width=8",
        "algorithm.synthetic_batch=4",
    ]
    name, config = load_config("fedbm", overrides)
    summary = start(name, config, tmp_path / "run")
    assert (tmp_path / "run" / "generated.png").stat().st_size > 1000
    assert summary["generator_bytes"] > 0 and "selected_accuracy" in summary
    report = (tmp_path / "run" / "report.md").read_text()
    assert "the generator's images per class" in report and "final macro-F1" in report
