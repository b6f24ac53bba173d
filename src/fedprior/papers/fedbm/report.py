"""What a FedBM run's report adds: a grid of the generator's images per class (CGDE), and what it cost to send.

The generator in the last checkpoint draws ``PER_CLASS`` images of every class from
concept conditions (Eq. 9); the picture shows whether it captured anything of the
global model's input space (the paper's Sec. V notes it can leak what the data looks like).
"""

from __future__ import annotations

from typing import Any

import torch

from fedprior.algorithms.fedbm import GENERATOR, generated_images
from fedprior.atomic import save_figure
from fedprior.runtime.checkpoint import load_checkpoint

PER_CLASS = 8


def plot_grid(images: torch.Tensor, class_names, path) -> None:
    """(K, n, C, H, W) images in [0, 1] as a K x n grid, one row per class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = images.shape[:2]
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.9, rows * 0.9 + 0.3), dpi=100, squeeze=False)
    for k in range(rows):
        for j in range(cols):
            ax = axes[k][j]
            picture = images[k, j].permute(1, 2, 0).squeeze(-1).numpy()
            ax.imshow(picture, cmap="gray" if picture.ndim == 2 else None, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[k][0].set_ylabel(str(class_names[k])[:18], rotation=0, ha="right", va="center", fontsize=7)
    fig.suptitle("CGDE: generated images per class (last checkpoint)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)


def fedbm_extras(experiment, summary: dict[str, Any], folder) -> tuple[dict[str, Any], str]:
    """Draw the generated-image grid into ``folder``; return summary additions and a markdown section."""
    state = load_checkpoint(folder / "checkpoint.safetensors").server
    images = generated_images(experiment.task, state, experiment.config.algorithm.hyperparameters(), PER_CLASS)
    if images is None:
        return {}, "\n## CGDE\n\nNo generator was trained in this run (cgde = false, or fewer rounds than generator_every).\n"
    plot_grid(images, experiment.task.class_names, folder / "generated.png")
    generator_bytes = sum(v.numel() * v.element_size() for k, v in state.items() if k.startswith(GENERATOR))
    section = f"""
## CGDE: the generator's images per class

{PER_CLASS} images per class, each from a condition drawn from the class's concept distribution (Eq. 9).
The generator ({generator_bytes / 1e6:.2f} MB) is broadcast with the model in every round after its first training.

![generated images](generated.png)
"""
    return {"generator_bytes": generator_bytes}, section
