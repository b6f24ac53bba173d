"""How the registry-wide tests build each registered algorithm: a preset plus overrides on small embedded data.

A new algorithm must be added to ``SETUPS``, or test_experiments.test_every_algorithm_has_a_setup fails; a new
shipped preset to ``PRESETS`` (through ``SETUPS`` or ``MORE_PRESETS``), or benchmarks/one_round_histories.py refuses to run.
"""

from tests.support.cli import STANDIN

# MFCL's presets on digits, its scenario cleared so that any number of clients works.
SMALL_IMAGES = ["data.dataset=digits", "data.train_subset=0", 'partition.scenario=""', "partition.scheme=window"]

# The semi-supervised algorithms (FedDB and its baselines) on a small labeled/unlabeled split of digits.
SEMI = ["data.dataset=digits", "partition.num_labeled=100", "partition.num_unlabeled=0", "federation.local_epochs=1", "algorithm.width=8"]

FEDBM_SMALL = ["data.dataset=digits", "data.train_subset=0"]
SETUPS = {
    "fedavg": ("fedavg-cnn", ["data.dataset=digits"]),
    "fedbn": ("fedbn-rotated", ["data.dataset=digits"]),
    "fedprox": ("fedprox-cnn", ["data.dataset=digits"]),
    "scaffold": ("scaffold-cnn", ["data.dataset=digits"]),
    **{name: (f"{name}-cnn", ["data.dataset=digits"]) for name in ("fedavgm", "fedadagrad", "fedadam", "fedyogi")},
    # the asynchronous algorithms have no preset: fedavg-cnn's, with 4 of SMALL's 8 clients in flight (--algorithm fedbuff)
    "fedbuff": ("fedavg-cnn", ["data.dataset=digits", "algorithm.name=fedbuff", "algorithm.concurrency=4", "algorithm.buffer_size=2"]),
    "fedasync": ("fedavg-cnn", ["data.dataset=digits", "algorithm.name=fedasync", "algorithm.concurrency=4"]),
    "fedntd": ("fedntd-linear", STANDIN),
    "fst-cbdg": ("fst-cbdg", STANDIN),
    "zero-shot": ("zero-shot", STANDIN),
    "linear-probe": ("linear-probe", STANDIN),
    "mfcl": (
        "mfcl",
        [
            *SMALL_IMAGES,
            "algorithm.sensor_width=4",
            "algorithm.disc_width=4",
            "algorithm.projection_dim=8",
            "algorithm.server_epochs=1",
            "algorithm.server_batch_size=64",
        ],
    ),
    "fedsimclr": ("fedsimclr-pn", [*SMALL_IMAGES, "algorithm.width=4", "algorithm.projection_dim=8"]),
    "fedswav": ("fedswav", [*SMALL_IMAGES, "algorithm.width=4", "algorithm.projection_dim=8", "algorithm.prototypes=10"]),
    "orchestra": (
        "orchestra",
        [
            *SMALL_IMAGES,
            "algorithm.width=4",
            "algorithm.projection_dim=8",
            "algorithm.global_clusters=8",
            "algorithm.local_clusters=4",
            "algorithm.memory=32",
            "algorithm.global_iterations=20",
        ],
    ),
    "moon": ("mfcl-moon", SMALL_IMAGES),
    "raw-pixels": ("mfcl-pixels", SMALL_IMAGES),
    **{name: (name, SEMI) for name in ("feddb", "fixmatch", "fedavg-labeled", "fedmatch", "fedrgd", "semifl")},
    "fedbm": (
        "fedbm",
        [
            *FEDBM_SMALL,
            "algorithm.generator_every=1",
            "algorithm.generator_steps=2",
            "algorithm.generator_batch=8",
            "algorithm.generator_width=8",
            "algorithm.synthetic_batch=4",
        ],
    ),
    "central": ("fedbm-central", [*FEDBM_SMALL, "data.train_subset=300"]),
    "feddyn": ("fedbm-feddyn", FEDBM_SMALL),
    "fedrep": ("fedbm-fedrep", FEDBM_SMALL),
    "fedrod": ("fedbm-fedrod", FEDBM_SMALL),
    "fednh": ("fedbm-fednh", FEDBM_SMALL),
    "fedproto": ("fedbm-fedproto", FEDBM_SMALL),
    "fedetf": ("fedbm-fedetf", FEDBM_SMALL),
}
# The shipped presets that SETUPS does not name, each with the small-data overrides of its family.
MORE_PRESETS = {
    # SMALL samples 2 clients a round, so the preset's z = 1 adds noise of sd z C / m = 0.25 a coordinate: over the drift
    # check's 30 rounds the model diverges (round 11); z = 0.1 keeps the DP path learning there (73% after 30 rounds)
    "dp-fedavg-cnn": ["data.dataset=digits", "privacy.noise_multiplier=0.1"],
    "fedavg-linear": STANDIN,
    "mfcl-bn": SETUPS["mfcl"][1],
    "mfcl-gn": SETUPS["mfcl"][1],
    "fedsimclr": SETUPS["fedsimclr"][1],
    "fedsimclr-gn": SETUPS["fedsimclr"][1],
    "mfcl-fedavg": SMALL_IMAGES,
    "mfcl-fedprox": SMALL_IMAGES,
    "fedbm-fedavg": FEDBM_SMALL,
    "fedbm-scaffold": FEDBM_SMALL,
    "fedbm-fedprox": FEDBM_SMALL,
    # Krum needs n >= 2f + 3 clients a round, SMALL samples 2: its small runs take the median (the attack stays).
    # Synthetic(1, 1) is its own small data: one local epoch instead of the paper's 20 keeps a round short.
    "fedavg-synthetic": ["federation.local_epochs=1"],
    "krum-fedavg-cnn": ["data.dataset=digits", "algorithm.aggregation_rule=median", "algorithm.krum_f=0"],
}
# Every shipped preset -> its overrides on small data (a setup that runs another algorithm on a preset is not the preset's run).
PRESETS = {**{preset: overrides for preset, overrides in SETUPS.values() if not any(o.startswith("algorithm.name=") for o in overrides)}, **MORE_PRESETS}
# A small federation, one round of every stage: 8 clients, 2 of them sampled.
SMALL = ["federation.num_clients=8", "federation.fraction=0.25", "federation.rounds=1"]
