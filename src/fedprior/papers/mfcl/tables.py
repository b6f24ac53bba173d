"""MFCL's Tables 2, 3, 7 and 8 (the MFCL paper) as grids, with the published numbers.

Paper setting: CIFAR-10 with M = 10 clients in scenarios Sc1-Sc10 (Table 2, 7, 8) and
CIFAR-100 with M = 100 in Sc11-Sc110 (Table 3) (``--set data.root=...``), every network
at full size (each row's ``real`` overrides: sensor module 64 wide, ResNet-18 64 wide,
100 server epochs). FedSimCLR runs 800 rounds in every table (Appendix D.4: "FedSimCLR
needs 800 FL rounds to achieve the reported accuracy in Table 2"; Table 3's "other
settings are the same as in Table 2"; Table 7's FedSimCLR (BN) is Table 2's). The paper
does not say how many rounds the other baselines ran (FedSwAV, Orchestra, the supervised
rows): their rows keep the presets' 15, as MFCL's phase 1 ("only 15 FL rounds").

Embedded setting (``--embedded``): the presets as they are (Fashion-MNIST, 2,000
training images, narrow networks, SimCLR crops of at least 30% of the image: the one candidate
of ``benchmarks/mfcl_setting.py`` whose central FedSimCLR passes its control). Table 2, 7 and 8 keep the paper's scenarios (Fashion-
MNIST has ten classes, like CIFAR-10); Table 2's embedded grid runs Sc1, Sc2, Sc5 and Sc10.
Table 3's 100-class scenarios cannot exist on ten classes: its embedded columns keep
M = 100 clients and the fraction of classes each client holds (W / 100 -> W' / 10, at
least one class), one column per distinct W'.

Every table carries the paper's claims it tests (``claims``, quoting the MFCL paper's results and
Appendix D) and, for accuracy, control rows and two controls. Every
self-supervised row is scored by the paper's linear evaluation (the MFCL paper's Sec. 3: a dense
layer trained on the training pool's frozen features, scored on the test set;
``algorithm.linear_eval = "train-test"``). The control rows, scored the same way:

- the same networks untrained (``<row> untrained``): the presets with no training,
  ``federation.rounds=0`` (and ``algorithm.server_epochs=0`` for MFCL), for every
  self-supervised row a claim compares (MFCL and FedSimCLR with each norm of the table);
- ``raw pixels``: the linear evaluation of the pixels themselves (``raw-pixels``);
- ``MFCL(PN) sensor`` and ``MFCL(PN) sensor untrained``: the sensor module's
  representations before any discriminator (``algorithm.eval_features = "sensor"``,
  phase 2 skipped), trained in phase 1 or not;
- supervised FedAvg with labels (a row of Tables 2-3 already; added to Table 7).

The controls: every self-supervised row a claim compares at least 5 points above the same
network untrained (its own norm: a linear evaluation that scores random features as well as
trained ones cannot rank methods), each gating its own row; central MFCL(PN) and central
FedSimCLR above their untrained networks, each gating its framework's rows (MFCL with any norm,
FedSimCLR with any norm); and supervised FedAvg at least at the raw pixels' linear probe
(:data:`SUPERVISED_CONTROL`), gating FedAvg's claims. Table 8 counts bits sent, which no
control bounds.
"""

from __future__ import annotations

from fedprior.papers.mfcl.communication import PAPER, ROWS, measured
from fedprior.reproduce.declare import printed, quoted
from fedprior.reproduce.tables import Claim, Column, Control, PaperTable, Row

REAL = ("data.train_subset=0", "federation.evaluate_every=10")  # linear evaluation every 10 rounds / server epochs and at each stage's last
EMBEDDED = ("data.dataset=fashion-mnist",)
DATASETS = {"CIFAR-10": "cifar10", "CIFAR-100": "cifar100"}
NOTE = (
    "Fashion-MNIST, 2,000 training images, sensor module 16 wide and ResNet-18 8 wide, 15 rounds, 1 server epoch; paper numbers are CIFAR-10/100 at full size"
)

PAPER_CROP = ("algorithm.min_scale=0.08",)
"""SimCLR's crop (8% to all of the image) on CIFAR's 32x32 images, in place of the presets' 30% for 28x28 Fashion-MNIST,
which the central FedSimCLR control chose (``benchmarks/results/mfcl_setting.json``)."""
FULL_MFCL = ("algorithm.sensor_width=64", "algorithm.disc_width=64", "algorithm.server_epochs=100", "algorithm.server_batch_size=512", *PAPER_CROP)
FULL_SSL = ("algorithm.width=64", *PAPER_CROP)
FULL_SIMCLR = (*FULL_SSL, "federation.rounds=800")
"""FedSimCLR at full size for the 800 rounds Appendix D.4 gives it for Table 2's accuracy (and Table 8's bits)."""
FULL_SUPERVISED = ("algorithm.model=resnet18",)

