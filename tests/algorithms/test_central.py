"""Issues 31 and 44: the central control rows of the FedDB and MFCL tables, FixMatch's own mini-batches they train
with, and the view settings their search varies."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedprior.algorithms.base import RoundInfo, Task
from fedprior.algorithms.engines.semi_supervised import SemiSupervised, Training, views
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.errors import ConfigError
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
    assert len(central) == (6 if table in (feddb.TABLE2, feddb.TABLE4) else 4)
    grid = cells(table, embedded=True, rows=central, extra=["federation.rounds=50"])
    assert grid and {c.row for c in grid} == set(central)
    for cell in grid:
        _, config = load_config(cell.preset, cell.overrides)
        assert config.federation.num_clients == 1 and config.federation.fraction == 1.0
        fraction = load_config(cell.preset, [])[1].federation.fraction
        assert config.federation.rounds == max(1, round(50 * fraction))  # derived after --set: from the federation's 50 rounds
    assert not cells(table, embedded=False, rows=central)  # the paper's setting holds no central cell (a full-batch client of 50,000 images)


def test_every_table_declares_its_central_controls_against_the_right_rows():
    for table in (feddb.TABLE1, feddb.TABLE2, feddb.TABLE3, feddb.TABLE4):
        central = [c for c in table.controls if getattr(c, "above", "").startswith("Central")]
        capability = ("Central FixMatch (mini-batch)", "Central labels only (mini-batch)")
        budget = ("Central FixMatch (sequential steps)", "Central labels only (sequential steps)")
        full_batch = ("Central FixMatch", "Central (labels only)")  # the federation's image passes
        assert {(c.above, c.below) for c in central} <= {capability, budget, full_batch}
        assert [c.margin for c in central if (c.above, c.below) == full_batch] == [5.0]
        gaps = {claim.gap for claim in table.claims if claim.gap is not None}  # each claim's own paper gap is its margin (issue 52)
        for pair in (capability, budget):
            assert {c.margin for c in central if (c.above, c.below) == pair} == gaps
    for table in (mfcl.TABLE2, mfcl.TABLE7):
        pairs = {(c.above, c.below) for c in table.controls if c.above.startswith("Central")}
        mfcl_row, simclr_row = ("MFCL(PN)", "FedSimCLR") if table is mfcl.TABLE2 else ("MFCL (PN)", "FedSimCLR (BN)")
        assert pairs == {
            *((f"Central {row}", f"{row} untrained") for row in (mfcl_row, simclr_row)),
            *((f"Central {row} (sequential steps)", f"{row} untrained") for row in (mfcl_row, simclr_row)),  # issue 44
        }


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


# ---------------------------------------------------------------- issue 44: FixMatch's own mini-batches


def embedded_config(table, row: str, column: str, extra: list[str] | None = None):
    (cell,) = cells(table, embedded=True, rows=[row], columns=[column], extra=extra)
    return load_config(cell.preset, cell.overrides)[1]


@pytest.mark.parametrize("extra", [[], ["federation.rounds=50"]], ids=["presets", "rounds-50"])
def test_capability_rows_pass_the_federations_images_and_budget_rows_take_its_sequential_steps(extra):
    federated = embedded_config(feddb.TABLE2, "FixMatch", "δ=0.3", extra)
    fed, part = federated.federation, federated.partition
    assert (part.num_labeled + part.num_unlabeled, fed.local_epochs, fed.fraction) == (
        feddb.EMBEDDED_IMAGES,
        feddb.EMBEDDED_EPOCHS,
        feddb.EMBEDDED_FRACTION,
    )  # the constants the step counts are computed from are the presets'
    # the federation: rounds x sampled clients x E x client images; its global model: rounds x E sequential steps
    client_images = (part.num_labeled + part.num_unlabeled) / fed.num_clients
    federation_images = fed.rounds * round(fed.fraction * fed.num_clients) * fed.local_epochs * client_images
    for row in ("Central FixMatch (mini-batch)", "Central labels only (mini-batch)"):
        central = embedded_config(feddb.TABLE2, row, "δ=0.3", extra)
        hyper = central.algorithm.hyperparameters()
        steps = central.federation.rounds * hyper["local_steps"]
        assert (hyper["labeled_batch_size"], hyper["lr"]) == (64, 0.03)
        # central FixMatch passes B (1 + mu) = 512 images a step: the federation's images within half a step a round
        assert abs(steps * 64 * 8 - federation_images) <= central.federation.rounds * 64 * 8 / 2
        assert steps == (3960 if not extra else 198 * 5)  # labels only: the same steps (and batches of 64 labeled images)
    assert embedded_config(feddb.TABLE2, "Central FixMatch (mini-batch)", "δ=0.3", extra).algorithm.hyperparameters()["unlabeled_ratio"] == 7
    for row in ("Central FixMatch (sequential steps)", "Central labels only (sequential steps)"):
        central = embedded_config(feddb.TABLE2, row, "δ=0.3", extra)
        assert central.federation.rounds * central.algorithm.hyperparameters()["local_steps"] == fed.rounds * fed.local_epochs


def test_a_minibatch_central_cell_is_the_same_run_in_every_column_of_tables_1_to_4():
    row = "Central FixMatch (mini-batch)"
    configs = [load_config(c.preset, c.overrides)[1].to_dict() for t in feddb.FEDDB_TABLES for c in cells(t, embedded=True, rows=[row])]
    assert len(configs) == 6 and all(c == configs[0] for c in configs)  # Table 1 iid, 2 δ=0.3, 3 δ=0.1, 4 all three
    assert configs[0]["partition"]["scheme"] == "iid"


class Recorder(nn.Module):
    """A linear classifier that records the size of every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(28 * 28, 3)
        self.sizes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sizes.append(x.shape[0])
        return self.linear(x.flatten(1))


