"""DomainNet (Peng et al., "Moment Matching for Multi-Source Domain Adaptation", ICCV 2019): six image sources as six domains.

The official release unpacks each domain to ``<domain>/<class>/<file>.jpg`` beside its split lists
``<domain>_train.txt`` and ``<domain>_test.txt``, one image a line: ``clipart/aircraft_carrier/clipart_001_000018.jpg 0``
(the path from the release's folder, then the class number). Domains: clipart, infograph, painting, quickdraw, real,
sketch. A domain is used when both its lists are there; every image a list names must exist.

The classes are those the lists name (the class folder in each path), in sorted order: the full release's 345 (whose
official numbers are that order), or a subset a user keeps, such as the 10 classes FedBN's code takes (Li et al.,
"FedBN: Federated Learning on Non-IID Features via Local Batch Normalization", ICLR 2021, Sec. 5: bird, feather,
headphones, ice_cream, teapot, tiger, whale, windmill, wine_glass, zebra) with lists cut to them. Images become
3 x 64 x 64 RGB (resized bilinearly), decoded once per list into the user cache.

Looked for in ``data.root``, ``data.root/domainnet`` and the user cache; there is no download.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from fedprior.data.dataset import Dataset
from fedprior.data.image_folder import decode_images, write_npz
from fedprior.data.locations import dataset_cache_dir, none_found
from fedprior.errors import DatasetNotFoundError

NAME = "domainnet"
URL = "ai.bu.edu/M3SDA"
DOMAINS = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
IMAGE_SIZE = 64


def read_list(path: Path) -> list[str]:
    """The image paths (relative to the release's folder) a split list names, in its order."""
    paths = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit() or len(Path(parts[0]).parts) != 3:
            raise DatasetNotFoundError(f"{path}, line {number}: expected '<domain>/<class>/<file> <class number>', got {line!r}")
        paths.append(parts[0])
    return paths


def _decoded(base: Path, listing: Path, files: list[tuple[Path, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The list's images decoded, from the user cache when it holds this list (keyed by its path, text and the size)."""
    key = hashlib.sha256(f"{listing.resolve()}\n{listing.read_text()}\n{IMAGE_SIZE}".encode()).hexdigest()[:16]
    cached = dataset_cache_dir(NAME) / "decoded" / f"{listing.stem}-{key}.npz"
    if cached.is_file():
        try:
            with np.load(cached) as arrays:
                return arrays["images"], arrays["labels"]
        except (OSError, ValueError, KeyError):
            pass
    images, labels = decode_images(files, IMAGE_SIZE, 3, f"decoding {NAME} {listing.stem}")
    write_npz(cached, images=images, labels=labels)
    return images, labels


def load_domainnet(root: Path | None = None, download: bool = False) -> Dataset:
    """Load the DomainNet domains whose lists are found as 3x64x64 uint8 images, one domain each."""
    bases = [root, root / NAME] if root else [dataset_cache_dir(NAME)]
    for base in bases:
        present = [d for d in DOMAINS if (base / f"{d}_train.txt").is_file() and (base / f"{d}_test.txt").is_file()]
        if present:
            break
    else:
        wanted = f"one or more domains' <domain>/<class>/ folders with their lists <domain>_train.txt and <domain>_test.txt (domains {', '.join(DOMAINS)})"
        raise none_found(NAME, root, bases, wanted, URL)
    lists = {(d, s): read_list(base / f"{d}_{s}.txt") for d in present for s in ("train", "test")}
    classes = sorted({Path(p).parts[1] for paths in lists.values() for p in paths})
    index = {c: i for i, c in enumerate(classes)}
    arrays: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {"train": [], "test": []}
    for (domain, split), paths in lists.items():
        missing = [p for p in paths if not (base / p).is_file()]
        if missing:
            raise DatasetNotFoundError(f"{base / f'{domain}_{split}.txt'} names {len(missing)} images that are not there, e.g. {base / missing[0]}")
        images, labels = _decoded(base, base / f"{domain}_{split}.txt", [(base / p, index[Path(p).parts[1]]) for p in paths])
        arrays[split].append((images, labels, np.full(labels.size, present.index(domain), dtype=np.int64)))
    return Dataset(
        name=NAME,
        train_images=np.concatenate([x for x, _, _ in arrays["train"]]),
        train_labels=np.concatenate([y for _, y, _ in arrays["train"]]),
        test_images=np.concatenate([x for x, _, _ in arrays["test"]]),
        test_labels=np.concatenate([y for _, y, _ in arrays["test"]]),
        class_names=tuple(c.replace("_", " ") for c in classes),
        source=str(base),
        train_domains=np.concatenate([g for _, _, g in arrays["train"]]),
        test_domains=np.concatenate([g for _, _, g in arrays["test"]]),
        domain_names=tuple(present),
    )