FEDAVG = Row("FedAvg", "mfcl-fedavg", real=FULL_SUPERVISED)
FEDPROX = Row("FedProx", "mfcl-fedprox", real=FULL_SUPERVISED)
MOON = Row("MOON", "mfcl-moon", real=FULL_SUPERVISED)
FEDSWAV = Row("FedSwAV", "fedswav", real=FULL_SSL)
FEDSIMCLR = Row("FedSimCLR", "fedsimclr", real=FULL_SIMCLR)
ORCHESTRA = Row("Orchestra", "orchestra", real=FULL_SSL)
MFCL_BN = Row("MFCL(BN)", "mfcl-bn", real=FULL_MFCL)
MFCL_GN = Row("MFCL(GN)", "mfcl-gn", real=FULL_MFCL)
MFCL_PN = Row("MFCL(PN)", "mfcl", real=FULL_MFCL)
PAPER_ROWS_2_3 = (FEDAVG, FEDPROX, MOON, FEDSWAV, FEDSIMCLR, ORCHESTRA, MFCL_BN, MFCL_GN, MFCL_PN)
UNTRAINED = ("federation.rounds=0",)
UNTRAINED_MFCL = ("federation.rounds=0", "algorithm.server_epochs=0")
RAW_PIXELS = Row("raw pixels", "mfcl-pixels")
SENSOR = ("algorithm.eval_features=sensor", "algorithm.server_epochs=0", "federation.evaluate_every=1000")
"""MFCL's sensor representations z, flattened, before any discriminator: evaluated once, after phase 1."""


def untrained(row: Row, label: str | None = None) -> Row:
    """``row``'s network with no training (its phases set to zero rounds, after any ``--set``), scored by the same linear evaluation."""
    mfcl = row.preset.startswith("mfcl")
    zero = UNTRAINED_MFCL if mfcl else UNTRAINED
    return Row(label or f"{row.label} untrained", row.preset, row.overrides, real=row.real, defining=zero)


def central(row: Row) -> Row:
    """``row`` without federation: one client holding the whole training pool, the same network, views and
    budget (:func:`~fedprior.reproduce.tables.central_overrides`), embedded only."""
    return Row(f"Central {row.label}", row.preset, row.overrides, paper_setting=False, central=True)


CLIENT_BATCH, SAMPLED_CLIENTS = 64, 10
"""The presets' client mini-batch (``federation.batch_size``) and the clients a round of Tables 2 and 7 trains
(``federation.num_clients x fraction``, M = 10 in every scenario); tests/algorithms/test_central.py checks them against
the presets' configs."""
SEQUENTIAL_BATCH = CLIENT_BATCH * SAMPLED_CLIENTS
"""The batch of the central rows matched in sequential steps. A round of the federation takes E x
ceil(200 / 64) = 4 sequential steps (each client's 200 images in batches of 64; the ten clients' steps are averaged, not
summed: 60 in 15 rounds), where the central client with the same batch takes E x ceil(2,000 / 64) = 32 (480, eight
times more). With the ten clients' batches in one, 640 images, the central client takes ceil(2,000 / 640) = 4 steps a
round: the federation's sequential steps and its image passes both. Tables 2 and 7 only: Table 3's embedded columns
have 100 clients of 20 images (one step a round, which a batch of the whole pool would match)."""


def central_steps(row: Row) -> Row:
    """``row`` central (:func:`central`) with the federation's sequential steps: the ten sampled clients' batches in one
    (:data:`SEQUENTIAL_BATCH`), the same rounds, epochs and image passes."""
    return Row(
        f"Central {row.label} (sequential steps)",
        row.preset,
        row.overrides,
        paper_setting=False,
        central=True,
        defining=(f"federation.batch_size={SEQUENTIAL_BATCH}",),
    )


