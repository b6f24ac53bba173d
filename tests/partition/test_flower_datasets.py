"""partition.scheme = "flwr:NAME": flwr-datasets' own partitioners split fedprior's training labels (the hf extra)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("flwr_datasets")

import datasets  # noqa: E402
from flwr_datasets import partitioner as flwr  # noqa: E402

from fedprior.errors import ConfigError  # noqa: E402
from fedprior.partition.config import PartitionConfig  # noqa: E402
from fedprior.partition.factory import make_partitioner  # noqa: E402
from fedprior.partition.flower_datasets import FlowerDatasetsPartitioner, accepted_names  # noqa: E402

LABELS = np.random.default_rng(1).integers(0, 10, 3000)


def flwr_own(partitioner, labels, num_clients, shuffle_seed=None):
    """flwr-datasets' partition of ``labels``, called directly: each partition's row positions (an index column carries them)."""
    table = datasets.Dataset.from_dict({"label": labels, "row": np.arange(labels.size)})
    if shuffle_seed is not None:  # what FederatedDataset(shuffle=True, seed=...) does before it partitions
        table = table.shuffle(seed=shuffle_seed)
    partitioner.dataset = table
    return [np.sort(np.asarray(partitioner.load_partition(c)["row"])) for c in range(num_clients)]


def same(ours, theirs):
    return len(ours) == len(theirs) and all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))


@pytest.mark.parametrize("seed", [0, 7])
def test_dirichlet_equals_flwr_datasets_own_partition_for_the_same_seed(seed):
    ours = FlowerDatasetsPartitioner("flwr:DirichletPartitioner", 12, seed, alpha=0.5, shuffle=False).split(LABELS)
    theirs = flwr_own(flwr.DirichletPartitioner(num_partitions=12, partition_by="label", alpha=0.5, seed=seed), LABELS, 12)
    assert same(ours, theirs)
    assert sorted(np.concatenate(ours).tolist()) == list(range(LABELS.size))  # every sample, once
    other = FlowerDatasetsPartitioner("flwr:DirichletPartitioner", 12, seed + 1, alpha=0.5, shuffle=False).split(LABELS)
    assert not same(ours, other)  # the run seed is the partitioner's seed


def test_shuffled_rows_are_federated_datasets_shuffle_with_the_run_seed():
    ours = FlowerDatasetsPartitioner("flwr:IidPartitioner", 5, 3).split(LABELS)
    assert same(ours, flwr_own(flwr.IidPartitioner(num_partitions=5), LABELS, 5, shuffle_seed=3))
    contiguous = FlowerDatasetsPartitioner("flwr:IidPartitioner", 5, 3, shuffle=False).split(LABELS)
    assert same(contiguous, np.array_split(np.arange(LABELS.size), 5))  # flwr's IidPartitioner: contiguous shards of the rows


@pytest.mark.parametrize(
    ("scheme", "fields", "theirs"),
    [
        ("flwr:ShardPartitioner", {"shards": 3}, lambda s: flwr.ShardPartitioner(num_partitions=8, partition_by="label", num_shards_per_partition=3, seed=s)),
        (
            "flwr:PathologicalPartitioner",
            {"window": 2},
            lambda s: flwr.PathologicalPartitioner(num_partitions=8, partition_by="label", num_classes_per_partition=2, seed=s),
        ),
        ("flwr:ExponentialPartitioner", {}, lambda s: flwr.ExponentialPartitioner(num_partitions=8)),
    ],
)
def test_fedprior_fields_go_to_the_arguments_of_the_same_meaning(scheme, fields, theirs):
    ours = FlowerDatasetsPartitioner(scheme, 8, 4, **fields).split(LABELS)
    assert same(ours, flwr_own(theirs(4), LABELS, 8, shuffle_seed=4))


def test_flwr_kwargs_reach_the_partitioner_and_override_the_fedprior_field():
    kwargs = {"alpha": [0.1] * 6, "min_partition_size": 0, "self_balancing": True}
    ours = FlowerDatasetsPartitioner("flwr:DirichletPartitioner", 6, 2, alpha=5.0, kwargs=kwargs, shuffle=False).split(LABELS)
    theirs = flwr_own(flwr.DirichletPartitioner(num_partitions=6, partition_by="label", seed=2, **kwargs), LABELS, 6)
    assert same(ours, theirs)


def test_natural_id_partitions_by_the_datasets_owners():
    groups = np.repeat(np.array(["w0", "w1", "w2", "w3"]), 750)
    parts = FlowerDatasetsPartitioner("flwr:NaturalIdPartitioner", 4, 0, groups=groups).split(LABELS)
    assert sorted(len(set(groups[p])) for p in parts) == [1, 1, 1, 1] and sorted(p.size for p in parts) == [750] * 4
    with pytest.raises(ConfigError, match=r"federation.num_clients: NaturalIdPartitioner makes 4 partitions of these data; set federation.num_clients = 4"):
        FlowerDatasetsPartitioner("flwr:NaturalIdPartitioner", 3, 0, groups=groups).split(LABELS)
    with pytest.raises(ConfigError, match=r"partition_by 'group' names no column of the training set \(the dataset has no natural owners"):
        FlowerDatasetsPartitioner("flwr:NaturalIdPartitioner", 3, 0)


@pytest.mark.parametrize(
    ("scheme", "kwargs", "message"),
    [
        (
            "flwr:Dirichlet",
            {},
            r"^partition.scheme: unknown flwr-datasets partitioner 'Dirichlet'; accepted: flwr:ContinuousPartitioner, flwr:DirichletPartitioner, ",
        ),
        ("flwr:VerticalEvenPartitioner", {}, r"unknown flwr-datasets partitioner 'VerticalEvenPartitioner'"),
        (
            "flwr:DirichletPartitioner",
            {"min_size": 3},
            r"^partition.flwr_kwargs: DirichletPartitioner takes no argument 'min_size'; accepted: partition_by, alpha, min_partition_size, self_balancing, shuffle$",
        ),
        ("flwr:DirichletPartitioner", {"seed": 3}, r"^partition.flwr_kwargs: 'seed' is set by run.seed; remove it from flwr_kwargs$"),
        ("flwr:InnerDirichletPartitioner", {}, r"^partition.flwr_kwargs: InnerDirichletPartitioner: missing a required argument: 'partition_sizes'$"),
        (
            "flwr:DirichletPartitioner",
            {"alpha": [0.5, 0.5]},
            r"^partition.flwr_kwargs: DirichletPartitioner refuses .*: If passing alpha as a List, it needs to be of length of equal to num_partitions",
        ),
    ],
)
def test_bad_names_and_arguments_are_one_line_config_errors_before_any_data(scheme, kwargs, message):
    with pytest.raises(ConfigError, match=message) as caught:
        FlowerDatasetsPartitioner(scheme, 10, 0, kwargs=kwargs)
    assert "\n" not in str(caught.value)


def test_the_accepted_names_are_the_row_partitioners_of_flwr_datasets():
    names = accepted_names()
    assert {"IidPartitioner", "DirichletPartitioner", "ShardPartitioner", "LinearPartitioner", "SquarePartitioner", "ExponentialPartitioner"} <= set(names)
    assert {"NaturalIdPartitioner", "InnerDirichletPartitioner", "PathologicalPartitioner"} <= set(names)
    assert not {"Partitioner", "VerticalSizePartitioner", "IdToSizeFncPartitioner"} & set(names)


def test_a_labeled_split_partitions_each_set_through_flwr_datasets():
    config = PartitionConfig(scheme="flwr:DirichletPartitioner", num_labeled=200, flwr_kwargs={"min_partition_size": 0})
    split = make_partitioner(config, 5, 1).partition(LABELS)
    assert set(split.roles) == {"labeled", "unlabeled"} and sum(p.size for p in split.roles["labeled"]) == 200


def experiment(scheme_overrides, tmp_path, runtime="local"):
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    overrides = ["data.dataset=digits", "federation.num_clients=6", "federation.rounds=2", "federation.fraction=0.5", "run.threads=1", "run.workers=1"]
    name, config = load_config("fedavg-cnn", [*overrides, *scheme_overrides, f"run.runtime='{runtime}'"])
    return start(name, config, tmp_path / "run", report_extras=False), config


def test_flwr_dirichlet_runs_fedavg_cnn_end_to_end_on_flwr_datasets_own_split(tmp_path, shared_cache, one_torch_thread):
    from fedprior.data import load_dataset

    result, config = experiment(["partition.scheme='flwr:DirichletPartitioner'", "partition.alpha=0.5"], tmp_path)
    assert result["partition"] == "flwr:DirichletPartitioner" and "flwr-datasets DirichletPartitioner" in result["description"]
    assert len(result["history"]) == 2 and all(0 <= a <= 1 for a in result["history"])
    labels = load_dataset("digits").train_labels
    theirs = flwr_own(
        flwr.DirichletPartitioner(num_partitions=6, partition_by="label", alpha=0.5, seed=config.run.seed), labels, 6, shuffle_seed=config.run.seed
    )
    stored = np.load(tmp_path / "run" / "partition.npz")
    assert same([stored[f"train/{c}"] for c in range(6)], theirs)
    counts = json.loads((tmp_path / "run" / "partition.json").read_text())["class_counts"]
    assert counts == [np.bincount(labels[p], minlength=10).tolist() for p in theirs]  # fedprior's statistics of flwr's split


def test_the_config_check_refuses_bad_flwr_fields_before_any_data():
    from fedprior.experiments.config import load_config

    with pytest.raises(ConfigError, match=r"partition.flwr_kwargs: applies to partition.scheme = 'flwr:NAME' only \(it is 'dirichlet'\)"):
        load_config("fedavg-cnn", ["partition.flwr_kwargs={min_partition_size = 0}"])
    with pytest.raises(ConfigError, match=r"partition.scheme: unknown flwr-datasets partitioner 'Nope'; accepted: flwr:"):
        load_config("fedavg-cnn", ["partition.scheme='flwr:Nope'"])
    with pytest.raises(ConfigError, match=r"partition.scheme: unknown scheme 'lda'; accepted: iid, shard, dirichlet, window, natural, quantity, or 'flwr:'"):
        load_config("fedavg-cnn", ["partition.scheme=lda"])
