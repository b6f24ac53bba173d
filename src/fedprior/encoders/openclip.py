"""``openclip:ARCH``: a frozen CLIP model through open_clip (RN50 is FST-CBDG's choice: the
FST-CBDG paper, "Lightweight Unsupervised Federated Learning with Pretrained Vision Language Model", Sec. 4.1).

Weights come from ``encoder.weights``:

- a local file (``.pt`` OpenAI TorchScript archive, or an open_clip state dict as
  ``.pt`` / ``.pth`` / ``.bin`` / ``.safetensors``);
- an open_clip pretrained tag such as ``openai`` (the default when unset): the file is
  looked for in fedprior's weights folder (``<cache>/weights``), open_clip's URL cache
  (``~/.cache/clip``) and the Hugging Face cache; it is downloaded only when
  ``encoder.download`` is true, and otherwise a missing file is a clear error naming
  the file, where to get it and where to put it.

``ARCH`` is an open_clip architecture name (``RN50``, ``ViT-B-32``, ...) or the path of
an open_clip model-config JSON file (``embed_dim``, ``vision_cfg``, ``text_cfg``).
OpenAI weights were trained with QuickGELU, which is switched on for them.

Images are preprocessed by :mod:`fedprior.encoders.preprocess` (not open_clip's
torchvision transforms) with the size, mean and std of the model's preprocessing
config. open_clip is imported only when such an encoder is built.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
import zipfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprior.encoders.preprocess import CLIP_MEAN, CLIP_STD, PreprocessConfig, preprocess_images
from fedprior.encoders.text import hub_offline
from fedprior.encoders.weights import fingerprint, looks_like_path, weights_dir
from fedprior.errors import ConfigError, FedpriorError

DEFAULT_TAG = "openai"
HF_WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
COMMON_ARCHS = ("RN50", "RN101", "RN50x4", "ViT-B-32", "ViT-B-16", "ViT-L-14")
OPENAI_BASE = "https://openaipublic.azureedge.net/clip/models/"
OPENAI_FILES = {  # OpenAI's original CLIP files (the same URLs open_clip's 'openai' tags use)
    "RN50": "afeb0e10f9e5a86da6080e35cf09123aca3b358a0c3e3b6c78a7b63bc04b6762/RN50.pt",
    "RN101": "8fa8567bab74a42d41c5915025a8e4538c3bdbe8804a470a72f30b0d94fab599/RN101.pt",
    "RN50x4": "7e526bd135e493cef0776de27d5f42653e6b4c8bf9e0f653bb11773263205fdd/RN50x4.pt",
    "RN50x16": "52378b407f34354e150460fe41077663dd5b39c54cd0bfd2b27167a4a06ec9aa/RN50x16.pt",
    "RN50x64": "be1cfb55d75a9666199fb2206c106743da0f6468c9d327f3e0d0a543a9919d9c/RN50x64.pt",
    "ViT-B-32": "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af/ViT-B-32.pt",
    "ViT-B-16": "5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f/ViT-B-16.pt",
    "ViT-L-14": "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836/ViT-L-14.pt",
    "ViT-L-14-336": "3035c92b350959924f9f00213499208652fc7ea050643e8b385c2dac08641f02/ViT-L-14-336px.pt",
}


def import_open_clip():
    """The open_clip module, or a FedpriorError saying how to get a working one."""
    try:
        import open_clip
    except Exception as error:  # ImportError, or torchvision failing to load inside open_clip
        raise FedpriorError(
            'openclip encoders need the package open_clip_torch: in the fedprior clone, pip install -c requirements.lock -e ".[openclip]". '
            "open_clip needs a working torchvision (its wheels need a CUDA build of torch; a CPU-only torch "
            f"may have none); import failed with {type(error).__name__}: {error}. "
            "Alternatives: encoder.name=hf-clip:FOLDER (a Hugging Face CLIP folder) or locked-text"
        ) from error
    return open_clip


def resolve_arch(open_clip, arch: str) -> str:
    """The open_clip model name for ``arch`` (registering a model-config JSON file first if one is given)."""
    if not arch:
        raise ConfigError("encoder.name: 'openclip:' needs an architecture, e.g. openclip:RN50 or openclip:ViT-B-32")
    if arch.endswith(".json"):
        path = Path(arch).expanduser()
        if not path.is_file():
            raise ConfigError(f"encoder.name: open_clip model config {path} does not exist")
        open_clip.add_model_config(path)
        if open_clip.get_model_config(path.stem) is None:
            raise ConfigError(f"encoder.name: {path} is not an open_clip model config (needs embed_dim, vision_cfg, text_cfg)")
        return path.stem
    name = arch.replace("/", "-")
    if open_clip.get_model_config(name) is None:
        known = ", ".join(m for m in COMMON_ARCHS if m in open_clip.list_models())
        raise ConfigError(
            f"encoder.name: open_clip has no architecture '{arch}'; e.g. {known} (all: open_clip.list_models()), or the path of an open_clip model-config .json"
        )
    return name


def is_torchscript(path: Path) -> bool:
    """True for OpenAI's original CLIP files (TorchScript zip archives with a ``code/`` folder)."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(name.split("/", 2)[1:2] == ["code"] for name in archive.namelist())