def sequential_controls(mfcl: Row, simclr: Row) -> tuple[Control, ...]:
    """The central controls matched in the federation's sequential steps (:func:`central_steps`), beside :func:`trained_above_untrained`'s."""
    note = (
        "budget: the central control with the federation's sequential optimizer steps (60 in 15 rounds, one step on the ten "
        "clients' 640 images where the federation averages ten steps of 64), where the central rows take eight times more "
        "steps of 64: a central run that clears the untrained network only with eight times the steps says the federation's "
        "budget, not the federation, is short"
    )
    # each gates only its own central row, which no claim names: reported beside the central controls, blanks nothing
    return tuple(
        Control(above=central_steps(row).label, below=untrained(row).label, margin=5.0, note=note, gates=(central_steps(row).label,)) for row in (mfcl, simclr)
    )


def trained_above_untrained(mfcl: Row, simclr: Row, mfcl_rows: tuple[Row, ...], simclr_rows: tuple[Row, ...]) -> tuple[Control, ...]:
    """The controls: trained above untrained for every self-supervised row a claim compares, and central (:func:`central`)
    for MFCL and FedSimCLR.

    Each federated row of ``mfcl_rows`` and ``simclr_rows`` (every norm) has its own: the row above the same network
    untrained (:func:`untrained`, its own norm), gating that row only, since a row whose training does not register
    under linear evaluation measures no learning whatever another norm's row does (MFCL(BN) can sit under its untrained
    network while MFCL(PN) clears its own). The central controls ask whether the framework can learn at all without
    federation and gate its rows together; the claims that name neither framework's rows keep their verdicts.
    """
    note = "linear evaluation must score a trained network above the same network untrained, else it cannot rank methods"
    central_note = (
        "the setting must let the method learn at all without federation (one client holding every image, the same network, "
        "views and budget): a central run that stays at the untrained network's accuracy means the setting, not the federation, fails"
    )
    on_mfcl, on_simclr = tuple(r.label for r in mfcl_rows), tuple(r.label for r in simclr_rows)
    return (
        *(Control(above=r.label, below=untrained(r).label, margin=5.0, note=note, gates=(r.label,)) for r in (*mfcl_rows, *simclr_rows)),
        Control(above=central(mfcl).label, below=untrained(mfcl).label, margin=5.0, note=central_note, gates=on_mfcl),
        Control(above=central(simclr).label, below=untrained(simclr).label, margin=5.0, note=central_note, gates=on_simclr),
    )


def control_rows(mfcl: Row, simclr: Row, others: tuple[Row, ...], sensor_label: str = "MFCL(PN) sensor") -> tuple[Row, ...]:
    """The control rows beside a table's paper rows: ``mfcl`` (PN), ``simclr`` and ``others`` untrained, ``mfcl`` and
    ``simclr`` central (:func:`central`), raw pixels, the sensor's representations.

    The sensor rows are embedded only: at the paper's size z has 64 x 16 x 16 = 16,384 numbers per
    image, 3.3 GB of float32 features for CIFAR-10's 50,000 training images.
    """
    sensor = Row(sensor_label, mfcl.preset, mfcl.overrides, paper_setting=False, defining=SENSOR)
    return (
        untrained(mfcl),
        *(untrained(row) for row in (simclr, *others)),
        central(mfcl),
        central(simclr),
        RAW_PIXELS,
        sensor,
        Row(f"{sensor_label} untrained", mfcl.preset, mfcl.overrides, paper_setting=False, defining=(*SENSOR, "federation.rounds=0")),
    )


SUPERVISED_CONTROL = Control(
    above=FEDAVG.label,
    below=RAW_PIXELS.label,
    margin=0.0,
    note="supervised: FedAvg trains its network end to end on every label, so it must reach at least a linear probe on the "
    "raw pixels with the same labels (the evaluation's own floor); below it, its training, not its lack of "
    "self-supervision, decides any claim against it",
    gates=(FEDAVG.label,),
)
ROWS_2_3 = (*PAPER_ROWS_2_3, *control_rows(MFCL_PN, FEDSIMCLR, (MFCL_BN, MFCL_GN)))
CONTROLS_2_3 = (*trained_above_untrained(MFCL_PN, FEDSIMCLR, (MFCL_BN, MFCL_GN, MFCL_PN), (FEDSIMCLR,)), SUPERVISED_CONTROL)
ROWS_2 = (*ROWS_2_3, central_steps(MFCL_PN), central_steps(FEDSIMCLR))
CONTROLS_2 = (*CONTROLS_2_3, *sequential_controls(MFCL_PN, FEDSIMCLR))


def scenario(number: int, embedded: bool = True) -> Column:
    return Column("CIFAR-10", f"Sc{number}", (f"partition.scenario=Sc{number}",), embedded=embedded)