def minibatch_update(data: dict[str, torch.Tensor], use_unlabeled: bool, **training) -> tuple[list[int], dict, dict]:
    """One client update of the engine with a :class:`Recorder`: the batch sizes it forwarded, the reply's arrays and metrics."""
    made: list[Recorder] = []

    def build() -> Recorder:
        made.append(Recorder())
        return made[-1]

    settings = {"labeled_batch_size": 4, "unlabeled_ratio": 3, "local_steps": 5, "threshold": 0.34, "diagnostics": False, **training}
    engine = SemiSupervised(TASK, GlobalModel(build), Training(epochs=2, use_unlabeled=use_unlabeled, **settings))
    algorithm = engine.algorithm("fixmatch" if use_unlabeled else "fedavg-labeled")
    info = RoundInfo(seed=0, stage="federated", round=1)
    server = algorithm.init(info)
    reply, _ = algorithm.client_update(algorithm.broadcast(server, info), {}, data, info.for_client(0))
    return made[-1].sizes, reply.arrays, reply.metrics


def images(labeled: int = 10, unlabeled: int = 30) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "x_labeled": torch.rand(labeled, 1, 28, 28, generator=g),
        "y_labeled": torch.randint(0, 3, (labeled,), generator=g),
        "x_unlabeled": torch.rand(unlabeled, 1, 28, 28, generator=g),
    }


def test_minibatch_fixmatch_takes_local_steps_of_b_labeled_and_mu_b_unlabeled_images():
    sizes, _, metrics = minibatch_update(images(), use_unlabeled=True)
    # the round's pseudo-labeling pass over the 30 unlabeled images, then local_steps = 5 steps (not E = 2 epochs), each
    # one forward of the labeled batch's weak views, the unlabeled batch's weak and strong views: 4 + 3 x 4 + 3 x 4
    assert sizes == [30] + [4 + 12 + 12] * 5
    assert metrics["loss_labeled"] > 0 and 0 <= metrics["batch_coverage"] <= 1
    steps_only, _, _ = minibatch_update(images(), use_unlabeled=True, local_steps=2, unlabeled_ratio=1)
    assert steps_only == [30] + [4 + 4 + 4] * 2


def test_minibatch_labels_only_takes_the_same_steps_and_never_reads_the_unlabeled_images():
    data = images()
    sizes, arrays, metrics = minibatch_update(data, use_unlabeled=False)
    assert sizes == [4] * 5  # B labeled images a step, local_steps steps, no pseudo-labeling pass
    assert metrics["loss_unlabeled"] == 0.0
    # not given them (the runtime passes the algorithm's inputs only), or given garbage: the same model
    without = {k: v for k, v in data.items() if k != "x_unlabeled"}
    garbage = dict(data, x_unlabeled=torch.full_like(data["x_unlabeled"], float("nan")))
    for other in (without, garbage):
        _, other_arrays, _ = minibatch_update(other, use_unlabeled=False)
        assert all(torch.equal(arrays[k], other_arrays[k]) for k in arrays)


def test_minibatches_need_steps_and_refuse_a_changed_step():
    with pytest.raises(ConfigError, match="algorithm.local_steps"):
        minibatch_update(images(), use_unlabeled=True, local_steps=0)
    with pytest.raises(ConfigError, match="algorithm.labeled_batch_size"):
        minibatch_update(images(), use_unlabeled=True, dpl=True)


@pytest.mark.parametrize("table", [mfcl.TABLE2, mfcl.TABLE7], ids=lambda t: t.name)
def test_mfcl_sequential_steps_rows_take_the_federations_steps_and_image_passes(table):
    import math

    mfcl_row, simclr_row = ("MFCL(PN)", "FedSimCLR") if table is mfcl.TABLE2 else ("MFCL (PN)", "FedSimCLR (BN)")
    for row in (mfcl_row, simclr_row):
        for column in ("Sc2", "Sc10"):
            (fed_cell,) = cells(table, embedded=True, rows=[row], columns=[column])
            fed = load_config(fed_cell.preset, fed_cell.overrides)[1]
            sampled = round(fed.federation.fraction * fed.federation.num_clients)
            assert (fed.federation.batch_size, sampled) == (mfcl.CLIENT_BATCH, mfcl.SAMPLED_CLIENTS)
            pool = fed.data.train_subset
            # the federation's global model: rounds x E x ceil(client images / B) sequential steps (clients of pool / M images)
            federation_steps = fed.federation.rounds * fed.federation.local_epochs * math.ceil(pool / fed.federation.num_clients / fed.federation.batch_size)
            for label, matched in ((f"Central {row} (sequential steps)", True), (f"Central {row}", False)):
                (cell,) = cells(table, embedded=True, rows=[label], columns=[column])
                central = load_config(cell.preset, cell.overrides)[1].federation
                steps = central.rounds * central.local_epochs * math.ceil(pool / central.batch_size)
                assert (steps == federation_steps) == matched
                client_images = pool / fed.federation.num_clients  # image passes: the central client's = the federation's
                assert central.rounds * central.local_epochs * pool == fed.federation.rounds * sampled * fed.federation.local_epochs * client_images
                if not matched:
                    assert steps == 8 * federation_steps  # the central rows of issue 31: 480 steps against 60
