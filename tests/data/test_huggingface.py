"""data.dataset = "hf:PATH": a Hugging Face dataset read offline from a folder; `fedprior datasets export` writes one (the hf extra)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

pytest.importorskip("datasets")

import datasets  # noqa: E402
from PIL import Image  # noqa: E402

from fedprior.data import load_dataset  # noqa: E402
from fedprior.data.fashion_mnist import DEBIAN_DIR  # noqa: E402
from fedprior.data.huggingface import export_hf  # noqa: E402
from fedprior.errors import ConfigError, DatasetError, DatasetNotFoundError  # noqa: E402

FASHION_MNIST_HERE = (DEBIAN_DIR / "train-images-idx3-ubyte.gz").is_file()


@pytest.fixture(autouse=True)
def own_cache(monkeypatch, tmp_path):
    """datasets' cache of what it builds from parquet files or an imagefolder goes under FEDPRIOR_CACHE: here, the test's own."""
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def digits_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "digits"
    export_hf(load_dataset("digits"), folder)
    return folder


def assert_same_data(a, b):
    for field in ("train_images", "train_labels", "test_images", "test_labels"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), field
    assert a.class_names == b.class_names


def test_an_export_reads_back_with_identical_images_labels_and_class_names(digits_export, no_network):
    loaded = load_dataset(f"hf:{digits_export}")
    assert_same_data(loaded, load_dataset("digits"))
    assert loaded.name == f"hf:{digits_export}" and loaded.source == str(digits_export)
    saved = datasets.load_from_disk(str(digits_export))
    assert saved["train"].features["label"].names == list(loaded.class_names) and type(saved["train"].features["image"]).__name__ == "Image"


def test_natural_owners_round_trip_as_the_group_column(tmp_path, no_network):
    from dataclasses import replace

    digits = load_dataset("digits")
    writers = np.array([f"w{i % 4}" for i in range(digits.train_labels.size)])
    export_hf(replace(digits, train_groups=writers), tmp_path / "owned")
    assert load_dataset(f"hf:{tmp_path / 'owned'}").train_groups is None  # read only where asked
    loaded = load_dataset(f"hf:{tmp_path / 'owned'}", group_column="group")
    assert np.array_equal(loaded.train_groups, writers)
    assert_same_data(loaded, digits)
    from fedprior.experiments.config import load_config
    from fedprior.experiments.dry_run import dry_run

    owned = [f"data.dataset='hf:{tmp_path / 'owned'}'", "data.group_column=group", "federation.num_clients=4"]
    for scheme in ("natural", "flwr:NaturalIdPartitioner"):  # one client per owner, fedprior's natural scheme and flwr-datasets'
        plan = dry_run(load_config("fedavg-cnn", [*owned, f"partition.scheme='{scheme}'"])[1])
        assert sorted(plan["roles"]["train"]["client_sizes"]) == sorted(np.unique(writers, return_counts=True)[1].tolist()), scheme


def test_parquet_files_read_as_the_same_dataset(digits_export, tmp_path, no_network):
    saved = datasets.load_from_disk(str(digits_export))
    folder = tmp_path / "parquet"
    folder.mkdir()
    for split in ("train", "test"):
        saved[split].to_parquet(str(folder / f"{split}.parquet"))
    assert_same_data(load_dataset(f"hf:{folder}"), load_dataset("digits"))
    assert (tmp_path / "cache" / "huggingface").is_dir()  # not the user's cache


def test_an_imagefolder_reads_with_its_folder_names_as_classes(tmp_path, no_network):
    rng = np.random.default_rng(0)
    written = {}
    for split in ("train", "test"):
        for name in ("cat", "dog"):
            (tmp_path / "images" / split / name).mkdir(parents=True)
            for i in range(3):
                pixels = rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(tmp_path / "images" / split / name / f"{i}.png")
                written.setdefault((split, name), []).append(pixels.transpose(2, 0, 1))
    data = load_dataset(f"hf:{tmp_path / 'images'}")
    assert data.class_names == ("cat", "dog") and data.train_images.shape == (6, 3, 5, 6) and data.test_images.shape == (6, 3, 5, 6)
    for split in ("train", "test"):
        images, labels = getattr(data, f"{split}_images"), getattr(data, f"{split}_labels")
        for image, label in zip(images, labels, strict=True):  # each image under its own class, whatever the order
            assert any(np.array_equal(image, w) for w in written[(split, data.class_names[label])])


def test_columns_other_than_the_defaults_and_plain_integer_labels(tmp_path, no_network):
    images = np.arange(4 * 3 * 3, dtype=np.uint8).reshape(4, 3, 3)
    table = datasets.Dataset.from_dict({"pixels": images.tolist(), "target": [2, 0, 1, 2]})
    datasets.DatasetDict({"train": table, "test": table}).save_to_disk(str(tmp_path / "plain"))
    with pytest.raises(ConfigError, match=r"^data.image_column: hf:.* has none of the columns image, img; set data.image_column to one of: pixels, target$"):
        load_dataset(f"hf:{tmp_path / 'plain'}")
    data = load_dataset(f"hf:{tmp_path / 'plain'}", image_column="pixels", label_column="target")
    assert np.array_equal(data.train_images, images[:, None]) and data.train_labels.tolist() == [2, 0, 1, 2] and data.class_names == ("0", "1", "2")
    with pytest.raises(ConfigError, match=r"^data.label_column: hf:.* has no column 'label'; its columns: pixels, target$"):
        load_dataset(f"hf:{tmp_path / 'plain'}", image_column="pixels", label_column="label")


def test_a_missing_folder_fails_at_once_saying_what_to_put_where_without_the_network(tmp_path, no_network):
    missing = tmp_path / "nothing"
    with pytest.raises(DatasetNotFoundError) as caught:
        load_dataset(f"hf:{missing}")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"data.dataset: {missing} does not exist; put a Hugging Face dataset there")
    assert f"fedprior datasets export NAME {missing}" in message and "data.download = true" in message


def test_only_download_lets_a_hub_name_through_and_only_for_that_call(monkeypatch, digits_export):
    saved = datasets.load_from_disk(str(digits_export))
    calls = []

    def hub(name, **kwargs):  # stands for the Hub: records the name and whether datasets was let online
        calls.append((name, datasets.config.HF_HUB_OFFLINE))
        return saved

    def from_disk(path, **kwargs):
        calls.append((path, datasets.config.HF_HUB_OFFLINE))
        return saved

    monkeypatch.setattr(datasets, "load_dataset", hub)
    monkeypatch.setattr(datasets, "load_from_disk", from_disk)
    before = datasets.config.HF_HUB_OFFLINE
    with pytest.raises(DatasetNotFoundError, match="or set data.download = true to fetch it from the Hub by name"):
        load_dataset("hf:someone/some-set")
    assert calls == []
    loaded = load_dataset("hf:someone/some-set", download=True)
    assert calls == [("someone/some-set", False)] and datasets.config.HF_HUB_OFFLINE == before  # online for that call only
    assert_same_data(loaded, load_dataset("digits"))
    load_dataset(f"hf:{digits_export}", download=True)  # a local folder stays offline even where a download is allowed
    load_dataset(f"hf:{digits_export}")
    assert calls[1:] == [(str(digits_export), True), (str(digits_export), True)]


def test_a_folder_without_a_test_split_is_refused(tmp_path):
    table = datasets.Dataset.from_dict({"image": [np.zeros((2, 2), dtype=np.uint8)], "label": [0]})
    datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / "one"))
    with pytest.raises(DatasetError, match=r"no 'test' split \(it has train\); fedprior needs 'train' and 'test'"):
        load_dataset(f"hf:{tmp_path / 'one'}")


def test_hf_fields_are_checked_with_the_config():
    from fedprior.experiments.config import load_config

    with pytest.raises(ConfigError, match=r"^data.image_column: applies to data.dataset = 'hf:PATH' only \(it is 'digits'\); remove it$"):
        load_config("fedavg-cnn", ["data.dataset=digits", "data.image_column=img"])
    with pytest.raises(ConfigError, match=r"^data.group_column: applies to data.dataset = 'hf:PATH' only \(it is 'femnist'\); remove it$"):
        load_config("fedavg-cnn", ["data.dataset=femnist", "data.group_column=writer"])
    with pytest.raises(ConfigError, match=r"^data.root: hf:/x names its own folder; remove data.root$"):
        load_config("fedavg-cnn", ["data.dataset='hf:/x'", "data.root=/y"])
    with pytest.raises(ConfigError, match=r"^data.dataset: 'hf:' needs a folder"):
        load_dataset("hf:")


@pytest.fixture(scope="module")
def fashion_mnist_export(tmp_path_factory):
    if not FASHION_MNIST_HERE:
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); the digits round-trip covers the format")
    folder = tmp_path_factory.mktemp("hf") / "fashion-mnist"
    export_hf(load_dataset("fashion-mnist"), folder)
    return folder


@pytest.mark.slow
def test_fashion_mnist_round_trips_through_its_export(fashion_mnist_export, no_network):
    assert_same_data(load_dataset(f"hf:{fashion_mnist_export}"), load_dataset("fashion-mnist"))


@pytest.mark.slow
def test_a_run_on_the_fashion_mnist_export_gives_the_shipped_loaders_numbers(fashion_mnist_export, tmp_path, shared_cache, one_torch_thread):
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import start

    tiny = ["data.train_subset=600", "federation.num_clients=4", "federation.rounds=2", "federation.fraction=0.5", "run.threads=1", "run.workers=1"]
    results = {}
    for dataset in ("fashion-mnist", f"hf:{fashion_mnist_export}"):
        name, config = load_config("fedavg-cnn", [*tiny, f"data.dataset='{dataset}'"])
        results[dataset] = start(name, config, tmp_path / dataset.replace("/", "_"), report_extras=False)
    shipped, exported = results.values()
    assert exported["dataset"] != shipped["dataset"]
    for key in ("history", "initial_accuracy", "final_accuracy", "round_fingerprints"):
        assert exported[key] == shipped[key], key