_T2_COLUMNS = tuple(scenario(n, embedded=n in (1, 2, 5, 10)) for n in range(1, 11))

TABLE2 = PaperTable(
    name="mfcl-table2",
    title="Table 2: top-1 accuracy (%) on CIFAR-10, M = 10, scenarios Sc1-Sc10 (self-supervised: linear evaluation)",
    rows=ROWS_2,
    columns=_T2_COLUMNS,
    paper=printed(  # the paper prints one line per scenario
        PAPER_ROWS_2_3,
        _T2_COLUMNS,
        [
            [57, 57, 58, 75, 71, 73, 10, 79, 83],
            [64, 64, 64, 75, 73, 78, 17, 79, 84],
            [67, 68, 69, 77, 74, 78, 29, 79, 84],
            [73, 73, 74, 78, 75, 79, 39, 80, 84],
            [77, 78, 78, 79, 75, 79, 47, 80, 84],
            [82, 82, 84, 79, 76, 80, 58, 81, 84],
            [86, 88, 88, 80, 77, 80, 67, 81, 84],
            [90, 91, 91, 81, 79, 81, 77, 81, 85],
            [92, 92, 93, 82, 81, 82, 85, 82, 85],
            [92, 93, 94, 83, 83, 82, 88, 82, 85],
        ],
        by_column=True,
    ),
    real=REAL,
    embedded=EMBEDDED,
    real_datasets=DATASETS,
    embedded_note=NOTE,
    claims=(
        *(
            Claim(
                f"MFCL(PN) > {other} ({sc})",
                better="MFCL(PN)",
                worse=other,
                column=f"CIFAR-10 {sc}",
                source=(
                    "5: 'in the extreme case of heterogeneous and CIB data sets (e.g., Sc1 and Sc2), the proposed MFCL scheme significantly "
                    "outperforms the other methods ... the proposed MFCL scheme with PN outperforms that with GN or BN'"
                    f" ({sc}: {numbers} in Table 2)"
                ),
            )
            for sc, other, numbers in (
                ("Sc1", "MFCL(BN)", "83 vs 10"),
                ("Sc1", "MFCL(GN)", "83 vs 79"),
                ("Sc1", "FedSimCLR", "83 vs 71"),
                ("Sc2", "MFCL(BN)", "84 vs 17"),
                ("Sc2", "MFCL(GN)", "84 vs 79"),
                ("Sc2", "FedSimCLR", "84 vs 73"),
                ("Sc2", "FedAvg", "84 vs 64"),
            )
        ),
        Claim(
            "FedAvg > MFCL(PN) (Sc10)",
            better="FedAvg",
            worse="MFCL(PN)",
            column="CIFAR-10 Sc10",
            source="5: 'In (closely) homogeneous and CB scenarios (e.g., Sc7 to Sc10), however, supervised FL methods outperform MFCL' (92 vs 85)",
        ),
    ),
    controls=CONTROLS_2,
)


def cifar100_scenario(number: int, embedded_window: int | None) -> Column:
    """Table 3's column Sc<number> (100 clients); embedded: 100 clients holding ``embedded_window`` of Fashion-MNIST's 10 classes."""
    window = embedded_window or 1
    return Column(
        "CIFAR-100",
        f"Sc{number}",
        (f"partition.scenario=Sc{number}", "federation.num_clients=100"),
        embedded=embedded_window is not None,
        embedded_overrides=('partition.scenario=""', "partition.scheme=window", f"partition.window={window}", "federation.num_clients=100"),
        embedded_setting=f"W={window}/10, M=100 (as Sc{number})",
    )


_T3_COLUMNS = (
    cifar100_scenario(11, 1),
    cifar100_scenario(12, None),
    cifar100_scenario(13, None),
    cifar100_scenario(20, None),
    cifar100_scenario(30, 2),
    cifar100_scenario(70, 6),
    cifar100_scenario(109, None),
    cifar100_scenario(110, 10),
)

