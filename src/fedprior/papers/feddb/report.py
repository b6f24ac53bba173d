"""What a run of FedDB or one of its baselines adds to its report: the paper's diagnostics, per round.

From the run's ``metrics.jsonl`` (what the clients and ``evaluate`` logged each round):

- Figures 6 and 7: pseudo-label accuracy and coverage (the fraction of unlabeled images
  that received a label), for the plain rule and for DPL, computed from the same
  predictions each round (the run's own rule is one of the two);
- Figure 1: the global model's per-class test accuracy, round by round;
- Figure 3 (global model): JS divergence between the per-class accuracy and the
  clients' APP-U, and between it and their labeled class distribution (mean and range
  over the round's clients, and for the weighted aggregates);
- DMA: the aggregation weights of every round, and the distance of the weighted APP-U
  from uniform with uniform weights ("before") and with the round's weights ("after").

It also draws a few unlabeled images of client 0 with their weak and strong views, and
the labeled and the unlabeled partition as two heatmaps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprior.atomic import save_figure
from fedprior.experiments.build import Experiment

ALGORITHMS = ("feddb", "fixmatch", "fedavg-labeled", "fedmatch", "fedrgd", "semifl")


def read_rounds(folder: Path) -> list[dict[str, Any]]:
    from fedprior.results.run_view import read_metrics

    return [r for r in read_metrics(Path(folder) / "metrics.jsonl") if r.get("step") is not None]


def series(rounds: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(round numbers, values) of the rounds that logged ``key``."""
    pairs = [(r["step"], r[key]) for r in rounds if isinstance(r.get(key), (int, float))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _axes(nrows: int = 1, ncols: int = 1, size=(6, 4)):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), dpi=110, squeeze=False)
    return fig, axes


