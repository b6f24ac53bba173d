"""A picture of a partition: the clients x classes heatmap of sample counts (matplotlib, Agg, no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedprior.atomic import save_figure


def _ticks(count: int, most: int = 25) -> np.ndarray:
    """At most about ``most`` evenly spaced tick positions out of ``count``."""
    step = max(1, int(np.ceil(count / most)))
    return np.arange(0, count, step)


def plot_heatmap(counts: np.ndarray, path: str | Path, class_names: Sequence[str] | None = None, title: str | None = None) -> Path:
    """Write a PNG heatmap of ``counts`` (rows: clients, columns: classes) to ``path``; return the path.

    Cells with no samples are white, so a sparse partition reads at a glance; counts are
    printed in the cells when the matrix is at most 20 x 20. The title carries
    beta^CIB and beta^hetero (mfcl.md Appendix B). Sized for 10..100 clients and classes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from fedprior.partition.statistics import describe

    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or 0 in counts.shape:
        raise ValueError(f"counts must be a non-empty (clients, classes) matrix, got shape {counts.shape}")
    num_clients, num_classes = counts.shape
    if class_names is not None and len(class_names) != num_classes:
        raise ValueError(f"{len(class_names)} class names for {num_classes} classes")
    summary = describe(counts)

    width = float(np.clip(4.0 + 0.11 * num_classes, 7.0, 16.0))
    height = float(np.clip(2.0 + 0.09 * num_clients, 3.5, 11.0))
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    from matplotlib import colormaps

    cmap = colormaps["viridis"].with_extremes(bad="white")
    image = axes.imshow(np.ma.masked_equal(counts, 0), aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=max(int(counts.max()), 1))
    colorbar = figure.colorbar(image, ax=axes, fraction=0.05, pad=0.02)
    colorbar.set_label("samples")

    xs, ys = _ticks(num_classes), _ticks(num_clients)
    axes.set_xticks(xs)
    names = [str(class_names[i]) if class_names is not None else str(i) for i in xs]
    long_names = any(len(name) > 3 for name in names)
    axes.set_xticklabels(names, rotation=45 if long_names else 0, ha="right" if long_names else "center", fontsize=8)
    axes.set_yticks(ys)
    axes.set_yticklabels([str(i) for i in ys], fontsize=8)
    axes.set_xlabel("class")
    axes.set_ylabel("client")
    if num_clients <= 20 and num_classes <= 20:
        threshold = counts.max() / 2
        for (row, col), value in np.ndenumerate(counts):
            if value:
                axes.text(col, row, str(value), ha="center", va="center", fontsize=7, color="black" if value > threshold else "white")

    if summary["beta_cib"] is None:
        betas = "no samples"
    else:
        betas = f"β_CIB = {summary['beta_cib']:.2f}, β_hetero = {summary['beta_hetero']:.2f} bits"
    heading = f"{num_clients} clients, {num_classes} classes: {betas}"
    axes.set_title(f"{title}\n{heading}" if title else heading, fontsize=10)

    path = Path(path)
    return save_figure(figure, path)  # never a half-written PNG