TABLE3 = PaperTable(
    name="mfcl-table3",
    title="Table 3: top-1 accuracy (%) on CIFAR-100, M = 100, scenarios Sc11-Sc110 (self-supervised: linear evaluation)",
    rows=ROWS_2_3,
    columns=_T3_COLUMNS,
    paper=printed(
        PAPER_ROWS_2_3,
        _T3_COLUMNS,
        [
            [18, 18, 20, 31, 31, 37, 2, 40, 43],
            [20, 21, 22, 34, 34, 40, 4, 43, 45],
            [21, 22, 23, 36, 35, 40, 7, 44, 45],
            [27, 27, 28, 37, 36, 40, 14, 44, 45],
            [31, 31, 33, 37, 38, 41, 18, 45, 46],
            [47, 47, 48, 40, 40, 42, 45, 45, 47],
            [57, 57, 57, 44, 46, 49, 50, 48, 49],
            [57, 57, 58, 45, 46, 49, 51, 49, 49],
        ],
        by_column=True,
    ),
    real=REAL,
    embedded=EMBEDDED,
    real_datasets=DATASETS,
    embedded_note=NOTE + "; Table 3's columns become 100 clients holding W' of 10 classes",
    claims=(
        *quoted(
            "5: MFCL 'significantly outperforms the other methods' in the heterogeneous and CIB scenarios",
            Claim("MFCL(PN) > FedSimCLR (Sc11)", better="MFCL(PN)", worse="FedSimCLR", column="CIFAR-100 Sc11", source="(Table 3, Sc11: 43 vs 31)"),
            Claim("MFCL(PN) > FedAvg (Sc11)", better="MFCL(PN)", worse="FedAvg", column="CIFAR-100 Sc11", source="(Table 3, Sc11: 43 vs 18)"),
        ),
        *quoted(
            "5: 'the proposed MFCL scheme with PN outperforms that with GN or BN'",
            Claim("MFCL(PN) > MFCL(BN) (Sc11)", better="MFCL(PN)", worse="MFCL(BN)", column="CIFAR-100 Sc11", source="(Table 3, Sc11: 43 vs 2)"),
            Claim("MFCL(PN) > MFCL(GN) (Sc11)", better="MFCL(PN)", worse="MFCL(GN)", column="CIFAR-100 Sc11", source="(Table 3, Sc11: 43 vs 40)"),
        ),
        Claim(
            "FedAvg > MFCL(PN) (Sc110)",
            better="FedAvg",
            worse="MFCL(PN)",
            column="CIFAR-100 Sc110",
            source="5: 'In (closely) homogeneous and CB scenarios ... supervised FL methods outperform MFCL' (Table 3, Sc110: 57 vs 49)",
        ),
    ),
    controls=CONTROLS_2_3,
)

_T7_PAPER_ROWS = (
    Row("FedSimCLR (BN)", "fedsimclr", real=FULL_SIMCLR),
    Row("MFCL (BN)", "mfcl-bn", real=FULL_MFCL),
    Row("FedSimCLR (GN)", "fedsimclr-gn", real=FULL_SIMCLR),
    Row("MFCL (GN)", "mfcl-gn", real=FULL_MFCL),
    Row("FedSimCLR (PN)", "fedsimclr-pn", real=FULL_SIMCLR),
    Row("MFCL (PN)", "mfcl", real=FULL_MFCL),
)
_T7_ROWS = (
    *_T7_PAPER_ROWS,
    *control_rows(_T7_PAPER_ROWS[5], _T7_PAPER_ROWS[0], (*_T7_PAPER_ROWS[1:5],), sensor_label="MFCL (PN) sensor"),
    Row("FedAvg (supervised)", "mfcl-fedavg", real=FULL_SUPERVISED),
    central_steps(_T7_PAPER_ROWS[5]),
    central_steps(_T7_PAPER_ROWS[0]),
)
_T7_COLUMNS = (scenario(2), scenario(10))

