"""The ``locked-text`` stand-in's trained image towers, shipped inside the package.

Training the stand-in's image tower is deterministic on one machine, but another CPU
(another instruction set, other kernels) rounds differently and ends with another
encoder: zero-shot 76.7% on one machine and 77.9% on another for the same seed. So the
towers of the shipped recipes are trained once and shipped as package data, and every
machine whose recipe matches uses those very weights:

- :data:`RECIPES`: the recipes that ship (the one every shipped preset uses, Fashion-MNIST
  with the :class:`~fedprior.encoders.config.EncoderConfig` defaults; Fashion-MNIST with
  the named recipe ``v2-headroom``; and the one the tests use, digits with 300 pretraining images);
- ``towers/<name>.safetensors``: each trained tower (the format of the user cache's tower files);
- ``towers/towers.json`` (:data:`MANIFEST`): per recipe, its settings, its recipe fingerprint
  (:func:`fedprior.encoders.locked_text.locked_text_fingerprint`: the training data, the text
  tower, the resolved settings and the recipe version), the SHA-256 of its weights
  (:func:`fedprior.atomic.tensors_sha256` of the state dict) and the machine kind it was
  built on (:func:`machine_kind`).

A run uses a shipped tower when its recipe fingerprint is one of the manifest's; any other
recipe (other settings, other data files, another text model) is trained and cached as
before. ``fedprior standin build`` retrains the shipped recipes, compares the weights with the
shipped SHA-256 (``--check``) and refreshes the files (``--write``).
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fedprior.atomic import write_text
from fedprior.errors import FedpriorError

FOLDER = Path(__file__).resolve().parent / "towers"
MANIFEST = FOLDER / "towers.json"
FORMAT = "fedprior-shipped-towers-v1"
REINSTALL = "reinstall fedprior (pip install --force-reinstall --no-deps fedprior; in a source checkout: git checkout src/fedprior/encoders/towers)"


@dataclass(frozen=True)
class Recipe:
    """A shipped recipe: the dataset and the ``encoder.*`` settings that determine the tower.

    ``recipe`` is the named training recipe (``encoder.recipe``,
    :mod:`fedprior.encoders.standin_recipes`); ``pretrain_images`` and ``caption_noise`` are
    written out in full (the fingerprint hashes the resolved values, so a config that leaves
    them to the recipe matches too).
    """

    name: str
    dataset: str
    pretrain_images: int
    caption_noise: float = 0.4
    pretrain_seed: int = 0
    text_model: str = "minilm"
    recipe: str = "v1"

    def settings(self) -> dict[str, Any]:
        """The ``encoder.*`` values of this recipe (with ``name = "locked-text"``)."""
        fields = asdict(self)
        del fields["name"], fields["dataset"]
        return {"name": "locked-text", **fields}


RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe("fashion-mnist", "fashion-mnist", pretrain_images=2000),  # every shipped locked-text preset
        Recipe("digits-300", "digits", pretrain_images=300),  # the tests' stand-in (tests/support/cli.py STANDIN)
        Recipe("fashion-mnist-v2-headroom", "fashion-mnist", pretrain_images=2000, caption_noise=0.5, recipe="v2-headroom"),  # encoder.recipe = "v2-headroom"
    )
}


@dataclass(frozen=True)
class ShippedTower:
    """One entry of the manifest."""

    name: str
    file: str
    dataset: str
    settings: dict[str, Any]
    image_shape: tuple[int, int, int]
    recipe_version: int
    recipe_fingerprint: str
    weights_sha256: str
    bytes: int
    built_on: str

    @property
    def path(self) -> Path:
        return FOLDER / self.file


def machine_kind(device: Any = None) -> str:
    """What decides whether training gives the same bits: OS, architecture, torch build and the CPU kernels it picks;
    for a CUDA ``device`` (a run's ``run.device``), the GPU's name and the CUDA version too."""
    import torch

    kind = f"{platform.system()} {platform.machine()}, torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
    if device is not None and torch.device(device).type == "cuda":
        kind += f", {torch.cuda.get_device_name(torch.device(device))}, CUDA {torch.version.cuda}"
    return kind


KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile")
"""The CPU features the math libraries under torch (MKL, oneDNN) choose their kernels by, beyond torch's CPU capability."""


def cpu_kind() -> str:
    """The CPU beyond :func:`machine_kind`: two CPUs of the same capability (AVX512) may still give other bits, as MKL and
    oneDNN pick kernels and block sizes by model, features and cache size. Vendor, family, model, stepping, L2 size and
    :data:`KERNEL_FLAGS` (Linux: /proc/cpuinfo and sysfs; elsewhere what ``platform`` says)."""
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]  # the first CPU's block
    except OSError:
        return platform.processor() or "unknown CPU"
    fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}
    try:
        l2 = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text().strip()
    except OSError:
        l2 = "?"
    flags = [f for f in KERNEL_FLAGS if f in fields.get("flags", "").split()]
    return f"{fields.get('vendor_id', '?')} family {fields.get('cpu family', '?')} model {fields.get('model', '?')} stepping {fields.get('stepping', '?')}, L2 {l2}, {' '.join(flags) or 'no listed flags'}"


def build_machine() -> str:
    """What a shipped tower's ``built_on`` records and ``fedprior standin build --check`` compares: :func:`machine_kind`
    and :func:`cpu_kind`. The capability alone is not enough: the digits tower, built on one AVX512 CPU, retrains to
    other bits on another AVX512 CPU. An entry written before the CPU was recorded matches no machine."""
    return f"{machine_kind()}; {cpu_kind()}"


def shipped_towers() -> dict[str, ShippedTower]:
    """The manifest's entries by recipe name (empty when nothing ships); a damaged manifest is a :class:`FedpriorError`."""
    if not MANIFEST.exists():
        return {}
    try:
        data = json.loads(MANIFEST.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT!r}")
        return {name: ShippedTower(name=name, **{**entry, "image_shape": tuple(entry["image_shape"])}) for name, entry in data["towers"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise FedpriorError(f"locked-text: the shipped tower list {MANIFEST} is damaged ({error}); {REINSTALL}") from None


def shipped_tower_for(recipe_fingerprint: str) -> ShippedTower | None:
    """The shipped tower trained with this recipe fingerprint, if one ships."""
    return next((t for t in shipped_towers().values() if t.recipe_fingerprint == recipe_fingerprint), None)


def record(tower: ShippedTower) -> None:
    """Add or replace ``tower``'s entry in the manifest (``fedprior standin build --write``)."""
    towers = {**shipped_towers(), tower.name: tower}
    entries = {name: {k: v for k, v in asdict(entry).items() if k != "name"} for name, entry in sorted(towers.items())}
    write_text(MANIFEST, json.dumps({"format": FORMAT, "towers": entries}, indent=2) + "\n")