def plot_pseudo_labels(rounds: list[dict[str, Any]], path: Path) -> bool:
    """Figures 6 and 7: pseudo-label accuracy and coverage per round, plain rule vs DPL."""
    if not series(rounds, "client_pl_coverage_plain")[0]:
        return False
    fig, (row,) = _axes(1, 2)
    for ax, metric, label in ((row[0], "accuracy", "accuracy of the pseudo-labels (Fig. 6)"), (row[1], "coverage", "unlabeled images pseudo-labeled (Fig. 7)")):
        for tag, name in (("_plain", "without DPL"), ("_dpl", "with DPL")):
            x, y = series(rounds, f"client_pl_{metric}{tag}")
            ax.plot(x, [100 * v for v in y], marker="o", markersize=3, label=name)
        ax.set_xlabel("round")
        ax.set_ylabel("%")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_class_accuracy(rounds: list[dict[str, Any]], class_names: tuple[str, ...], path: Path) -> bool:
    """Figure 1: the global model's per-class test accuracy (rows: rounds, columns: classes)."""
    kept = [r for r in rounds if isinstance(r.get("class_accuracy"), list)]
    if not kept:
        return False
    fig, axes = _axes(1, 1, (7, 4))
    ax = axes[0][0]
    extent = (kept[0]["step"] - 0.5, kept[-1]["step"] + 0.5, len(class_names) - 0.5, -0.5)
    image = ax.imshow(
        100 * np.asarray([r["class_accuracy"] for r in kept]).T, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest", extent=extent
    )
    ax.set_yticks(range(len(class_names)))
    ax.set_yticklabels(class_names, fontsize=7)
    ax.set_xlabel("round")
    ax.set_title("per-class test accuracy of the global model (%) (Fig. 1)", fontsize=10)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_bias(rounds: list[dict[str, Any]], path: Path) -> bool:
    """Figure 3 (global model) and DMA: JS divergences, the distance from uniform, the weights."""
    if not series(rounds, "js_appu_mean")[0]:
        return False
    fig, (row,) = _axes(1, 3, (5, 3.8))
    ax = row[0]
    for name, label in (("appu", "APP-U"), ("labeled", "labeled distribution")):
        x, mean = series(rounds, f"js_{name}_mean")
        _, low = series(rounds, f"js_{name}_min")
        _, high = series(rounds, f"js_{name}_max")
        ax.plot(x, mean, label=label)
        if len(low) == len(x) == len(high):
            ax.fill_between(x, low, high, alpha=0.2)
    ax.set_xlabel("round")
    ax.set_ylabel("JS divergence (bits)")
    ax.set_title("JS(per-class accuracy, .) over clients (Fig. 3b)", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    ax = row[1]
    for key, label in (("appu_distance_uniform", "uniform weights (before DMA)"), ("appu_distance", "the round's weights (after)")):
        ax.plot(*series(rounds, key), marker="o", markersize=3, label=label)
    ax.set_xlabel("round")
    ax.set_title("|weighted APP-U - uniform|", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    ax = row[2]
    for r in rounds:
        weights = r.get("aggregation_weights")
        if weights:
            ax.scatter([r["step"]] * len(weights), weights, s=6, color="tab:blue")
    ax.set_xlabel("round")
    ax.set_title("aggregation weights of the clients", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_views(experiment: Experiment, path: Path, count: int = 6) -> bool:
    """A few unlabeled (else labeled) images of client 0 with their weak and strong views."""
    from fedprior.algorithms.engines.semi_supervised import views as fixmatch_views

    task = experiment.task
    if not task.pixel_mean:
        return False
    roles = experiment.partition.client(0)
    indices = roles.get("unlabeled", roles.get("labeled", np.zeros(0, dtype=np.int64)))[:count]
    if indices.size == 0:
        return False
    x = experiment.train["x"][torch.from_numpy(indices)]
    augment = fixmatch_views(task, experiment.config.algorithm.hyperparameters())
    generator = torch.Generator().manual_seed(experiment.config.run.seed)
    views = {"image": x, "weak": augment.weak(x, generator), "strong": augment.strong(x, generator)}
    fig, axes = _axes(3, x.shape[0], (1.3, 1.4))
    for r, (label, batch) in enumerate(views.items()):
        pixels = augment.standardizer.to_unit(batch)
        for c in range(x.shape[0]):
            ax = axes[r][c]
            image = pixels[c].permute(1, 2, 0).numpy()
            ax.imshow(image[..., 0] if image.shape[-1] == 1 else image, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(label, fontsize=9)
    fig.suptitle("client 0: weak and strong views (FixMatch)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_roles(experiment: Experiment, folder: Path) -> list[str]:
    """The labeled and the unlabeled partition, one heatmap each."""
    from fedprior.partition.plot import plot_heatmap
    from fedprior.partition.statistics import class_counts

    names = []
    labels = experiment.dataset.train_labels
    for role, parts in experiment.partition.roles.items():
        if role == "train":
            continue
        name = f"partition-{role}.png"
        plot_heatmap(
            class_counts(labels, parts, experiment.dataset.num_classes), folder / name, class_names=experiment.dataset.class_names, title=f"{role} set"
        )
        names.append(name)
    return names


def _value(r: dict[str, Any], key: str, percent: bool = True) -> str:
    v = r.get(key)
    if not isinstance(v, (int, float)):
        return "-"
    return f"{100 * v:.1f}" if percent else f"{v:.3f}"


def round_table(rounds: list[dict[str, Any]], every: int) -> str:
    header = (
        "| round | acc | PL acc (plain) | PL acc (DPL) | coverage (plain) | coverage (DPL) | JS APP-U | JS labeled "
        "| dist. before | dist. after |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [header]
    for r in rounds:
        if r["step"] % every and r is not rounds[-1]:
            continue
        lines.append(
            f"| {r['step']} | {_value(r, 'accuracy')} | {_value(r, 'client_pl_accuracy_plain')} | {_value(r, 'client_pl_accuracy_dpl')} "
            f"| {_value(r, 'client_pl_coverage_plain')} | {_value(r, 'client_pl_coverage_dpl')} "
            f"| {_value(r, 'js_appu_mean', False)} | {_value(r, 'js_labeled_mean', False)} "
            f"| {_value(r, 'appu_distance_uniform', False)} | {_value(r, 'appu_distance', False)} |"
        )
    return "\n".join(lines)


def diagnostics_summary(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """Means over the run of the per-round diagnostics (what the closing tables quote)."""
    keys = (
        "client_pl_accuracy_plain",
        "client_pl_accuracy_dpl",
        "client_pl_coverage_plain",
        "client_pl_coverage_dpl",
        "client_pl_accuracy",
        "client_pl_coverage",
        "js_appu_mean",
        "js_labeled_mean",
        "appu_distance_uniform",
        "appu_distance",
    )
    out = {}
    for key in keys:
        _, values = series(rounds, key)
        if values:
            out[f"mean_{key}"] = float(np.mean(values))
    return out


def diagnostics_of_run(folder: Path) -> dict[str, float]:
    """:func:`diagnostics_summary` of the run in ``folder``: the means every FedDB-family run's result.json holds (table cells too)."""
    return diagnostics_summary(read_rounds(folder))


def feddb_extras(experiment: Experiment, summary: dict[str, Any], folder) -> tuple[dict[str, Any], str]:
    """Draw the diagnostics into ``folder``; return no summary additions (the means are every run's, :func:`diagnostics_of_run`) and a markdown section."""
    folder = Path(folder)
    rounds = read_rounds(folder)
    figures = []
    if plot_pseudo_labels(rounds, folder / "pseudo_labels.png"):
        figures.append(("Pseudo-labels with and without DPL (Figures 6 and 7)", "pseudo_labels.png"))
    if plot_class_accuracy(rounds, experiment.dataset.class_names, folder / "class_accuracy.png"):
        figures.append(("Per-class test accuracy of the global model (Figure 1)", "class_accuracy.png"))
    if plot_bias(rounds, folder / "bias.png"):
        figures.append(("Prior bias: JS divergences (Figure 3), distance from uniform and aggregation weights (DMA)", "bias.png"))
    if plot_views(experiment, folder / "augment.png"):
        figures.append(("Weak and strong views", "augment.png"))
    figures += [(f"Partition: {name[len('partition-') : -4]} set", name) for name in plot_roles(experiment, folder)]
    body = "\n\n".join(f"### {title}\n\n![{title}]({name})" for title, name in figures)
    table = round_table(rounds, max(1, len(rounds) // 10)) if rounds else ""
    section = f"""
## Diagnostics (the FedDB paper, Figures 1, 3, 6, 7 and DMA)

Pseudo-label accuracy uses the unlabeled images' true labels, which the clients receive for
this report only (no training step reads them); PL acc is over the images that received a
label, coverage the fraction that did (client means). JS: mean over the round's clients of
the JS divergence (bits) between the global model's per-class accuracy and their APP-U / labeled
distribution. Distance: |weighted APP-U - uniform| with uniform weights (before) and the
round's aggregation weights (after).

{table}

{body}
"""
    return {}, section
