"""FEMNIST (LEAF, Caldas et al. 2018) from LEAF's JSON files, in FedBM's writer split (the FedBM
paper, "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning", Sec. IV-A1).

LEAF's preprocessing writes ``all_data_*.json`` files, each
``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [[784 floats in [0, 1]], ...], "y": [...]}}}``
(28 x 28 grayscale, 62 classes: digits, upper-case, lower-case letters). FedBM keeps the
writers with fewer than 150 samples, draws 50 of them, and splits the writers 35 / 5 / 10
into training, validation and test sets; each training writer is a client (the
``natural`` partition, ``federation.num_clients = 35``). The draw here is fixed (stream
("femnist-writers",), seed 0), the same for every run, where the paper draws per
experiment. Pixels become uint8 (x * 255, rounded).

The JSON files are looked for in ``data.root``, ``data.root/all_data``,
``data.root/data/all_data`` and the user cache; the selection is cached as an ``.npz``.
"""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.image_folder import write_npz
from fedprior.data.locations import dataset_cache_dir
from fedprior.errors import DatasetNotFoundError
from fedprior.seeding import numpy_rng

NAME = "femnist"
URL = "https://github.com/TalwalkarLab/leaf (data/femnist: ./preprocess.sh -s niid --sf 1.0 -k 0 -t sample)"
MAX_SAMPLES, WRITERS, SPLIT = 150, 50, (35, 5, 10)
CLASS_NAMES = tuple(
    [f"digit {d}" for d in string.digits] + [f"capital letter {c}" for c in string.ascii_uppercase] + [f"small letter {c}" for c in string.ascii_lowercase]
)


def locate_femnist(root: Path | None) -> list[Path]:
    """The ``*.json`` files of the first searched folder that has any."""
    base = root if root else dataset_cache_dir(NAME)  # data.root, when set, is the only place looked at
    folders = [base, base / "all_data", base / "data" / "all_data"]
    for folder in folders:
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if files:
            return files
    if root:
        state = "does not exist" if not root.exists() else "is empty" if root.is_dir() and not any(root.iterdir()) else "lacks them"
        raise DatasetNotFoundError(
            f"data.root {root} {state}: dataset '{NAME}' needs LEAF's all_data_*.json files there "
            f"(or in {folders[1]}, {folders[2]}); make them with {URL}, or leave data.root unset to use the default places"
        )
    searched = "\n".join(f"  {folder}" for folder in folders)
    raise DatasetNotFoundError(
        f"dataset '{NAME}' not found: put LEAF's all_data_*.json files in one of\n{searched}\n(make them with {URL}, or pass --set data.root=FOLDER)"
    )


def read_writers(files: list[Path]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every writer's (uint8 images (n, 1, 28, 28), int64 labels) from LEAF JSON files."""
    writers = {}
    for path in files:
        try:
            blob = json.loads(path.read_text())
            for user in blob["users"]:
                data = blob["user_data"][user]
                x = np.rint(np.asarray(data["x"], dtype=np.float32) * 255).clip(0, 255).astype(np.uint8)
                writers[user] = (x.reshape(-1, 1, 28, 28), np.asarray(data["y"], dtype=np.int64))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DatasetNotFoundError(f"{path} is not a LEAF FEMNIST JSON file ({error})") from error
    return writers


def select_writers(writers: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[list[str]]:
    """FedBM's selection: writers with < 150 samples, 50 drawn, split 35 / 5 / 10 (fewer when fewer qualify)."""
    eligible = sorted(u for u, (_, y) in writers.items() if 0 < y.size < MAX_SAMPLES)
    if len(eligible) < 3:
        raise DatasetNotFoundError(f"femnist: only {len(eligible)} writers have fewer than {MAX_SAMPLES} samples; need 3 or more")
    chosen = list(numpy_rng(0, "femnist-writers").permutation(eligible)[:WRITERS])
    n_train = max(1, round(len(chosen) * SPLIT[0] / WRITERS))
    n_val = max(1, round(len(chosen) * SPLIT[1] / WRITERS))
    return [chosen[:n_train], chosen[n_train : n_train + n_val], chosen[n_train + n_val :]]


def load_femnist(root: Path | None = None, download: bool = False) -> Dataset:
    """Load FedBM's FEMNIST selection: train (35 writers, each a natural client), val (5) and test (10) writers."""
    files = locate_femnist(root)
    key = "\n".join(f"{p.resolve()}:{p.stat().st_size}" for p in files)
    cached = dataset_cache_dir(NAME) / "selected" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"
    if not cached.is_file():
        writers = read_writers(files)
        parts = select_writers(writers)
        arrays = {}
        for split, users in zip(("train", "val", "test"), parts, strict=True):
            arrays[f"{split}_images"] = np.concatenate([writers[u][0] for u in users])
            arrays[f"{split}_labels"] = np.concatenate([writers[u][1] for u in users])
        groups = np.concatenate([np.full(writers[u][1].size, i, dtype=np.int64) for i, u in enumerate(parts[0])])
        write_npz(cached, train_groups=groups, **arrays)
        return _dataset({**arrays, "train_groups": groups})
    with np.load(cached) as saved:
        return _dataset({k: saved[k] for k in saved.files})


def _dataset(arrays: dict[str, np.ndarray]) -> Dataset:
    """The Dataset of the selection's arrays (``train_images``, ``train_labels``, ..., ``train_groups``)."""
    return Dataset(
        name=NAME,
        class_names=CLASS_NAMES,
        train_images=arrays["train_images"],
        train_labels=arrays["train_labels"],
        val_images=arrays["val_images"],
        val_labels=arrays["val_labels"],
        test_images=arrays["test_images"],
        test_labels=arrays["test_labels"],
        train_groups=arrays["train_groups"],
    )