TABLE7 = PaperTable(
    name="mfcl-table7",
    title="Table 7: PN in FedSimCLR and in MFCL, top-1 accuracy (%) on CIFAR-10, M = 10",
    rows=_T7_ROWS,
    columns=_T7_COLUMNS,
    paper=printed(_T7_PAPER_ROWS, _T7_COLUMNS, [[73, 17, 74, 79, 75, 84], [82, 88, 82, 83, 84, 85]], by_column=True),
    real=REAL,
    embedded=EMBEDDED,
    real_datasets=DATASETS,
    embedded_note=NOTE,
    claims=(
        *quoted(
            "D: 'PN improves the performance even in the FedSimCLR framework as well as in our proposed MFCL framework'",
            Claim("FedSimCLR (PN) > FedSimCLR (BN) (Sc2)", better="FedSimCLR (PN)", worse="FedSimCLR (BN)", column="CIFAR-10 Sc2", source="(Sc2: 75 vs 73)"),
            Claim("MFCL (PN) > MFCL (BN) (Sc2)", better="MFCL (PN)", worse="MFCL (BN)", column="CIFAR-10 Sc2", source="(Sc2: 84 vs 17)"),
        ),
        *quoted(
            "D: 'our proposed MFCL with PN always outperforms FedSimCLR whether the clients have homogeneous and CB data or heterogeneous and CIB data'",
            Claim("MFCL (PN) > FedSimCLR (PN) (Sc2)", better="MFCL (PN)", worse="FedSimCLR (PN)", column="CIFAR-10 Sc2", source="(Sc2: 84 vs 75)"),
            Claim("MFCL (PN) > FedSimCLR (PN) (Sc10)", better="MFCL (PN)", worse="FedSimCLR (PN)", column="CIFAR-10 Sc10", source="(Sc10: 85 vs 84)"),
        ),
        Claim(
            "FedSimCLR (PN) > FedSimCLR (BN) (Sc10)",
            better="FedSimCLR (PN)",
            worse="FedSimCLR (BN)",
            column="CIFAR-10 Sc10",
            source="D: 'PN improves the performance even in the FedSimCLR framework' (Sc10: 84 vs 82)",
        ),
        *(
            Claim(
                f"FedSimCLR (PN) > FedSimCLR (GN) ({sc})",
                better="FedSimCLR (PN)",
                worse="FedSimCLR (GN)",
                column=f"CIFAR-10 {sc}",
                source=f"D: 'PN improves the performance even in the FedSimCLR framework' (Table 7, {sc}: {numbers})",
            )
            for sc, numbers in (("Sc2", "75 vs 74"), ("Sc10", "84 vs 82"))
        ),
        Claim(
            "MFCL (PN) > MFCL (GN) (Sc2)",
            better="MFCL (PN)",
            worse="MFCL (GN)",
            column="CIFAR-10 Sc2",
            source="D: PN improves the performance 'as well as in our proposed MFCL framework' (Table 7, Sc2: 84 vs 79)",
        ),
        *(
            Claim(
                f"MFCL (PN) > FedSimCLR (BN) ({sc})",
                better="MFCL (PN)",
                worse="FedSimCLR (BN)",
                column=f"CIFAR-10 {sc}",
                source=f"D: 'our proposed MFCL with PN always outperforms FedSimCLR' (Table 7, {sc}: {numbers})",
            )
            for sc, numbers in (("Sc2", "84 vs 73"), ("Sc10", "85 vs 82"))
        ),
    ),
    controls=(
        *trained_above_untrained(_T7_PAPER_ROWS[5], _T7_PAPER_ROWS[0], _T7_PAPER_ROWS[1::2], _T7_PAPER_ROWS[0::2]),
        *sequential_controls(_T7_PAPER_ROWS[5], _T7_PAPER_ROWS[0]),
    ),
)

_T8_ROWS = (
    Row("FedSimCLR", "fedsimclr", real=FULL_SIMCLR),
    Row("MFCL", "mfcl", real=FULL_MFCL),
)
_T8_METRICS = ("total_bits", *(k for k in ROWS if k != "total_bits"))
_T8_COLUMN = scenario(2)

TABLE8 = PaperTable(
    name="mfcl-table8",
    title="Table 8: communication burden (bits; 32-bit floats, channel code rate 1/3), measured from the payloads sent",
    rows=_T8_ROWS,
    columns=(_T8_COLUMN,),
    paper={(row.label, _T8_COLUMN.label): PAPER[row.label]["total_bits"] for row in _T8_ROWS},
    metrics=_T8_METRICS,
    paper_metrics={(row.label, _T8_COLUMN.label, m): PAPER[row.label][m] for row in _T8_ROWS for m in _T8_METRICS[1:]},
    scales={m: 1.0 for m in _T8_METRICS},
    derived=measured,
    real=REAL,
    embedded=EMBEDDED,
    real_datasets=DATASETS,
    embedded_note=NOTE + "; the paper's clients hold 5,000 images each, these 200",
    claims=(
        Claim(
            "MFCL sends fewer bits than FedSimCLR (Sc2)",
            better="MFCL",
            worse="FedSimCLR",
            column="CIFAR-10 Sc2",
            higher_is_better=False,
            source="D: 'Overall, the communication burden of the proposed MFCL is much lower than that of the traditional E2E training of FL' "
            "(Table 8, in total: 30x10^11 vs 16x10^12 bits)",
        ),
    ),
)

MFCL_TABLES = (TABLE2, TABLE3, TABLE7, TABLE8)
