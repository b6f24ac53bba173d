"""Hugging Face datasets in and out: ``data.dataset = "hf:PATH"`` loads one, ``fedprior datasets export`` writes one.

A dataset saved with the ``datasets`` library (the hf extra) is read from a local folder:
a ``save_to_disk`` folder (``datasets.load_from_disk``), or parquet / arrow files or an
``imagefolder`` (``datasets.load_dataset(PATH)``, which infers the builder from the files). Its
``train`` and ``test`` splits become fedprior's, ``validation`` (or ``valid``, ``val``) its
validation split where there is one. Images go to the layout every shipped loader gives
(``uint8``, ``(N, C, H, W)``: 1 channel where every image is grayscale, else 3), labels to
``int64`` class indices, class names from the label column's ``ClassLabel`` feature.

Nothing reaches the network: ``datasets`` is imported with ``HF_DATASETS_OFFLINE=1`` and its
offline flags are set while it reads. Only ``data.download = true`` lets it fetch: then a PATH
that is not a local folder is a dataset name on the Hugging Face Hub (``datasets.load_dataset(NAME)``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.errors import ConfigError, DatasetError, DatasetNotFoundError
from fedprior.hf_datasets import hub_access

PREFIX = "hf:"
IMAGE_COLUMNS = ("image", "img")
"""Tried in order where ``data.image_column`` is unset (``img``: CIFAR-10's on the Hub)."""
LABEL_COLUMNS = ("label",)
"""Tried where ``data.label_column`` is unset."""
VALIDATION_SPLITS = ("validation", "valid", "val")


def is_hf(name: str) -> bool:
    """Whether a ``data.dataset`` value names a Hugging Face dataset (``hf:PATH``)."""
    return name.startswith(PREFIX)


def hf_path(name: str) -> str:
    """The PATH of ``hf:PATH``; a ConfigError where it is empty."""
    path = name[len(PREFIX) :].strip()
    if not path:
        raise ConfigError("data.dataset: 'hf:' needs a folder (or, with data.download = true, a Hub name) after it, e.g. 'hf:~/data/fashion-mnist-hf'")
    return path


def _is_saved_folder(folder: Path) -> bool:
    """Whether ``folder`` was written by ``save_to_disk`` (a DatasetDict's or a Dataset's metadata file)."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def read_splits(name: str, download: bool) -> Any:
    """The ``DatasetDict`` of ``hf:PATH`` (a local folder, or with ``download`` a Hub name)."""
    from fedprior.data.locations import cache_dir

    path = hf_path(name)
    folder = Path(path).expanduser()
    if not folder.is_dir() and not download:
        state = "is not a folder" if folder.exists() else "does not exist"
        raise DatasetNotFoundError(
            f"data.dataset: {folder} {state}; put a Hugging Face dataset there (a save_to_disk folder, parquet or arrow files, "
            f"or an imagefolder with train/ and test/; `fedprior datasets export NAME {folder}` writes a shipped one), "
            "or set data.download = true to fetch it from the Hub by name"
        )
    with hub_access(allowed=download and not folder.is_dir()) as datasets:
        try:
            if folder.is_dir() and _is_saved_folder(folder):
                loaded = datasets.load_from_disk(str(folder))
            else:
                target = str(folder) if folder.is_dir() else path
                loaded = datasets.load_dataset(target, cache_dir=str(cache_dir() / "huggingface"))
        except (OSError, ValueError, datasets.exceptions.DatasetNotFoundError) as error:  # ConnectionError is an OSError
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DatasetNotFoundError(f"data.dataset: cannot read {name} with the datasets library ({first})") from None
    if isinstance(loaded, datasets.Dataset):
        raise DatasetError(f"{name}: a single split; fedprior needs a 'train' and a 'test' split (save a DatasetDict)")
    return loaded


def _column(split: Any, wanted: str | None, defaults: tuple[str, ...], field: str, name: str) -> str:
    columns = list(split.column_names)
    if wanted is not None:
        if wanted not in columns:
            raise ConfigError(f"data.{field}: {name} has no column {wanted!r}; its columns: {', '.join(columns)}")
        return wanted
    found = next((c for c in defaults if c in columns), None)
    if found is None:
        raise ConfigError(f"data.{field}: {name} has none of the columns {', '.join(defaults)}; set data.{field} to one of: {', '.join(columns)}")
    return found


def _images(split: Any, column: str, name: str) -> np.ndarray:
    """The column's images as ``uint8`` arrays (N, C, H, W)."""
    from PIL import Image

    feature = split.features[column]
    if type(feature).__name__ == "Image":
        raw = split.cast_column(column, type(feature)(decode=False))[column]
        pictures = [Image.open(io.BytesIO(item["bytes"]) if item.get("bytes") else item["path"]) for item in raw]
        gray = all(p.mode in ("L", "1") for p in pictures)
        arrays = [np.asarray(p.convert("L" if gray else "RGB")) for p in pictures]
    else:
        arrays = [np.asarray(item) for item in split.with_format("numpy")[column]]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise DatasetError(
            f"{name}: the images of column {column!r} differ in size ({', '.join(map(str, sorted(shapes)[:3]))}, ...); resize them to one size first"
        )
    stacked = np.stack(arrays) if arrays else np.zeros((0, 1, 1), dtype=np.uint8)
    if stacked.dtype != np.uint8 and (stacked.size and (stacked.min() < 0 or stacked.max() > 255 or not np.issubdtype(stacked.dtype, np.integer))):
        raise DatasetError(f"{name}: column {column!r} holds {stacked.dtype} values, not 0..255 pixels")
    stacked = stacked.astype(np.uint8)
    if stacked.ndim == 3:  # (N, H, W): grayscale
        return stacked[:, None]
    if stacked.ndim == 4 and stacked.shape[-1] in (1, 3):  # (N, H, W, C), as PIL and the Hub lay images out
        return np.ascontiguousarray(stacked.transpose(0, 3, 1, 2))
    raise DatasetError(f"{name}: column {column!r} has images of shape {stacked.shape[1:]}; fedprior reads (H, W) or (H, W, 1 or 3)")


def _labels(splits: dict[str, Any], column: str, name: str) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """Each split's labels as class indices, and the class names (the ClassLabel's, else the sorted values)."""
    feature = splits["train"].features[column]
    values = {key: list(split[column]) for key, split in splits.items()}
    if type(feature).__name__ == "ClassLabel":
        return {key: np.asarray(v, dtype=np.int64) for key, v in values.items()}, tuple(feature.names)
    every = sorted({v for vs in values.values() for v in vs})
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in every):
        if every and every[0] < 0:
            raise DatasetError(f"{name}: column {column!r} holds negative labels")
        return {key: np.asarray(v, dtype=np.int64) for key, v in values.items()}, tuple(str(i) for i in range(int(every[-1]) + 1 if every else 0))
    if all(isinstance(v, str) for v in every):
        index = {v: i for i, v in enumerate(every)}
        return {key: np.asarray([index[x] for x in v], dtype=np.int64) for key, v in values.items()}, tuple(every)
    raise DatasetError(f"{name}: column {column!r} holds neither class indices nor class names; set data.label_column")


