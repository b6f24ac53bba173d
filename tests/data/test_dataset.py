"""Dataset loaders: each test writes tiny files in the real on-disk format and loads them back.

Checks shapes, dtypes, label mapping, class names and, with a marked pixel, that the
channel/row/column order lands at ``[i, c, h, w]``. No test touches the network.
"""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from fedprior.data import DATASETS, load_dataset
from fedprior.errors import ConfigError, DatasetNotFoundError

CINIC_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


@pytest.fixture(autouse=True)
def offline_and_isolated(tmp_path, monkeypatch):
    """Point the user cache and $HOME into tmp_path, and fail the test if anything opens a URL."""
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    calls: list[str] = []

    def no_network(url, *args, **kwargs):
        calls.append(str(url))
        pytest.fail(f"network access without download=True: {url}")

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    return calls


# ----------------------------------------------------------------------------- CIFAR


def _cifar_batch(labels: list[int], label_key: bytes, marks: dict[int, tuple[int, int, int, int]]) -> dict:
    """A CIFAR batch dict (bytes keys) whose image i has value v at (c, h, w) for marks[i] = (c, h, w, v)."""
    data = np.zeros((len(labels), 3072), dtype=np.uint8)
    for i, (c, h, w, value) in marks.items():
        data[i, c * 1024 + h * 32 + w] = value
    return {b"batch_label": b"testing batch", label_key: labels, b"data": data, b"filenames": [b"x.png"] * len(labels)}


def _dump(obj, path: Path, legacy: bool = True) -> None:
    """Pickle with protocol 2; ``legacy`` names numpy's module as numpy 1.x did (as in the official files)."""
    data = pickle.dumps(obj, protocol=2)
    if legacy:
        data = data.replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    path.write_bytes(data)


def write_cifar10(folder: Path) -> None:
    """Five train batches of 2 images and a test batch of 3, the second train image of batch 3 marked."""
    folder.mkdir(parents=True)
    for k in range(1, 6):
        marks = {1: (1, 4, 7, 200)} if k == 3 else {}
        _dump(_cifar_batch([k, 9 - k], b"labels", marks), folder / f"data_batch_{k}")
    _dump(_cifar_batch([0, 5, 9], b"labels", {2: (2, 31, 0, 77)}), folder / "test_batch")
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
    _dump({b"num_cases_per_batch": 10000, b"label_names": names, b"num_vis": 3072}, folder / "batches.meta")


@pytest.mark.parametrize("subfolder", [True, False], ids=["root-is-parent", "root-is-folder"])
def test_cifar10_layout_labels_and_names(tmp_path, subfolder):
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar10(folder)
    dataset = load_dataset("cifar10", root=tmp_path if subfolder else folder)

    assert dataset.train_images.shape == (10, 3, 32, 32) and dataset.train_images.dtype == np.uint8
    assert dataset.test_images.shape == (3, 3, 32, 32)
    assert dataset.train_labels.dtype == np.int64
    assert dataset.train_labels.tolist() == [1, 8, 2, 7, 3, 6, 4, 5, 5, 4]
    assert dataset.test_labels.tolist() == [0, 5, 9]
    assert dataset.class_names[0] == "airplane" and dataset.class_names[9] == "truck"
    # batch 3, image 1 -> train index 5; marked green plane, row 4, column 7
    assert dataset.train_images[5, 1, 4, 7] == 200
    assert dataset.train_images.sum() == 200
    assert dataset.test_images[2, 2, 31, 0] == 77
    assert dataset.test_images.sum() == 77


