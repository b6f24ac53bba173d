"""A picture of a partition: the clients x classes heatmap, with each client's size beside it (matplotlib, Agg, no display needed).

Choices a reader of many partitions needs:

- ``view``: ``counts`` (samples per cell) or ``percent`` (each client's class shares, rows
  summing to 100%: how skewed a client is, whatever its size);
- ``scale``: ``log`` or ``linear`` colours; ``auto`` (the default) takes ``log`` for counts
  spanning a factor of :data:`LOG_RATIO` or more (a Dirichlet split's 1 beside 5,427),
  ``linear`` otherwise and for percentages;
- ``order``: ``client`` (row i is client i) or ``clustered`` (clients grouped by their largest
  class, alike clients adjacent: :func:`fedprior.partition.client_order.cluster_clients`);
  ``auto`` clusters more than :data:`CLUSTER_ABOVE` clients, which in id order read as a barcode;
- a bar per client on the right gives its size (the row's total), in the heatmap's order; in a feature-shift
  federation (``partition.domains``) the bars are coloured by the client's domain, with a legend naming the domains.

The title wraps to the figure's width and is never cut.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from fedprior.atomic import save_figure
from fedprior.errors import ConfigError
from fedprior.partition.client_order import ClientOrder, class_shares, cluster_clients

if TYPE_CHECKING:
    from matplotlib.figure import Figure

View = Literal["counts", "percent"]
Scale = Literal["auto", "linear", "log"]
Order = Literal["auto", "client", "clustered"]
VIEWS: tuple[str, ...] = ("counts", "percent")
SCALES: tuple[str, ...] = ("auto", "linear", "log")
ORDERS: tuple[str, ...] = ("auto", "client", "clustered")
CLUSTER_ABOVE = 100
"""``order='auto'`` clusters the rows of more clients than this."""
MAX_ROWS = 1000
"""More clients than this are drawn as MAX_ROWS of them, evenly spaced in id order (the title's betas cover all): the figure
and its clustering (quadratic in the rows of a class block) stay bounded at any number of clients."""
LOG_RATIO = 10.0
"""``scale='auto'`` colours counts on a log scale when the largest non-zero cell is at least this many times the smallest."""
TITLE_SIZE = 10


def _ticks(count: int, most: int = 25) -> np.ndarray:
    """At most about ``most`` evenly spaced tick positions out of ``count``."""
    step = max(1, int(np.ceil(count / most)))
    return np.arange(0, count, step)


def _check_choice(name: str, value: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise ConfigError(f"{name}: unknown value {value!r}; accepted: {', '.join(accepted)}")


def resolved_scale(values: np.ndarray, view: str, scale: str) -> str:
    """``scale``, with ``auto`` decided: log for counts whose non-zero cells span a factor of LOG_RATIO or more."""
    if scale != "auto":
        return scale
    nonzero = values[values > 0]
    if view == "percent" or nonzero.size == 0:
        return "linear"
    return "log" if nonzero.max() >= LOG_RATIO * nonzero.min() else "linear"


def resolved_order(num_clients: int, order: str) -> str:
    """``order``, with ``auto`` decided: clustered for more than CLUSTER_ABOVE clients."""
    if order != "auto":
        return order
    return "clustered" if num_clients > CLUSTER_ABOVE else "client"


def fit_title(figure: Figure, text: str, fontsize: float = TITLE_SIZE) -> None:
    """``text`` as the figure's title, its lines wrapped until the drawn title lies inside the figure (never cut on a side)."""
    dpi = figure.dpi
    width_px = figure.get_figwidth() * dpi
    columns = max(20, int(width_px / (0.6 * fontsize * dpi / 72)))  # DejaVu Sans averages ~0.55 em per character

    def wrapped(width: int) -> str:
        return "\n".join(textwrap.fill(line, width, break_long_words=True, break_on_hyphens=False) or line for line in text.split("\n"))

    title = figure.suptitle(wrapped(columns), fontsize=fontsize)
    for _ in range(12):
        figure.canvas.draw()
        box = title.get_window_extent()
        if box.x0 >= 0 and box.x1 <= width_px:
            return
        columns = max(8, int(columns * 0.85))
        title.set_text(wrapped(columns))


def heatmap_figure(
    counts: np.ndarray,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
    *,
    view: View = "counts",
    scale: Scale = "auto",
    order: Order = "auto",
    client_domains: Sequence[int] | None = None,
    domain_names: Sequence[str] = (),
) -> Figure:
    """The partition's figure (not written): axes labelled ``heatmap`` and ``client sizes``, a colorbar, the title.

    Cells with no samples are white, so a sparse partition reads at a glance; values are
    printed in the cells when the matrix is at most 20 x 20. The title carries
    beta^CIB and beta^hetero (the MFCL paper's Appendix B) of all the clients. Sized for 10..1,000 clients and 10..100
    classes; of more than :data:`MAX_ROWS` clients, MAX_ROWS evenly spaced ones are drawn (:func:`shown_clients`).
    ``client_domains`` (each client's domain, an index into ``domain_names``; -1: none) colours the size bars by domain.
    """
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.figure import Figure

    from fedprior.partition.statistics import describe

    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or 0 in counts.shape:
        raise ValueError(f"counts must be a non-empty (clients, classes) matrix, got shape {counts.shape}")
    _check_choice("view", view, VIEWS)
    _check_choice("scale", scale, SCALES)
    _check_choice("order", order, ORDERS)
    summary = describe(counts)  # every client's
    all_clients = counts.shape[0]
    ids = shown_clients(all_clients)
    counts = counts[ids]
    num_clients, num_classes = counts.shape
    sampled = f"{num_clients:,} of {all_clients:,} clients (evenly spaced ids)" if num_clients < all_clients else ""
    if class_names is not None and len(class_names) != num_classes:
        raise ValueError(f"{len(class_names)} class names for {num_classes} classes")
    names = [str(class_names[i]) if class_names is not None else str(i) for i in range(num_classes)]

    arrangement = resolved_order(num_clients, order)
    ordering = cluster_clients(counts) if arrangement == "clustered" else ClientOrder(np.arange(num_clients), ())
    rows = counts[ordering.order]
    values = 100.0 * class_shares(rows) if view == "percent" else rows.astype(np.float64)
    colour_scale = resolved_scale(values, view, scale)
    nonzero = values[values > 0]
    top = float(nonzero.max()) if nonzero.size else 1.0
    if colour_scale == "log" and nonzero.size and nonzero.min() < top:
        norm: Normalize = LogNorm(vmin=float(nonzero.min()), vmax=top)
    else:
        norm = Normalize(vmin=0.0, vmax=100.0 if view == "percent" else top)  # shares on one 0-100 scale, comparable across pictures

    width = float(np.clip(5.5 + 0.11 * num_classes, 8.5, 17.5))
    height = float(np.clip(2.2 + 0.09 * num_clients, 3.8, 11.0))
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(1, 2, width_ratios=[max(4.0, width - 3.2), 1.2])
    axes = figure.add_subplot(grid[0, 0], label="heatmap")
    bars = figure.add_subplot(grid[0, 1], sharey=axes, label="client sizes")

    cmap = colormaps["viridis"].with_extremes(bad="white")
    image = axes.imshow(np.ma.masked_equal(values, 0), aspect="auto", interpolation="nearest", cmap=cmap, norm=norm)
    colorbar = figure.colorbar(image, ax=[axes, bars], fraction=0.04, pad=0.02)
    unit = "% of the client's samples" if view == "percent" else "samples"
    colorbar.set_label(unit + (" (log scale)" if isinstance(norm, LogNorm) else ""))

    xs = _ticks(num_classes)
    axes.set_xticks(xs)
    shown = [names[i] for i in xs]
    long_names = any(len(name) > 3 for name in shown)
    axes.set_xticklabels(shown, rotation=45 if long_names else 0, ha="right" if long_names else "center", fontsize=8)
    axes.set_xlabel("class")
    if ordering.groups:
        _label_groups(axes, bars, ordering, names, height * figure.dpi * 0.8 / num_clients)
        axes.set_ylabel(f"{sampled or f'{num_clients} clients'}, grouped by their largest class")
    else:
        ys = _ticks(num_clients)
        axes.set_yticks(ys)
        axes.set_yticklabels([str(ids[ordering.order[i]]) for i in ys], fontsize=8)
        axes.set_ylabel(f"client ({sampled})" if sampled else "client")
    if num_clients <= 20 and num_classes <= 20:
        for (row, col), value in np.ndenumerate(values):
            if value:
                text = str(int(value)) if view == "counts" else (f"{value:.0f}" if value >= 0.5 else "<1")
                axes.text(col, row, text, ha="center", va="center", fontsize=7, color="black" if norm(value) > 0.5 else "white")

    sizes = rows.sum(axis=1)
    colours: object = "0.45"
    if client_domains is not None:
        palette = colormaps["tab10" if len(domain_names) <= 10 else "tab20"]
        domain_of = np.asarray(client_domains, dtype=np.int64)[ids][ordering.order]
        colours = [palette(d % palette.N) if d >= 0 else "0.45" for d in domain_of]
        from matplotlib.patches import Patch

        handles = [Patch(color=palette(d % palette.N), label=str(name)) for d, name in enumerate(domain_names)]
        bars.legend(handles=handles, title="domain", fontsize=7, title_fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    bars.barh(np.arange(num_clients), sizes, height=1.0 if num_clients > 200 else 0.8, color=colours, linewidth=0)
    bars.tick_params(axis="y", left=False, labelleft=False)
    bars.tick_params(axis="x", labelsize=8)
    bars.set_xlabel("client size")
    bars.set_xlim(0, max(int(sizes.max()), 1) * 1.05)
    axes.set_ylim(num_clients - 0.5, -0.5)  # the bars' autoscale would add margins to the shared axis
    bars.grid(axis="x", color="0.85", linewidth=0.5)
    bars.set_axisbelow(True)

    if summary["beta_cib"] is None:
        betas = "no samples"
    else:
        betas = f"β_CIB = {summary['beta_cib']:.2f}, β_hetero = {summary['beta_hetero']:.2f} bits"
    heading = f"{all_clients:,} clients, {num_classes} classes: {betas}" + (f"; {sampled} drawn" if sampled else "")
    if client_domains is not None:
        heading += f"; {len(domain_names)} domains, size bars coloured by domain"
    fit_title(figure, f"{title}\n{heading}" if title else heading)
    return figure


def shown_clients(num_clients: int, most: int = MAX_ROWS) -> np.ndarray:
    """The rows a heatmap draws: every client up to ``most``, else ``most`` ids evenly spaced over 0..num_clients-1."""
    if num_clients <= most:
        return np.arange(num_clients)
    return np.linspace(0, num_clients - 1, most).round().astype(np.int64)


def _label_groups(axes, bars, ordering: ClientOrder, names: list[str], row_px: float) -> None:
    """Lines between the dominant-class blocks; a tick naming the class and its client count where the block is tall enough."""
    ticks, labels = [], []
    for group in ordering.groups:
        if group.start:
            for ax in (axes, bars):
                ax.axhline(group.start - 0.5, color="0.25", linewidth=0.6)
        if group.size * row_px >= 10:
            name = "empty" if group.label is None else names[group.label]
            ticks.append((group.start + group.stop - 1) / 2)
            labels.append(f"{textwrap.shorten(name, 16, placeholder='…')} ({group.size})")
    axes.set_yticks(ticks)
    axes.set_yticklabels(labels, fontsize=8)
    axes.tick_params(axis="y", length=0)


def plot_heatmap(
    counts: np.ndarray,
    path: str | Path,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
    *,
    view: View = "counts",
    scale: Scale = "auto",
    order: Order = "auto",
    client_domains: Sequence[int] | None = None,
    domain_names: Sequence[str] = (),
) -> Path:
    """Write :func:`heatmap_figure`'s PNG to ``path`` (atomically: never a half-written file); return the path."""
    figure = heatmap_figure(counts, class_names, title, view=view, scale=scale, order=order, client_domains=client_domains, domain_names=domain_names)
    return save_figure(figure, Path(path))
