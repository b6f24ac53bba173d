"""Issue 31: the central control rows of the FedDB and MFCL tables, and the view settings their search varies."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedprior.algorithms.base import Task
from fedprior.algorithms.engines.semi_supervised import SemiSupervised, Training, views
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.experiments.config import load_config
from fedprior.papers.feddb import tables as feddb
from fedprior.papers.mfcl import tables as mfcl
from fedprior.reproduce.tables import cells, central_overrides

TASK = Task(num_classes=3, input_shape=(1, 28, 28), class_names=("a", "b", "c"), num_clients=4, pixel_mean=(0.5,), pixel_std=(0.25,))


def overrides_as_dict(overrides: list[str]) -> dict[str, str]:
    """The last value of each key, as ``load_config`` applies them."""
    return dict(o.split("=", 1) for o in overrides)


def test_central_keeps_the_federations_budget_one_client_rounds_times_fraction():
    # the FedDB presets: 100 clients, 10% a round, 200 rounds, test every 5, cosine over 200 -> 20 rounds of one client
    out = overrides_as_dict(central_overrides("fixmatch", ["data.dataset=fashion-mnist"]))
    assert out == {
        "federation.num_clients": "1",
        "federation.fraction": "1.0",
        "federation.rounds": "20",
        "federation.evaluate_every": "1",
        "algorithm.lr_decay_rounds": "20",
    }
    # derived from the cell's own overrides, --set included: 400 rounds at 5% -> 20; 300 rounds at 10% -> 30
    assert overrides_as_dict(central_overrides("fixmatch", ["federation.rounds=400", "federation.fraction=0.05"]))["federation.rounds"] == "20"
    longer = overrides_as_dict(central_overrides("feddb", ["federation.rounds=300", "algorithm.lr_decay_rounds=300", "federation.evaluate_every=20"]))
    assert (longer["federation.rounds"], longer["algorithm.lr_decay_rounds"], longer["federation.evaluate_every"]) == ("30", "30", "2")
    # an algorithm without a cosine decay gets no lr_decay_rounds; a named scenario (10 clients) is cleared
    simclr = central_overrides("fedsimclr", [])
    assert not any(o.startswith("algorithm.lr_decay_rounds") for o in simclr)
    assert "partition.scenario=" in simclr and overrides_as_dict(simclr)["federation.rounds"] == "15"  # fraction 1: rounds unchanged


@pytest.mark.parametrize("table", [feddb.TABLE2, feddb.TABLE4, mfcl.TABLE2, mfcl.TABLE7], ids=lambda t: t.name)
def test_each_central_cell_is_one_client_holding_everything_and_its_config_loads(table):
    central = [r.label for r in table.rows if r.central]
    assert len(central) == 2
    grid = cells(table, embedded=True, rows=central, extra=["federation.rounds=50"])
    assert grid and {c.row for c in grid} == set(central)
    for cell in grid:
        _, config = load_config(cell.preset, cell.overrides)
        assert config.federation.num_clients == 1 and config.federation.fraction == 1.0
        fraction = load_config(cell.preset, [])[1].federation.fraction
        assert config.federation.rounds == max(1, round(50 * fraction))  # derived after --set: from the federation's 50 rounds
    assert not cells(table, embedded=False, rows=central)  # the paper's setting holds no central cell (a full-batch client of 50,000 images)


def test_every_table_declares_its_central_controls_against_the_right_rows():
    for table in (feddb.TABLE2, feddb.TABLE4):
        control = next(c for c in table.controls if getattr(c, "above", "") == "Central FixMatch")
        assert (control.below, control.margin) == ("Central (labels only)", 5.0)
    for table in (mfcl.TABLE2, mfcl.TABLE7):
        pairs = {(c.above, c.below) for c in table.controls if c.above.startswith("Central")}
        mfcl_row, simclr_row = ("MFCL(PN)", "FedSimCLR") if table is mfcl.TABLE2 else ("MFCL (PN)", "FedSimCLR (BN)")
        assert pairs == {(f"Central {mfcl_row}", f"{mfcl_row} untrained"), (f"Central {simclr_row}", f"{simclr_row} untrained")}


def test_the_view_settings_reach_the_views_the_clients_draw():
    settings = {"flip": False, "weak_shift": 0.07, "strong_ops": 1, "cutout": 0.25, "strong_augment": "fixmatch"}
    made = views(TASK, settings)
    assert (made.flip, made.pad_fraction, made.n, made.cutout, made.strong_augment) == (False, 0.07, 1, 0.25, "fixmatch")
    default = views(TASK, {})
    assert (default.flip, default.pad_fraction, default.n, default.cutout) == (True, 0.125, 2, 0.5)
    training = Training(epochs=1, flip=False, weak_shift=0.07, strong_ops=1, cutout=0.25)
    engine = SemiSupervised(TASK, GlobalModel(lambda: nn.Flatten()), training)
    assert engine.augment == made
    # and they change what is drawn: a shift of 2 pixels (0.07 x 28) moves no image by more than 2
    x = torch.zeros(64, 1, 28, 28)
    x[:, :, 13, 13] = 1.0
    weak = made._weak_unit(x, torch.Generator().manual_seed(0))
    rows, cols = torch.nonzero(weak[:, 0] == weak[:, 0].amax(dim=(1, 2), keepdim=True), as_tuple=True)[1:]
    assert int((rows - 13).abs().max()) <= 2 and int((cols - 13).abs().max()) <= 2
    assert int((rows - 13).abs().max()) == 2  # 64 draws reach the largest shift


def test_a_table_wide_set_does_not_train_the_untrained_rows():
    # --set federation.rounds=30 algorithm.server_epochs=30 (e.g. the GPU setting) reaches every row; the untrained and
    # sensor rows' defining overrides come after it, so they stay untrained / without a server phase
    extra = ["federation.rounds=30", "algorithm.server_epochs=30"]
    rows = ["MFCL(PN) untrained", "MFCL(PN) sensor", "MFCL(PN) sensor untrained", "MFCL(PN)"]
    grid = {c.row: load_config(c.preset, c.overrides)[1] for c in cells(mfcl.TABLE2, embedded=True, extra=extra, rows=rows, columns=["Sc2"])}
    hyper = {row: config.algorithm.hyperparameters()["server_epochs"] for row, config in grid.items()}
    assert grid["MFCL(PN) untrained"].federation.rounds == 0 and hyper["MFCL(PN) untrained"] == 0
    assert grid["MFCL(PN) sensor"].federation.rounds == 30 and hyper["MFCL(PN) sensor"] == 0
    assert grid["MFCL(PN) sensor untrained"].federation.rounds == 0
    assert grid["MFCL(PN)"].federation.rounds == 30 and hyper["MFCL(PN)"] == 30  # the trained row takes the --set
    (simclr,) = cells(mfcl.TABLE2, embedded=True, extra=["federation.rounds=30"], rows=["FedSimCLR untrained"], columns=["Sc2"])
    assert load_config(simclr.preset, simclr.overrides)[1].federation.rounds == 0