def test_cifar100_fine_labels_and_names(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    train = _cifar_batch([0, 99, 42, 7], b"fine_labels", {3: (0, 0, 31, 123)})
    train[b"coarse_labels"] = [0, 19, 5, 3]
    test = _cifar_batch([99, 1], b"fine_labels", {})
    test[b"coarse_labels"] = [19, 1]
    _dump(train, folder / "train", legacy=False)  # as re-pickled under numpy 2
    _dump(test, folder / "test")
    fine = [f"fine{i:02d}".encode() for i in range(100)]
    _dump({b"fine_label_names": fine, b"coarse_label_names": [b"c"] * 20}, folder / "meta")

    dataset = load_dataset("cifar100", root=tmp_path)
    assert dataset.num_classes == 100 and dataset.class_names[42] == "fine42"
    assert dataset.train_labels.tolist() == [0, 99, 42, 7]
    assert dataset.test_labels.tolist() == [99, 1]
    assert dataset.train_images.shape == (4, 3, 32, 32)
    assert dataset.train_images[3, 0, 0, 31] == 123 and dataset.train_images.sum() == 123


class _Evil:
    """Unpickling this would call os.system; the CIFAR reader must refuse it."""

    def __reduce__(self):
        import os

        return (os.system, ("echo pwned",))


def test_cifar_refuses_pickles_that_run_code(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar10(folder)
    _dump({b"data": _Evil(), b"labels": []}, folder / "data_batch_2")
    with pytest.raises(DatasetNotFoundError, match="data_batch_2.*refusing"):
        load_dataset("cifar10", root=tmp_path)


def test_cifar_download_unpacks_into_root_or_cache(tmp_path, monkeypatch):
    """download=True fetches the .tar.gz (faked here) into data.root (the only place looked at) or, unset, the user cache."""
    source = tmp_path / "source"
    write_cifar10(source / "cifar-10-batches-py")
    fetched: list[str] = []

    def fake_download(url, destination, timeout=30.0):
        fetched.append(url)
        destination.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(destination, "w:gz") as tar:
            tar.add(source / "cifar-10-batches-py", arcname="cifar-10-batches-py")
        return destination

    monkeypatch.setattr("fedprior.data.cifar.download_file", fake_download)
    with pytest.raises(DatasetNotFoundError):
        load_dataset("cifar10", root=tmp_path / "empty")  # no download without asking
    assert fetched == []
    dataset = load_dataset("cifar10", root=tmp_path / "empty", download=True)
    assert fetched == ["https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"]
    assert dataset.train_images.shape == (10, 3, 32, 32)
    root = tmp_path / "empty"
    assert (root / "cifar-10-batches-py" / "test_batch").is_file()
    assert not (root / "cifar-10-python.tar.gz").exists()
    cache = tmp_path / "cache" / "datasets" / "cifar10"
    assert not cache.exists()
    load_dataset("cifar10", download=True)
    assert (cache / "cifar-10-batches-py" / "test_batch").is_file()
    assert len(fetched) == 2


def test_archive_extraction_refuses_paths_outside_destination(tmp_path):
    from fedprior.data.archive import extract_tar

    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    with pytest.raises(DatasetNotFoundError, match="could not unpack"):
        extract_tar(archive, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()


# ----------------------------------------------------------------------------- CINIC-10


def _png(path: Path, pixels: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def write_cinic(folder: Path) -> None:
    """One PNG per class in train/ and test/, two in valid/; train/bird's image has a marked pixel."""
    for split in ("train", "valid", "test"):
        for label, cls in enumerate(CINIC_CLASSES):
            for k in range(2 if split == "valid" else 1):
                pixels = np.full((32, 32, 3), label, dtype=np.uint8)
                if split == "train" and cls == "bird":
                    pixels[3, 5] = (10, 200, 30)  # row 3, column 5: R, G, B
                _png(folder / split / cls / f"{cls}_{k}.png", pixels)
    # a grayscale PNG (CINIC-10 has some): must come back as three equal channels
    _png(folder / "test" / "truck" / "gray.png", np.full((32, 32), 250, dtype=np.uint8))


def test_cinic10_layout_labels_and_cache(tmp_path):
    folder = tmp_path / "CINIC-10"
    write_cinic(folder)
    dataset = load_dataset("cinic10", root=tmp_path)  # root is the parent of CINIC-10/

    assert dataset.class_names == CINIC_CLASSES
    assert dataset.train_images.shape == (10, 3, 32, 32) and dataset.train_images.dtype == np.uint8
    assert dataset.test_images.shape == (11, 3, 32, 32)  # valid/ is not used
    assert dataset.train_labels.dtype == np.int64
    assert dataset.train_labels.tolist() == list(range(10))
    assert dataset.test_labels.tolist() == [*range(10), 9]
    bird = dataset.train_labels.tolist().index(2)
    assert dataset.train_images[bird, :, 3, 5].tolist() == [10, 200, 30]
    assert dataset.train_images[bird, :, 0, 0].tolist() == [2, 2, 2]
    gray = [i for i, image in enumerate(dataset.test_images) if image[0, 0, 0] == 250]
    assert len(gray) == 1 and dataset.test_images[gray[0]].min() == 250

    cached = list((tmp_path / "cache" / "datasets" / "cinic10" / "decoded").glob("*.npz"))
    assert len(cached) == 2  # train and test
    # Same folder, same file count -> the decoded cache is used (a changed pixel is not re-read) ...
    _png(folder / "train" / "bird" / "bird_0.png", np.zeros((32, 32, 3), dtype=np.uint8))
    again = load_dataset("cinic10", root=folder)
    np.testing.assert_array_equal(again.train_images, dataset.train_images)
    # ... and a new file changes the key, so the folder is decoded afresh.
    _png(folder / "train" / "ship" / "ship_1.png", np.full((32, 32, 3), 8, dtype=np.uint8))
    fresh = load_dataset("cinic10", root=folder)
    assert fresh.train_images.shape == (11, 3, 32, 32)
    assert fresh.train_images[fresh.train_labels.tolist().index(2)].max() == 0


def test_cinic10_missing_class_folder_is_not_found(tmp_path):
    write_cinic(tmp_path)
    for png in (tmp_path / "test" / "frog").iterdir():
        png.unlink()
    (tmp_path / "test" / "frog").rmdir()
    with pytest.raises(DatasetNotFoundError) as error:
        load_dataset("cinic10", root=tmp_path)
    assert "frog" in str(error.value) and str(tmp_path) in str(error.value)


# ----------------------------------------------------------------------------- SVHN


def write_svhn_mat(path: Path, labels: list[int], mark: tuple[int, int, int, int, int] | None = None) -> None:
    """An SVHN .mat: X (32, 32, 3, N) uint8, y (N, 1); mark = (n, c, h, w, value)."""
    from scipy.io import savemat

    x = np.zeros((32, 32, 3, len(labels)), dtype=np.uint8)
    if mark:
        n, c, h, w, value = mark
        x[h, w, c, n] = value
    savemat(path, {"X": x, "y": np.array(labels, dtype=np.uint8).reshape(-1, 1)})


def test_svhn_layout_and_label_ten_is_zero(tmp_path):
    write_svhn_mat(tmp_path / "train_32x32.mat", [10, 1, 9, 10], mark=(2, 1, 6, 30, 99))
    write_svhn_mat(tmp_path / "test_32x32.mat", [5, 10], mark=(1, 2, 0, 31, 42))
    dataset = load_dataset("svhn", root=tmp_path)

    assert dataset.class_names == tuple("0123456789")
    assert dataset.train_images.shape == (4, 3, 32, 32) and dataset.train_images.dtype == np.uint8
    assert dataset.train_labels.dtype == np.int64
    assert dataset.train_labels.tolist() == [0, 1, 9, 0]
    assert dataset.test_labels.tolist() == [5, 0]
    assert dataset.train_images[2, 1, 6, 30] == 99 and dataset.train_images.sum() == 99
    assert dataset.test_images[1, 2, 0, 31] == 42 and dataset.test_images.sum() == 42


def test_svhn_rejects_labels_outside_one_to_ten(tmp_path):
    write_svhn_mat(tmp_path / "train_32x32.mat", [0, 3])
    write_svhn_mat(tmp_path / "test_32x32.mat", [1])
    with pytest.raises(DatasetNotFoundError, match="1..10"):
        load_dataset("svhn", root=tmp_path)


# ----------------------------------------------------------------------------- MedMNIST


def write_medmnist(path: Path, channels: int, size: int = 28, num_classes: int = 4) -> None:
    """A MedMNIST .npz with 5/2/3 train/val/test images; train image 4 is marked at (c=last, h=2, w=size-1)."""

    def images(n):
        shape = (n, size, size) if channels == 1 else (n, size, size, 3)
        return np.zeros(shape, dtype=np.uint8)

    train = images(5)
    if channels == 1:
        train[4, 2, size - 1] = 180
    else:
        train[4, 2, size - 1, 2] = 180
    np.savez(
        path,
        train_images=train,
        train_labels=(np.arange(5) % num_classes).reshape(-1, 1).astype(np.uint8),
        val_images=images(2),
        val_labels=np.zeros((2, 1), dtype=np.uint8),
        test_images=images(3),
        test_labels=np.array([[num_classes - 1], [0], [1]], dtype=np.uint8),
    )


def test_medmnist_grayscale(tmp_path):
    write_medmnist(tmp_path / "octmnist.npz", channels=1)
    dataset = load_dataset("octmnist", root=tmp_path)
    assert dataset.class_names == ("choroidal neovascularization", "diabetic macular edema", "drusen", "normal")
    assert dataset.train_images.shape == (5, 1, 28, 28) and dataset.train_images.dtype == np.uint8
    assert dataset.test_images.shape == (3, 1, 28, 28)  # val is ignored
    assert dataset.train_labels.dtype == np.int64 and dataset.train_labels.tolist() == [0, 1, 2, 3, 0]
    assert dataset.test_labels.tolist() == [3, 0, 1]
    assert dataset.train_images[4, 0, 2, 27] == 180 and dataset.train_images.sum() == 180


def test_medmnist_rgb_and_larger_size_file(tmp_path):
    write_medmnist(tmp_path / "bloodmnist.npz", channels=3, num_classes=8)
    dataset = load_dataset("bloodmnist", root=tmp_path)
    assert dataset.train_images.shape == (5, 3, 28, 28)
    assert dataset.train_images[4, 2, 2, 27] == 180 and dataset.train_images.sum() == 180
    assert dataset.class_names[3].startswith("immature granulocytes")

    big = tmp_path / "bloodmnist_64.npz"
    write_medmnist(big, channels=3, size=64, num_classes=8)
    dataset = load_dataset("bloodmnist", root=big)  # data.root may name the file itself
    assert dataset.train_images.shape == (5, 3, 64, 64)
    assert dataset.train_images[4, 2, 2, 63] == 180


def test_medmnist_registered_class_counts():
    from fedprior.data.medmnist import INFO

    counts = {flag: len(info.class_names) for flag, info in INFO.items()}
    assert counts == {"bloodmnist": 8, "dermamnist": 7, "octmnist": 4, "pathmnist": 9, "organamnist": 11}
    assert set(counts) <= set(DATASETS)
    assert INFO["pathmnist"].class_names[8] == "colorectal adenocarcinoma epithelium"
    assert INFO["organamnist"].class_names[10] == "spleen"


def test_medmnist_found_in_user_cache(tmp_path):
    cache = tmp_path / "cache" / "datasets" / "medmnist"
    cache.mkdir(parents=True)
    write_medmnist(cache / "dermamnist.npz", channels=3, num_classes=7)
    dataset = load_dataset("dermamnist", root=None)
    assert dataset.num_classes == 7 and dataset.train_images.shape == (5, 3, 28, 28)


# ----------------------------------------------------------------------------- missing files, no network

MISSING = {
    "cifar10": (["data_batch_1", "test_batch", "batches.meta"], "cifar-10-python.tar.gz"),
    "cifar100": (["train", "test", "meta"], "cifar-100-python.tar.gz"),
    "cinic10": (["train/", "test/"], "datashare.ed.ac.uk/handle/10283/3192"),
    "svhn": (["train_32x32.mat", "test_32x32.mat"], "ufldl.stanford.edu/housenumbers"),
    "bloodmnist": (["bloodmnist.npz"], "zenodo.org/records/10519652"),
    "dermamnist": (["dermamnist.npz"], "zenodo.org/records/10519652"),
    "octmnist": (["octmnist.npz"], "zenodo.org/records/10519652"),
    "pathmnist": (["pathmnist.npz"], "zenodo.org/records/10519652"),
    "organamnist": (["organamnist.npz"], "zenodo.org/records/10519652"),
    "kvasir": (["train/<class>/", "<class>/", "dyed-lifted-polyps"], "datasets.simula.no/kvasir"),
    "oct-c8": (["train/<class>/", "test/<class>/", "DRUSEN"], "kaggle.com/datasets/obulisainaren/retinal-oct-c8"),
    "femnist": (["all_data_*.json"], "github.com/TalwalkarLab/leaf"),
    "digit5": (["mnist_data.mat", "mnistm_with_label.mat", "svhn_train_32x32.mat", "syn_number.mat", "usps_28x28.mat"], "github.com/FengHZ/KD3A"),
    "domainnet": (["<domain>/<class>/", "<domain>_train.txt", "clipart"], "ai.bu.edu/M3SDA"),
    "office-caltech10": (["amazon/<class>/", "back_pack"], "github.com/med-air/FedBN"),
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_missing_dataset_names_files_folders_and_url(tmp_path, offline_and_isolated, name):
    files, url = MISSING[name]
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(DatasetNotFoundError) as error:
        load_dataset(name, root=root)
    message = str(error.value)
    for file in files:
        assert file in message
    assert f"data.root {root}" in message
    assert str(tmp_path / "cache" / "datasets") not in message  # data.root is the only place looked at
    assert url in message
    assert offline_and_isolated == []  # urlopen was never called


def test_every_registered_dataset_has_a_missing_case():
    embedded = {"fashion-mnist", "digits"}
    generated = {name for name, spec in DATASETS.items() if spec.generated}  # no files to miss
    assert generated == {"synthetic"}
    assert set(DATASETS) - embedded - generated <= set(MISSING), "add new datasets to MISSING"


def test_a_generated_dataset_has_no_training_set_to_load():
    with pytest.raises(ConfigError, match="^data.dataset: 'synthetic' is generated per client"):
        load_dataset("synthetic")


# ----------------------------------------------------------------------------- Fashion-MNIST and digits


def _idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_read_idx_plain_and_gzipped(tmp_path):
    from fedprior.data.fashion_mnist import read_idx

    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "a-idx3-ubyte").write_bytes(_idx_bytes(array))
    with gzip.open(tmp_path / "a-idx3-ubyte.gz", "wb") as handle:
        handle.write(_idx_bytes(array))
    for name in ("a-idx3-ubyte", "a-idx3-ubyte.gz"):
        read = read_idx(tmp_path / name)
        assert read.dtype == np.uint8 and read.shape == (2, 3, 4)
        np.testing.assert_array_equal(read, array)


def test_read_idx_truncated_and_bad_magic(tmp_path):
    from fedprior.data.fashion_mnist import read_idx

    data = _idx_bytes(np.ones((3, 5), dtype=np.uint8))
    (tmp_path / "short").write_bytes(data[:-2])
    with pytest.raises(DatasetNotFoundError, match="truncated: expected 15 values, found 13"):
        read_idx(tmp_path / "short")
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0c\x02" + data[4:])
    with pytest.raises(DatasetNotFoundError, match="bad magic"):
        read_idx(tmp_path / "bad")


def test_fashion_mnist_debian_copy():
    from fedprior.data.fashion_mnist import DEBIAN_DIR

    if not (DEBIAN_DIR / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"{DEBIAN_DIR} is absent (apt-get install dataset-fashion-mnist)")
    dataset = load_dataset("fashion-mnist")
    assert dataset.train_images.shape == (60000, 1, 28, 28) and dataset.train_images.dtype == np.uint8
    assert dataset.test_images.shape == (10000, 1, 28, 28)
    assert dataset.train_labels.dtype == np.int64
    assert np.bincount(dataset.train_labels).tolist() == [6000] * 10
    assert np.bincount(dataset.test_labels).tolist() == [1000] * 10
    assert dataset.class_names[9] == "ankle boot"
    assert dataset.train_images.max() == 255


def test_digits_shapes_and_fixed_test_split():
    first = load_dataset("digits")
    second = load_dataset("digits")
    assert first.train_images.shape == (1438, 1, 8, 8) and first.test_images.shape == (359, 1, 8, 8)
    assert first.train_images.dtype == np.uint8 and first.train_labels.dtype == np.int64
    assert first.train_images.max() == 255 and first.class_names == tuple("0123456789")
    # stratified: each class holds out round(20%) of its images
    per_class = np.bincount(first.train_labels, minlength=10) + np.bincount(first.test_labels, minlength=10)
    np.testing.assert_array_equal(np.bincount(first.test_labels, minlength=10), np.rint(0.2 * per_class))
    np.testing.assert_array_equal(first.test_images, second.test_images)
    np.testing.assert_array_equal(first.test_labels, second.test_labels)


# ----------------------------------------------------------------------------- CLI


def test_cli_datasets_lists_every_dataset_and_availability(tmp_path):
    from typer.testing import CliRunner

    from fedprior.cli import app

    write_svhn_mat(tmp_path / "train_32x32.mat", [1])
    write_svhn_mat(tmp_path / "test_32x32.mat", [2])
    result = CliRunner().invoke(app, ["datasets", "--root", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in result.output.splitlines() if line.count("│") >= 3}
    for name in DATASETS:
        assert name in rows
    assert rows["svhn"] == "yes"
    assert rows["cifar10"] == "no"
    assert rows["digits"] == "yes"


# ----------------------------------------------------------------------------- data.root is the only place (issue 7, item 5)


def write_fashion(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, array in {
        "train-images-idx3-ubyte.gz": np.zeros((4, 28, 28)),
        "train-labels-idx1-ubyte.gz": np.arange(4),
        "t10k-images-idx3-ubyte.gz": np.zeros((2, 28, 28)),
        "t10k-labels-idx1-ubyte.gz": np.arange(2),
    }.items():
        with gzip.open(folder / name, "wb") as handle:
            handle.write(_idx_bytes(array))


CACHED_COPY = {  # a valid copy where the loader looks when data.root is unset
    "fashion-mnist": lambda cache: write_fashion(cache / "fashion-mnist"),
    "cifar10": lambda cache: write_cifar10(cache / "cifar10" / "cifar-10-batches-py"),
    "svhn": lambda cache: [
        (cache / "svhn").mkdir(parents=True),
        write_svhn_mat(cache / "svhn" / "train_32x32.mat", [1]),
        write_svhn_mat(cache / "svhn" / "test_32x32.mat", [2]),
    ],
    "octmnist": lambda cache: [(cache / "medmnist").mkdir(parents=True), write_medmnist(cache / "medmnist" / "octmnist.npz", channels=1)],
}


@pytest.mark.parametrize("name", sorted(CACHED_COPY))
@pytest.mark.parametrize("root_state", ["missing", "empty"])
def test_a_root_without_the_files_is_an_error_not_a_fallback(tmp_path, name, root_state):
    CACHED_COPY[name](tmp_path / "cache" / "datasets")
    assert load_dataset(name).train_images.shape[0] > 0  # the default places hold a valid copy
    root = tmp_path / "data"
    if root_state == "empty":
        root.mkdir()
    with pytest.raises(DatasetNotFoundError, match=f"^data.root {root} {'does not exist' if root_state == 'missing' else 'is empty'}"):
        load_dataset(name, root=root)


def test_a_root_lacking_one_file_names_it(tmp_path):
    write_fashion(tmp_path / "data")
    (tmp_path / "data" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetNotFoundError, match=f"^data.root {tmp_path / 'data'} lacks t10k-labels-idx1-ubyte.gz:"):
        load_dataset("fashion-mnist", root=tmp_path / "data")
    write_fashion(tmp_path / "good")
    assert load_dataset("fashion-mnist", root=tmp_path / "good").source == str(tmp_path / "good")


def test_digits_reads_no_files_so_a_root_is_an_error(tmp_path):
    from fedprior.errors import ConfigError

    with pytest.raises(ConfigError, match="^data.root: dataset 'digits' is built into a Python package"):
        load_dataset("digits", root=tmp_path)


def test_read_idx_damaged_gzip_and_huge_header(tmp_path):
    from fedprior.data.fashion_mnist import read_idx

    data = gzip.compress(_idx_bytes(np.ones((3, 5), dtype=np.uint8)))
    (tmp_path / "cut.gz").write_bytes(data[:-10])
    with pytest.raises(DatasetNotFoundError, match="cut.gz is damaged \\(EOFError"):
        read_idx(tmp_path / "cut.gz")
    (tmp_path / "huge").write_bytes(bytes([0, 0, 8, 2]) + (2**32 - 1).to_bytes(4, "big") + (2**31).to_bytes(4, "big") + bytes(5))
    with pytest.raises(DatasetNotFoundError, match=f"expected {(2**32 - 1) * 2**31} values, found 5"):  # no int64 overflow
        read_idx(tmp_path / "huge")
