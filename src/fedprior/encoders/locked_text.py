"""``locked-text``: the offline stand-in for CLIP (it is NOT CLIP; no CLIP weights are involved).

No CLIP weights can be had offline, so FST-CBDG (the FST-CBDG paper,
"Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model") runs here on a
vision-language encoder built on the spot, like a weak web-pretrained model:

- the **text tower** is a real pretrained sentence encoder, frozen ("locked"):
  MiniLM (all-MiniLM-L6-v2, 384-d) by default (``encoder.text_model``);
- the **image tower** is a small CNN (:class:`fedprior.models.image_tower.ImageTower`)
  trained from scratch to align with it, with CLIP's symmetric InfoNCE loss
  (Radford et al. 2021) between L2-normalized image and caption embeddings and a
  learnable temperature, on a **pretraining split** of the training set with
  **noisy captions**. The pretraining split is reserved: the experiment builder
  removes :attr:`LockedTextEncoder.reserved_train_indices` from every client.

The recipe: a named recipe (``encoder.recipe``, :mod:`fedprior.encoders.standin_recipes`: the
epochs, the tower's size, the defaults of the two data settings below) on the shared code
(version :data:`RECIPE_VERSION`). What follows describes ``v1``, the default, measured on Fashion-MNIST:

- pretraining split: ``encoder.pretrain_images`` (v1: 2,000) training images,
  class-balanced (round-robin over classes, each class in a random order), drawn
  from the stream ``("locked-text", "split")`` of ``encoder.pretrain_seed``;
- captions: every image gets one of the :data:`TEMPLATES` (uniformly at random)
  filled with a class name; an exact fraction ``encoder.caption_noise`` (v1:
  0.4) of the images, chosen at random, get a uniformly random *wrong* class name.
  Captions are fixed per image (like web alt-texts); the frozen text tower encodes
  each distinct caption once;
- training: Adam (lr :data:`LEARNING_RATE`), the recipe's epochs (v1: 20) of mini-batches
  of :data:`BATCH_SIZE`, temperature initialized at 0.07 as in CLIP (logit scale
  capped at 100), random translations of up to ``image_size // 14`` pixels (at
  least 1) as the only augmentation. Initialization, shuffling and augmentation
  each draw from their own torch generator derived from ``encoder.pretrain_seed``
  (never from the run seed, so one stand-in serves every run; torch's global
  generator is left untouched). Training runs on one CPU thread with
  ``torch.use_deterministic_algorithms`` on, so the same settings give the same
  tower bit for bit on a given machine whatever ``run.threads`` is (the reduction
  order of multi-threaded kernels changes the last bits; one thread also keeps the
  build from fighting other processes for the cores).

Zero-shot behaviour, as CLIP in the FST-CBDG paper, Figure 2: with Eq. (2) (softmax of raw
cosine similarities between normalized image features and the normalized text
feature of "a photo of a {class}.", no logit scale) predictions are near uniform.
Measured with the defaults on Fashion-MNIST (2 shared CPU cores; pretrain_seed 0, the shipped
tower, / 1; ``pytest -m benchmark tests/encoders/test_locked_text.py``): build 31-59 s depending on the
machine's load (MiniLM loading excluded, ~4 s), zero-shot accuracy 77.9 / 76.4% on the
10k test images, mean entropy 2.2990 / 2.2992 against log 10 = 2.3026, and a linear
probe (logistic regression on the 58k non-reserved training features) 86.4 / 85.6%:
a weak but useful zero-shot, clearly below the probe, like CLIP in the paper.
Why 20 epochs in v1: longer training memorizes the wrong captions (30 epochs: zero-shot
71.9%, probe 85.8%; 50 epochs: 65.7%, 85.3%; 15 epochs: 78.9%, 86.9%); 20 is the
shortest "few tens" that stays in the regime of the project's first prototype of the
stand-in (76.1% zero-shot, entropy 2.299, probe 81.7%; docs/fst-cbdg.md).
On digits (300 pretraining images): zero-shot ~89%, entropy 2.298, probe ~98%.
That zero-shot is too close to the probe for a table to separate methods; ``v2-headroom``
(30 epochs, caption_noise 0.5) puts zero-shot well below the probe, as CLIP's is: zero-shot
64.5%, ``linear-probe`` preset 81.9%, logistic probe 85.2% (pretrain seed 0; seed 1: 66.1 /
81.4 / 85.0). Those come from ``benchmarks/results/standin_recipes.json``, measured on an AVX2
machine, where 40 / 50 / 60 epochs at caption_noise 0.4 gave zero-shot 69.8 / 71.2 / 68.7%:
the epoch figures above (another machine kind) do not carry over exactly, and zero-shot
does not fall monotonically with the epochs.

The fingerprint of a tower (:func:`locked_text_fingerprint`) hashes the data, the text tower,
the resolved data settings, ``RECIPE_VERSION`` and, for any recipe whose training settings
differ from v1's, those settings. v1's fingerprint keeps the form it had before recipes had
names, so its shipped tower and the towers cached by earlier versions still load; every other
recipe's fingerprint holds a ``training`` entry no earlier fingerprint has, so no earlier cache
file can be taken for it. Change the shared training code: bump ``RECIPE_VERSION`` (every
fingerprint changes, the shipped towers must be rebuilt). Change a recipe: give it a new name.

Where the tower comes from, in this order:

1. **shipped**: the recipes in :data:`fedprior.encoders.shipped_towers.RECIPES` (Fashion-MNIST
   with the defaults, which every shipped preset uses; Fashion-MNIST with ``encoder.recipe =
   "v2-headroom"``; digits with 300 images, the tests')
   ship their trained towers inside the package, so every machine uses the identical
   encoder (training on another CPU kind gives other bits). A run whose recipe fingerprint
   is a shipped one loads those weights: no training, no text tower. A shipped file that is
   missing or fails its SHA-256 is an error that says to reinstall, never a silent retrain;
2. **cache**: ``cache_dir()/encoders/locked-text/<fingerprint>.safetensors``, written by an
   earlier build of a recipe that does not ship;
3. **trained** on first use (a progress line goes to stderr), then cached. A cache file that
   cannot be read, does not match, or whose weights fail their SHA-256 (stored in the
   file's metadata) is rebuilt with a warning; a cache folder that cannot be written is a
   warning too (the tower is then trained again next time).

``fedprior standin build`` retrains the shipped recipes and checks them against the shipped
fingerprints (see :mod:`fedprior.encoders.shipped_towers`).
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from fedprior.atomic import save_tensors, tensors_sha256
from fedprior.data.dataset import Dataset
from fedprior.data.fingerprint import split_fingerprint
from fedprior.data.locations import cache_dir
from fedprior.encoders.config import EncoderConfig
from fedprior.encoders.shipped_towers import REINSTALL, ShippedTower, shipped_tower_for
from fedprior.encoders.standin_recipes import STANDIN_RECIPES, StandinRecipe, standin_recipe
from fedprior.encoders.text import folder_fingerprint, model_folder, text_encoder
from fedprior.errors import ConfigError, FedpriorError
from fedprior.models.image_tower import ImageTower
from fedprior.seeding import numpy_rng, torch_generator

NAME = "locked-text"
RECIPE_VERSION = 1
"""Bump whenever the shared training code below changes: it is part of the fingerprint, so old caches are not reused."""

TEMPLATES: tuple[str, ...] = (
    "a photo of a {}.",
    "a picture of a {}.",
    "an image of a {}.",
    "a photo of the {}.",
    "a blurry photo of a {}.",
    "a low resolution photo of a {}.",
    "a black and white photo of a {}.",
    "a close-up photo of a {}.",
)
BATCH_SIZE = 128
LEARNING_RATE = 1e-3
INIT_TEMPERATURE = 0.07
MAX_LOGIT_SCALE = 100.0
V1 = STANDIN_RECIPES["v1"]
"""The first recipe, whose fingerprint form is kept (see the module docstring)."""


def resolved_recipe(config: EncoderConfig) -> StandinRecipe:
    """``config.recipe``'s settings with ``encoder.pretrain_images`` and ``encoder.caption_noise`` applied where set.

    An unknown name is a :class:`ConfigError` (configs built without validation reach here too).
    """
    recipe = standin_recipe(config.recipe)
    if config.pretrain_images is not None:
        recipe = replace(recipe, pretrain_images=config.pretrain_images)
    if config.caption_noise is not None:
        recipe = replace(recipe, caption_noise=config.caption_noise)
    return recipe


@dataclass(frozen=True)
class PretrainingSplit:
    """What the image tower is aligned on: training-set indices and one caption per image."""

    indices: np.ndarray
    """Sorted int64 indices into the training set (the reserved images)."""
    caption_classes: np.ndarray
    """The class each caption names (equal to the true label except for the noisy ones)."""
    captions: tuple[str, ...]
    """One caption per reserved image, in the order of ``indices``."""


def _check(recipe: StandinRecipe, dataset: Dataset) -> None:
    n = dataset.train_labels.size
    if recipe.pretrain_images >= n:
        raise ConfigError(
            f"encoder.pretrain_images: {recipe.pretrain_images} is too many, the training set of '{dataset.name}' "
            f"has {n} images and the clients need some; give fewer than {n}"
        )
    if dataset.image_shape[1] != dataset.image_shape[2]:
        raise ConfigError(f"encoder.name: 'locked-text' needs square images (C, H, H), '{dataset.name}' has {dataset.image_shape}")


def pretraining_split(config: EncoderConfig, dataset: Dataset) -> PretrainingSplit:
    """The reserved training images and their noisy captions (deterministic in ``config.pretrain_seed``)."""
    recipe = resolved_recipe(config)
    _check(recipe, dataset)
    labels = dataset.train_labels
    k = dataset.num_classes
    rng = numpy_rng(config.pretrain_seed, NAME, "split")
    # Class-balanced: rank every image within its class (random order), then take all rank-0
    # images, then rank 1, ... ; a partial last round goes to classes in a random order.
    rank = np.empty(labels.size, dtype=np.int64)
    for cls in range(k):
        members = np.flatnonzero(labels == cls)
        rank[rng.permutation(members)] = np.arange(members.size)
    class_order = rng.permutation(k)
    order = np.lexsort((class_order[labels], rank))
    indices = np.sort(order[: recipe.pretrain_images]).astype(np.int64)

    rng = numpy_rng(config.pretrain_seed, NAME, "captions")
    n = indices.size
    caption_classes = labels[indices].copy()
    noisy = rng.permutation(n)[: int(round(recipe.caption_noise * n))]
    caption_classes[noisy] = (caption_classes[noisy] + rng.integers(1, k, size=noisy.size)) % k
    templates = rng.integers(0, len(TEMPLATES), size=n)
    captions = tuple(TEMPLATES[t].format(dataset.class_names[c]) for t, c in zip(templates, caption_classes, strict=True))
    return PretrainingSplit(indices=indices, caption_classes=caption_classes, captions=captions)


def locked_text_fingerprint(config: EncoderConfig, dataset: Dataset) -> str:
    """16 hex digits hashing the data, the text tower and the recipe's settings (not the run seed, not the recipe's name).

    v1's fields are those of the fingerprint before recipes had names (its shipped tower keeps
    loading); a recipe that trains otherwise adds its training settings.
    """
    recipe = resolved_recipe(config)
    fields: dict[str, object] = {
        "name": NAME,
        "recipe": RECIPE_VERSION,
        "dataset": dataset.name,
        "train": split_fingerprint(dataset, "train"),
        "text_model": folder_fingerprint(model_folder(config.text_model)),
        "pretrain_images": recipe.pretrain_images,
        "caption_noise": recipe.caption_noise,
        "pretrain_seed": config.pretrain_seed,
    }
    if recipe.training() != V1.training():
        fields["training"] = recipe.training()
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def tower_path(fingerprint: str) -> Path:
    """Where the image tower with this fingerprint is cached."""
    return cache_dir() / "encoders" / NAME / f"{fingerprint}.safetensors"


@contextmanager
def _deterministic():
    """Deterministic torch ops on one CPU thread (so the tower does not depend on run.threads)."""
    previous, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(previous)


def _new_tower(in_channels: int, image_size: int, dim: int, seed: int, recipe: StandinRecipe = V1) -> ImageTower:
    # fork_rng: building the layers draws from the global generator, which must stay untouched;
    # the weights that count come from reset_parameters with the stand-in's own generator.
    with torch.random.fork_rng(devices=[]):
        tower = ImageTower(in_channels, image_size, dim, width=recipe.tower_width, hidden=recipe.tower_hidden)
    tower.reset_parameters(torch_generator(seed, NAME, "init"))
    return tower


def _random_shift(x: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Translate each image by up to ``max_shift`` pixels in each direction (black fills the gap)."""
    n, _, h, w = x.shape
    padded = F.pad(x, (max_shift,) * 4, value=-1.0)  # -1 is black after preprocessing
    dy = torch.randint(0, 2 * max_shift + 1, (n,), generator=generator)
    dx = torch.randint(0, 2 * max_shift + 1, (n,), generator=generator)
    rows = (dy[:, None] + torch.arange(h)[None, :])[:, None, :, None]
    cols = (dx[:, None] + torch.arange(w)[None, :])[:, None, None, :]
    batch = torch.arange(n)[:, None, None, None]
    channel = torch.arange(x.shape[1])[None, :, None, None]
    return padded[batch, channel, rows, cols]


