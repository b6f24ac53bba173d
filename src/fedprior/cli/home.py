"""A home folder that cannot be written (a read-only HOME in a container, a CI runner's): caches go to a temporary folder.

matplotlib keeps its cache in ``~/.config/matplotlib`` and wandb-core its log in ``~/.cache/wandb``;
where they cannot be made, matplotlib prints two lines of warning and wandb-core 17 lines of its own
log on stderr (reliability probe 5, #13), around a run that is right. Here, before either is imported,
``MPLCONFIGDIR``, ``XDG_CACHE_HOME`` (where wandb-core puts its log) and W&B's ``WANDB_CONFIG_DIR``,
``WANDB_CACHE_DIR`` and ``WANDB_DATA_DIR`` are pointed at one temporary folder of this process (removed at its
exit), where the user has not set them: the caches work for the run, and nothing is printed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

HOME_FOLDERS = {
    "MPLCONFIGDIR": "matplotlib",
    "XDG_CACHE_HOME": "cache",
    "WANDB_CONFIG_DIR": "wandb-config",
    "WANDB_CACHE_DIR": "wandb-cache",
    "WANDB_DATA_DIR": "wandb-data",
}
"""The variables set (where unset) when the home folder cannot be written -> their folder in the temporary one."""


def writable(folder: Path) -> bool:
    """Whether ``folder`` can be written, or made: its nearest existing ancestor is a folder this process can write."""
    for path in (folder, *folder.parents):
        if path.exists():
            return path.is_dir() and os.access(path, os.W_OK | os.X_OK)
    return False


def caches_outside_an_unwritable_home() -> Path | None:
    """Point the caches of :data:`HOME_FOLDERS` at a temporary folder where ``~/.config`` or ``~/.cache`` cannot be written; the folder, or None."""
    home = Path(os.environ.get("HOME") or Path.home())
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    if writable(config) and writable(cache):
        return None
    unset = [name for name in HOME_FOLDERS if not os.environ.get(name)]
    if not unset:
        return None
    folder = Path(tempfile.mkdtemp(prefix="fedprior-home-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for name in unset:
        os.environ[name] = str(folder / HOME_FOLDERS[name])
    return folder