def load_hf(name: str, download: bool = False, image_column: str | None = None, label_column: str | None = None, group_column: str | None = None) -> Dataset:
    """The fedprior :class:`~fedprior.data.dataset.Dataset` of ``hf:PATH``: train, test (and validation) splits; ``group_column``
    (where given) names each training image's natural owner (``Dataset.train_groups``)."""
    loaded = read_splits(name, download)
    for needed in ("train", "test"):
        if needed not in loaded:
            raise DatasetError(f"{name}: no {needed!r} split (it has {', '.join(loaded)}); fedprior needs 'train' and 'test'")
    val = next((s for s in VALIDATION_SPLITS if s in loaded), None)
    splits = {"train": loaded["train"], "test": loaded["test"], **({"val": loaded[val]} if val else {})}
    image = _column(splits["train"], image_column, IMAGE_COLUMNS, "image_column", name)
    label = _column(splits["train"], label_column, LABEL_COLUMNS, "label_column", name)
    labels, class_names = _labels(splits, label, name)
    groups = np.asarray(splits["train"][_column(splits["train"], group_column, (), "group_column", name)]) if group_column else None
    images = {key: _images(split, image, name) for key, split in splits.items()}
    return Dataset(
        name=name,
        train_images=images["train"],
        train_labels=labels["train"],
        test_images=images["test"],
        test_labels=labels["test"],
        class_names=class_names,
        source=str(Path(hf_path(name)).expanduser()),
        val_images=images.get("val"),
        val_labels=labels.get("val"),
        train_groups=groups,
    )


def export_hf(dataset: Dataset, folder: Path) -> Path:
    """Write ``dataset`` as a Hugging Face ``DatasetDict`` (``save_to_disk``) to ``folder``: columns ``image`` (PNG, lossless)
    and ``label`` (a ``ClassLabel`` with the class names), and on the training split ``group`` where the images have natural
    owners (``Dataset.train_groups``: read back with ``data.group_column = "group"``); splits ``train``, ``test`` and
    ``validation`` where it has one."""
    from PIL import Image

    with hub_access(allowed=False) as datasets:
        features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=list(dataset.class_names))})

        def split(images: np.ndarray, labels: np.ndarray, groups: np.ndarray | None = None) -> Any:
            channels_last = images.transpose(0, 2, 3, 1)
            pictures = [Image.fromarray(a[:, :, 0] if a.shape[2] == 1 else a) for a in channels_last]
            table = datasets.Dataset.from_dict({"image": pictures, "label": labels.tolist()}, features=features)
            return table if groups is None else table.add_column("group", groups.tolist())

        parts = {
            "train": split(dataset.train_images, dataset.train_labels, dataset.train_groups),
            "test": split(dataset.test_images, dataset.test_labels),
        }
        if dataset.val_images is not None and dataset.val_labels is not None:
            parts["validation"] = split(dataset.val_images, dataset.val_labels)
        datasets.DatasetDict(parts).save_to_disk(str(folder))
    return folder
