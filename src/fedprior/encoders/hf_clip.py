"""``hf-clip:FOLDER``: a frozen CLIP model through Hugging Face transformers.

``FOLDER`` holds what ``CLIPModel.save_pretrained`` and the tokenizer's ``save_pretrained``
write (config.json, model.safetensors or pytorch_model.bin, tokenizer files, and
optionally preprocessor_config.json). It is loaded with the Hugging Face hub switched
off. A hub id such as ``openai/clip-vit-base-patch32`` also works when it is already in
the Hugging Face cache, or when ``encoder.download`` is true.

Image features are ``get_image_features`` (the projected pooled output of the vision
tower), text features ``get_text_features``; neither is normalized here. Images are
preprocessed by :mod:`fedprior.encoders.preprocess` with the folder's
preprocessor_config.json (size, crop, mean, std) when present, else the model's
image size and CLIP's mean and std.
"""

from __future__ import annotations

import json
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import torch

from fedprior.encoders.preprocess import CLIP_MEAN, CLIP_STD, PreprocessConfig, preprocess_images
from fedprior.encoders.text import hub_offline
from fedprior.encoders.weights import check_model_folder, fingerprint, folder_files
from fedprior.errors import ConfigError, FedpriorError

FOLDER_HELP = (
    "give a folder written by transformers' CLIPModel.save_pretrained plus the tokenizer's save_pretrained "
    "(config.json, model.safetensors or pytorch_model.bin, vocab.json/merges.txt or tokenizer.json, "
    "optionally preprocessor_config.json)"
)


def resolve_folder(
    spec: str,
    download: bool,
    *,
    prefix: str = "hf-clip",
    field: str = "encoder.name",
    help_text: str = FOLDER_HELP,
    download_hint: str = "encoder.download=true",
) -> Path:
    """The local folder of ``PREFIX:SPEC``: SPEC itself, or the cached (or, if allowed, downloaded) hub snapshot."""
    if not spec:
        raise ConfigError(f"{field}: '{prefix}:' needs a folder, e.g. {prefix}:/models/clip-vit-base-patch32")
    folder = Path(spec).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise FedpriorError(f"{field}: {prefix} folder {folder} has no config.json; {help_text}")
        return folder
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        try:
            from huggingface_hub import snapshot_download

            with nullcontext() if download else hub_offline():
                return Path(snapshot_download(spec, local_files_only=not download, allow_patterns=["*.json", "*.txt", "*.safetensors"]))
        except Exception as error:
            if download:
                raise FedpriorError(f"{field}: downloading {prefix}:{spec} failed ({error})") from error
    raise FedpriorError(
        f"{field}: {prefix} folder {folder} does not exist; {help_text}. A Hugging Face hub id loads only "
        f"from the local Hugging Face cache unless {download_hint}"
    )


def _square(value, what: str) -> int | None:
    """An int side from a preprocessor-config entry (int, {'shortest_edge'}, {'height', 'width'})."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, dict):
        if "shortest_edge" in value:
            return int(value["shortest_edge"])
        if "height" in value and "width" in value:
            if value["height"] != value["width"]:
                raise FedpriorError(f"preprocessor_config.json: {what} {value} is not square")
            return int(value["height"])
    raise FedpriorError(f"preprocessor_config.json: cannot read {what} {value!r}")


def preprocess_from_folder(folder: Path, image_size: int) -> PreprocessConfig:
    """Resize/crop/mean/std from ``preprocessor_config.json`` when present, else ``image_size`` and CLIP's values."""
    path = folder / "preprocessor_config.json"
    cfg = json.loads(path.read_text()) if path.is_file() else {}
    size = _square(cfg.get("size"), "size") or image_size
    crop = _square(cfg.get("crop_size"), "crop_size") or size
    if cfg.get("do_center_crop") is False:
        crop = size
    if crop != image_size:
        raise FedpriorError(f"{path}: images are cropped to {crop} but the model takes {image_size}x{image_size}")
    if crop > size:
        raise FedpriorError(f"{path}: crop_size {crop} is larger than the resized shorter side {size}")
    mean = tuple(cfg.get("image_mean", CLIP_MEAN)) if cfg.get("do_normalize", True) else (0.0, 0.0, 0.0)
    std = tuple(cfg.get("image_std", CLIP_STD)) if cfg.get("do_normalize", True) else (1.0, 1.0, 1.0)
    return PreprocessConfig(size=size, crop=crop, mean=mean, std=std)