def clip_loss(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor) -> torch.Tensor:
    """CLIP's symmetric InfoNCE (Radford et al. 2021, Figure 3) over a batch of matching pairs.

    Both inputs are L2-normalized (n, d); pair i is (image i, caption i).
    """
    logits = logit_scale.exp() * image_features @ text_features.T
    target = torch.arange(logits.shape[0])
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def train_image_tower(images: np.ndarray, caption_features: torch.Tensor, seed: int, recipe: StandinRecipe = V1) -> ImageTower:
    """Align a fresh :class:`ImageTower` (of ``recipe``'s size, for its epochs) to frozen caption features (one row per image).

    ``images`` are uint8 (n, C, H, H); ``caption_features`` (n, dim) are the frozen text
    tower's features of each image's caption. Deterministic in ``seed``.
    """
    n, channels, size, _ = images.shape
    with _deterministic():
        tower = _new_tower(channels, size, caption_features.shape[1], seed, recipe)
        logit_scale = torch.nn.Parameter(torch.tensor(float(np.log(1.0 / INIT_TEMPERATURE))))
        optimizer = torch.optim.Adam([*tower.parameters(), logit_scale], lr=LEARNING_RATE)
        shuffle = torch_generator(seed, NAME, "shuffle")
        augment = torch_generator(seed, NAME, "augment")
        max_shift = max(1, size // 14)
        x_all = ImageTower.preprocess(torch.from_numpy(images))
        t_all = F.normalize(caption_features.float(), dim=1)
        tower.train()
        for _ in range(recipe.epochs):
            for batch in torch.randperm(n, generator=shuffle).split(BATCH_SIZE):
                if batch.numel() < 2:
                    continue
                x = _random_shift(x_all[batch], max_shift, augment)
                loss = clip_loss(F.normalize(tower(x), dim=1), t_all[batch], logit_scale)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                with torch.no_grad():
                    logit_scale.clamp_(max=float(np.log(MAX_LOGIT_SCALE)))
    tower.eval()
    return tower


def save_tower(tower: ImageTower, path: Path, fingerprint: str) -> None:
    """Write ``tower`` atomically with its metadata (recipe fingerprint, shape, SHA-256 of the weights); raises ``OSError``."""
    state = tower.state_dict()
    metadata = {
        "fingerprint": fingerprint,
        "recipe": str(RECIPE_VERSION),
        "in_channels": str(tower.in_channels),
        "image_size": str(tower.image_size),
        "dim": str(tower.out_dim),
        "checksum": tensors_sha256(state),
    }
    save_tensors(state, path, metadata=metadata)


def _save(tower: ImageTower, path: Path, fingerprint: str) -> None:
    """:func:`save_tower` into the user cache, where a failure is a warning."""
    try:
        save_tower(tower, path, fingerprint)
    except OSError as error:  # the cache is optional: a full or read-only cache folder costs a rebuild next time
        warnings.warn(
            f"locked-text: the image tower cannot be cached at {path} ({error.strerror or error}); going on without the cache", RuntimeWarning, stacklevel=2
        )


def _load(path: Path, fingerprint: str, image_shape: tuple[int, int, int], seed: int, recipe: StandinRecipe = V1) -> ImageTower:
    """The cached tower, or an exception saying why it cannot be used."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        state = {key: handle.get_tensor(key) for key in handle.keys()}
    expected = {"fingerprint": fingerprint, "recipe": str(RECIPE_VERSION), "in_channels": str(image_shape[0]), "image_size": str(image_shape[1])}
    wrong = {k: (metadata.get(k), v) for k, v in expected.items() if metadata.get(k) != v}
    if wrong:
        raise ValueError("metadata " + ", ".join(f"{k}={got!r} (expected {want!r})" for k, (got, want) in wrong.items()))
    if metadata.get("checksum") != tensors_sha256(state):
        raise ValueError("checksum mismatch (the weights changed after they were written, or the file predates checksums)")
    tower = _new_tower(image_shape[0], image_shape[1], int(metadata["dim"]), seed, recipe)
    tower.load_state_dict(state, strict=True)
    if not all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point()):
        raise ValueError("non-finite weights")
    tower.eval()
    return tower


class LockedTextEncoder:
    """The ``locked-text`` vision-language encoder (offline stand-in for CLIP, not CLIP).

    Build it with :func:`build_locked_text_encoder`. ``encode_images`` runs the trained
    image tower; ``encode_texts`` runs the frozen text tower (loaded on first use).
    Both return float32 features in the same ``dim``-d space, not normalized.
    """

    name = NAME

    def __init__(
        self,
        tower: ImageTower,
        recipe_fingerprint: str,
        reserved_train_indices: np.ndarray,
        text_model: str,
        device: torch.device = torch.device("cpu"),
        weights: str = "trained",
        recipe: str = V1.name,
    ) -> None:
        self.device = torch.device(device)
        self.recipe = recipe
        """The named recipe (``encoder.recipe``) the tower comes from."""
        self.weights = weights
        """Where the tower came from: 'shipped' (package data), 'cache' (the user cache) or 'trained' (just now)."""
        self.tower = tower.to(self.device)
        self.recipe_fingerprint = recipe_fingerprint
        """Names the cached tower file (what determines the training)."""
        self.fingerprint = weights_fingerprint(recipe_fingerprint, tower)
        """Keys the feature cache: the recipe plus the tower's actual weights."""
        self.dim = tower.out_dim
        self.reserved_train_indices = reserved_train_indices
        self.reserved_train_indices.setflags(write=False)
        self.text_model = text_model
        self.image_shape = (tower.in_channels, tower.image_size, tower.image_size)

    def __repr__(self) -> str:
        return (
            f"LockedTextEncoder(offline CLIP stand-in, recipe={self.recipe}, text_model={self.text_model!r}, dim={self.dim}, weights={self.weights}, "
            f"fingerprint={self.fingerprint})"
        )

    @torch.no_grad()
    def encode_images(self, images: np.ndarray, batch_size: int = 256) -> torch.Tensor:
        """uint8 images (N, C, H, W) -> float32 (N, dim) image-tower features, not normalized."""
        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim != 4 or tuple(images.shape[1:]) != self.image_shape:
            raise ValueError(f"locked-text encodes uint8 images of shape (N, {', '.join(map(str, self.image_shape))}); got {images.dtype} {images.shape}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.tower.eval()
        batches = (torch.from_numpy(images[i : i + batch_size]).to(self.device) for i in range(0, len(images), batch_size))
        out = [self.tower(ImageTower.preprocess(batch)).float().cpu() for batch in batches]
        return torch.cat(out) if out else torch.zeros(0, self.dim)

    def encode_texts(self, texts: list[str]) -> torch.Tensor:
        """Texts -> float32 (len(texts), dim) from the frozen text tower, not normalized here.

        (The features are what the sentence-transformers model returns; MiniLM's own pipeline
        ends in a Normalize layer, so its vectors happen to have unit length.)
        """
        return text_encoder(self.text_model).encode_texts(list(texts)).float()


def build_locked_text_encoder(config: EncoderConfig, dataset: Dataset, device: torch.device = torch.device("cpu")) -> LockedTextEncoder:
    """The ``locked-text`` encoder for ``dataset``: the shipped tower, else the cached one, else trained once (on the CPU) and cached.

    Its image tower then runs on ``device``; its text tower (a handful of class prompts) stays on the CPU.
    """
    split = pretraining_split(config, dataset)
    fingerprint = locked_text_fingerprint(config, dataset)
    shipped = shipped_tower_for(fingerprint)
    if shipped is not None:
        return LockedTextEncoder(load_shipped_tower(shipped), fingerprint, split.indices, config.text_model, device, weights="shipped", recipe=config.recipe)
    path = tower_path(fingerprint)
    tower: ImageTower | None = None
    weights = "cache"
    if path.exists():
        try:
            tower = _load(path, fingerprint, dataset.image_shape, config.pretrain_seed, resolved_recipe(config))
        except Exception as error:  # unreadable, truncated, or another tower: rebuild
            warnings.warn(f"locked-text: the cached image tower {path} cannot be used ({error}); rebuilding it", RuntimeWarning, stacklevel=2)
    if tower is None:
        print(
            f"fedprior: training the locked-text stand-in image tower (offline CLIP stand-in) on "
            f"{split.indices.size:,} {dataset.name} images, once; it is cached afterwards...",
            file=sys.stderr,
            flush=True,
        )
        tower, weights = train_recipe(config, dataset, split), "trained"
        _save(tower, path, fingerprint)
    return LockedTextEncoder(tower, fingerprint, split.indices, config.text_model, device, weights=weights, recipe=config.recipe)


def load_shipped_tower(shipped: ShippedTower) -> ImageTower:
    """The shipped tower, checked against the manifest's SHA-256; a missing or damaged file is a :class:`FedpriorError`.

    (Its recipe fingerprint covers the training images, hence their shape: a run whose
    fingerprint matches has images of ``shipped.image_shape``.)
    """
    try:
        recipe = standin_recipe(str(shipped.settings.get("recipe", V1.name)))
        tower = _load(shipped.path, shipped.recipe_fingerprint, shipped.image_shape, int(shipped.settings["pretrain_seed"]), recipe)
        actual = tensors_sha256(tower.state_dict())
        if actual != shipped.weights_sha256:
            raise ValueError(f"weights SHA-256 {actual[:16]}..., the package lists {shipped.weights_sha256[:16]}...")
    except Exception as error:  # missing, unreadable, truncated, edited: the installation is damaged
        raise FedpriorError(f"locked-text: the shipped image tower {shipped.path} is damaged ({error}); {REINSTALL}") from None
    return tower


def weights_fingerprint(recipe_fingerprint: str, tower: ImageTower) -> str:
    """The encoder's fingerprint: the recipe's plus a hash of the tower's actual weights.

    Features are cached under it, so features are never reused across two different
    towers, even if a tower file were replaced by hand or left over from an older recipe.
    """
    digest = hashlib.sha256(recipe_fingerprint.encode())
    for name, value in sorted(tower.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.detach().contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def train_recipe(config: EncoderConfig, dataset: Dataset, split: PretrainingSplit | None = None) -> ImageTower:
    """Train the image tower of ``config``'s recipe from scratch (no cache, no shipped weights): the whole recipe above."""
    split = split if split is not None else pretraining_split(config, dataset)
    text = text_encoder(config.text_model)
    distinct = sorted(set(split.captions))  # each distinct caption is encoded once
    row = {caption: i for i, caption in enumerate(distinct)}
    with _deterministic():
        features = text.encode_texts(distinct).float()[torch.tensor([row[c] for c in split.captions])]
    return train_image_tower(dataset.train_images[split.indices], features, config.pretrain_seed, resolved_recipe(config))