def hub_file(pretrained_cfg: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(repo id, candidate file names) of a tag's Hugging Face entry ('org/repo/' or 'org/repo/file', open_clip's form)."""
    repo, filename = os.path.split(pretrained_cfg.get("hf_hub") or "")
    return repo, (filename,) if filename else HF_WEIGHT_FILES


def default_location(arch: str, tag: str, pretrained_cfg: dict[str, Any]) -> tuple[Path, str]:
    """(where fedprior looks for a tag's file in its weights folder, where to get the file)."""
    url = pretrained_cfg.get("url") or ""
    if url:
        return weights_dir() / os.path.basename(url), url
    repo, names = hub_file(pretrained_cfg)
    return weights_dir() / f"{arch}-{tag}-{names[-1]}", f"https://huggingface.co/{repo} ({' or '.join(names)})"


def local_candidates(arch: str, tag: str, pretrained_cfg: dict[str, Any]) -> list[Path]:
    """Places where the file of a pretrained tag may already be, found without any network access."""
    out = [default_location(arch, tag, pretrained_cfg)[0]]
    url = pretrained_cfg.get("url") or ""
    if url:
        out.append(Path("~/.cache/clip").expanduser() / os.path.basename(url))  # open_clip's own URL cache
    repo, names = hub_file(pretrained_cfg)
    if repo:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            return out
        for cache in (str(weights_dir()), None):  # downloads made by fedprior, then the default Hugging Face cache
            for name in names:
                found = try_to_load_from_cache(repo, name, cache_dir=cache)
                if isinstance(found, str):
                    out.append(Path(found))
    return out


def missing_weights_message(arch: str, tag: str, pretrained_cfg: dict[str, Any]) -> str:
    """Which file to put where when the weights of a pretrained tag are not on this machine."""
    path, source = default_location(arch, tag, pretrained_cfg)
    return (
        f"openclip:{arch} weights '{tag}' are not on this machine and encoder.download is false: "
        f"put {path.name} (from {source}) at {path}, where encoder.weights='{tag}' finds it, "
        "or anywhere and set encoder.weights to its path (or set encoder.download=true to let open_clip fetch it)"
    )


def check_weights_file(arch: str, weights: str | None) -> Path | None:
    """The local file ``encoder.weights`` names (None for a tag); a missing file fails here, before open_clip loads."""
    if not weights or not (looks_like_path(weights) or Path(weights).expanduser().is_file()):
        return None
    path = Path(weights).expanduser()
    if not path.is_file():
        base = arch.replace("/", "-").removesuffix("-quickgelu")
        source = f" (OpenAI's: {OPENAI_BASE}{OPENAI_FILES[base]})" if base in OPENAI_FILES else ""
        raise FedpriorError(
            f"encoder.weights: {path} does not exist; put the openclip:{arch} weights file there{source} "
            f"(.pt/.pth/.bin/.safetensors), or set encoder.weights to a pretrained tag such as '{DEFAULT_TAG}'"
        )
    return path


def resolve_weights(open_clip, arch: str, weights: str | None, download: bool) -> tuple[Path, dict[str, Any]]:
    """(local weights file, pretrained config of the tag or {}) for ``encoder.weights``; no network unless ``download``."""
    path = check_weights_file(arch, weights)
    if path is not None:
        return path, {}
    weights = weights or DEFAULT_TAG
    pretrained_cfg = open_clip.get_pretrained_cfg(arch, weights) or {}
    if not pretrained_cfg:
        tags = ", ".join(open_clip.list_pretrained_tags_by_model(arch)) or "none"
        raise ConfigError(f"encoder.weights: open_clip has no pretrained weights '{weights}' for {arch}; accepted: {tags}, or a local weights file")
    for candidate in local_candidates(arch, weights, pretrained_cfg):
        if candidate.is_file():
            return candidate, pretrained_cfg
    if not download:
        raise FedpriorError(missing_weights_message(arch, weights, pretrained_cfg))
    weights_dir().mkdir(parents=True, exist_ok=True)
    try:
        path = open_clip.download_pretrained(pretrained_cfg, cache_dir=str(weights_dir()))
    except Exception as error:
        hint = missing_weights_message(arch, weights, pretrained_cfg)
        raise FedpriorError(f"downloading openclip:{arch} weights '{weights}' failed ({error}); {hint}") from error
    if not path or not Path(path).is_file():
        raise FedpriorError(missing_weights_message(arch, weights, pretrained_cfg))
    return Path(path), pretrained_cfg


def load_weights(open_clip, model: torch.nn.Module, path: Path, arch: str) -> None:
    """Load a local weights file into an open_clip model (OpenAI TorchScript or open_clip state dict)."""
    try:
        if is_torchscript(path):
            state = torch.jit.load(str(path), map_location="cpu").state_dict()
            for key in ("input_resolution", "context_length", "vocab_size", "attn_mask"):  # settings and buffers, not weights
                state.pop(key, None)
            model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
        else:
            open_clip.load_checkpoint(model, str(path))
    except (RuntimeError, KeyError, ValueError, OSError, StopIteration) as error:
        text = str(error)
        raise FedpriorError(f"encoder.weights: {path} does not fit open_clip architecture {arch}: {text[:400]}{'...' if len(text) > 400 else ''}") from error


def preprocess_config(model: torch.nn.Module, pretrained_cfg: dict[str, Any], open_clip) -> PreprocessConfig:
    """Size, mean and std from the model's preprocessing config (and the pretrained tag's), else CLIP's."""
    getter = getattr(open_clip, "get_model_preprocess_cfg", None)
    cfg = dict(getter(model)) if getter else {}
    cfg.update({k: pretrained_cfg[k] for k in ("mean", "std", "resize_mode", "interpolation") if k in pretrained_cfg})
    size = cfg.get("size") or getattr(model.visual, "image_size", 224)
    if size is None:
        raise FedpriorError("open_clip model states no image size (preprocess config 'size', visual.image_size)")
    if isinstance(size, (tuple, list)):
        if len(set(size)) != 1:
            raise FedpriorError(f"open_clip image size {tuple(size)} is not square; fedprior's CLIP preprocessing crops squares")
        size = size[0]
    if cfg.get("resize_mode", "shortest") != "shortest" or cfg.get("interpolation", "bicubic") != "bicubic":
        warnings.warn(
            f"this open_clip model was trained with resize_mode={cfg.get('resize_mode')!r}, interpolation={cfg.get('interpolation')!r}; "
            "fedprior resizes the shorter side (bicubic) and center-crops",
            stacklevel=3,
        )
    return PreprocessConfig(size=int(size), mean=tuple(cfg.get("mean", CLIP_MEAN)), std=tuple(cfg.get("std", CLIP_STD)))


class OpenClipEncoder:
    """A frozen open_clip CLIP model: images and texts -> vectors in the shared space (not normalized)."""

    reserved_train_indices = np.zeros(0, dtype=np.int64)
    """Training images the encoder used for itself: none for real CLIP."""

    def __init__(self, arch: str, weights: str | None = None, download: bool = False, device: torch.device = torch.device("cpu")) -> None:
        if not arch:
            raise ConfigError("encoder.name: 'openclip:' needs an architecture, e.g. openclip:RN50 or openclip:ViT-B-32")
        check_weights_file(arch, weights)  # a missing local file is reported even without open_clip
        open_clip = import_open_clip()
        self.arch = resolve_arch(open_clip, arch)
        self.name = f"openclip:{arch}"
        path, pretrained_cfg = resolve_weights(open_clip, self.arch, weights, download)
        quick_gelu = bool(pretrained_cfg.get("quick_gelu")) or (weights or DEFAULT_TAG) == "openai" or is_torchscript(path)
        model_cfg = open_clip.get_model_config(self.arch)
        try:
            with _maybe_offline(download), _no_random_init_warning():
                model = open_clip.create_model(self.arch, pretrained=None, device="cpu", force_quick_gelu=quick_gelu, pretrained_hf=False)
                self.tokenizer = open_clip.get_tokenizer(self.arch)
        except (OSError, RuntimeError, ValueError) as error:  # e.g. a Hugging Face text tower's files not cached offline
            offline = "" if download else " (encoder.download is false: any Hugging Face files it needs must already be cached)"
            raise FedpriorError(f"open_clip could not build {self.arch}{offline}: {error}") from error
        load_weights(open_clip, model, path, self.arch)
        self.device = torch.device(device)
        self.model = model.eval().requires_grad_(False).to(self.device)
        self.weights_path = path
        self.preprocess = preprocess_config(model, pretrained_cfg, open_clip)
        self.dim = int(model_cfg["embed_dim"])
        self.fingerprint = fingerprint(
            "openclip",
            self.arch,
            json.dumps(model_cfg, sort_keys=True),
            f"quick_gelu={quick_gelu}",
            self.preprocess.describe(),
            files=[path],
        )

    @torch.no_grad()
    def encode_images(self, images: np.ndarray, batch_size: int = 256) -> torch.Tensor:
        """uint8 (N, C, H, W) -> float32 (N, dim) image features (CLIP's image tower, not normalized)."""
        out = [torch.zeros(0, self.dim)]
        for start in range(0, len(images), batch_size):
            x = preprocess_images(images[start : start + batch_size], self.preprocess).to(self.device)
            out.append(self.model.encode_image(x).float().cpu())
        return torch.cat(out)

    @torch.no_grad()
    def encode_texts(self, texts: list[str]) -> torch.Tensor:
        """Texts -> float32 (len(texts), dim) (CLIP's text tower with open_clip's tokenizer, not normalized)."""
        if not texts:
            return torch.zeros(0, self.dim)
        tokens = self.tokenizer(list(texts)).to(self.device)
        return self.model.encode_text(tokens).float().cpu()


@contextmanager
def _no_random_init_warning():
    """Silence open_clip's 'initialized randomly' warning: the weights are loaded right after."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def _maybe_offline(download: bool):
    return nullcontext() if download else hub_offline()


def build_openclip_encoder(arch: str, weights: str | None, download: bool, device: torch.device = torch.device("cpu")) -> OpenClipEncoder:
    return OpenClipEncoder(arch, weights, download, device)