@contextmanager
def _quiet_transformers():
    """No 'Loading weights' progress bar from transformers while a model loads."""
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()


def load_pretrained(model_class, folder: Path, field: str, what: str, help_text: str):
    """``(model, tokenizer)`` from a ``save_pretrained`` folder, offline and without transformers' progress bar;
    a FedpriorError naming ``field``, the folder and ``what`` it should hold where transformers cannot load it."""
    from transformers import AutoTokenizer

    try:
        with hub_offline(), _quiet_transformers():
            return model_class.from_pretrained(str(folder), local_files_only=True), AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as error:  # whatever the folder holds that transformers cannot load
        raise FedpriorError(f"{field}: cannot load {what} from {folder} ({type(error).__name__}: {error}); {help_text}") from error


def _features(output) -> torch.Tensor:
    """transformers < 5 returns a tensor from get_*_features; 5 returns an output whose pooler_output is projected."""
    return output if isinstance(output, torch.Tensor) else output.pooler_output


class HFClipEncoder:
    """A frozen transformers CLIPModel: images and texts -> vectors in the shared space (not normalized)."""

    reserved_train_indices = np.zeros(0, dtype=np.int64)
    """Training images the encoder used for itself: none for real CLIP."""

    def __init__(
        self,
        spec: str,
        download: bool = False,
        device: torch.device = torch.device("cpu"),
        *,
        field: str = "encoder.name",
        download_hint: str = "encoder.download=true",
    ) -> None:
        """``field``: the config field that named the model (``encoder.name``, or ``algorithm.text_model`` for FedBM), named by every error."""
        folder = resolve_folder(spec, download, field=field, download_hint=download_hint)  # before importing transformers (seconds)
        check_model_folder(folder, field, "a CLIP model")
        from transformers import CLIPModel, CLIPTextConfig, CLIPVisionConfig

        model, self.tokenizer = load_pretrained(CLIPModel, folder, field, "a CLIP model", FOLDER_HELP)
        self.name = f"hf-clip:{spec}"
        self.folder = folder
        self.device = torch.device(device)
        self.model = model.float().eval().requires_grad_(False).to(self.device)
        config = model.config
        # CLIPConfig turns dict sub-configs into config objects when it is built; a CLIP checkpoint has square images
        assert isinstance(config.text_config, CLIPTextConfig) and isinstance(config.vision_config, CLIPVisionConfig)
        assert config.projection_dim is not None and isinstance(config.vision_config.image_size, int)
        self.dim = int(config.projection_dim)
        self.max_length = int(config.text_config.max_position_embeddings)
        self.preprocess = preprocess_from_folder(folder, int(config.vision_config.image_size))
        self.fingerprint = fingerprint("hf-clip", self.preprocess.describe(), files=folder_files(folder), root=folder)

    @torch.no_grad()
    def encode_images(self, images: np.ndarray, batch_size: int = 256) -> torch.Tensor:
        """uint8 (N, C, H, W) -> float32 (N, dim): ``get_image_features`` of the preprocessed images."""
        out = [torch.zeros(0, self.dim)]
        for start in range(0, len(images), batch_size):
            x = preprocess_images(images[start : start + batch_size], self.preprocess).to(self.device)
            out.append(_features(self.model.get_image_features(pixel_values=x)).float().cpu())
        return torch.cat(out)

    @torch.no_grad()
    def encode_texts(self, texts: list[str]) -> torch.Tensor:
        """Texts -> float32 (len(texts), dim): ``get_text_features`` of the tokenized texts (truncated to the context)."""
        if not texts:
            return torch.zeros(0, self.dim)
        tokens = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        tokens = {k: v.to(self.device) for k, v in tokens.items() if k in ("input_ids", "attention_mask")}
        return _features(self.model.get_text_features(**tokens)).float().cpu()


def build_hf_clip_encoder(
    spec: str, download: bool, device: torch.device = torch.device("cpu"), *, field: str = "encoder.name", download_hint: str = "encoder.download=true"
) -> HFClipEncoder:
    """The ``hf-clip:SPEC`` model; ``field`` and ``download_hint`` go into its errors (see :class:`HFClipEncoder`)."""
    return HFClipEncoder(spec, download, device, field=field, download_hint=download_hint)
