"""The partition picture: titles inside the figure, percent view, log colours, client-size bars, the clustered order for many clients."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import LogNorm, SymLogNorm

from fedprior.errors import ConfigError
from fedprior.partition.client_order import cluster_clients
from fedprior.partition.dirichlet import DirichletPartitioner
from fedprior.partition.plot import heatmap_figure, plot_heatmap
from fedprior.partition.statistics import class_counts

# The title `fedprior partition --labeled` gave, which the old picture cut on both sides (issue 20).
LONG_TITLE = (
    "fashion-mnist, unlabeled set, dirichlet (alpha=0.1, min_size=0, balance=False, seed=0, num_labeled=4000, num_unlabeled=0, labeled_in_unlabeled=True)"
)
NAMES = ["T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"]


def dirichlet_counts(clients: int, alpha: float, classes: int = 10, per_class: int = 6000, seed: int = 0) -> np.ndarray:
    labels = np.repeat(np.arange(classes), per_class)
    parts = DirichletPartitioner(num_clients=clients, alpha=alpha, seed=seed).split(labels)
    return class_counts(labels, parts, classes)


def parts_of(figure):
    axes = {ax.get_label(): ax for ax in figure.axes}
    return axes["heatmap"], axes["client sizes"]


def bar_widths(bars) -> np.ndarray:
    return np.array([patch.get_width() for patch in bars.patches])


@pytest.mark.parametrize("shape", [(10, 10), (20, 100), (100, 10), (1000, 10)])
def test_every_text_lies_inside_the_figure(shape):
    """The title wraps instead of running off both sides; tick labels and axis labels stay inside too."""
    counts = dirichlet_counts(shape[0], 0.3, classes=shape[1], per_class=600)
    names = (NAMES * 10)[: shape[1]]
    figure = heatmap_figure(counts, names, title=LONG_TITLE)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    title = figure._suptitle
    assert title is not None and "labeled_in_unlabeled=True" in title.get_text().replace("\n", " ")
    if figure.get_figwidth() < 12:  # 100 classes make a figure wide enough for the line
        assert title.get_text().count("\n") >= 2  # wrapped: the long line became two or more
    box = title.get_window_extent(renderer)
    assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height, (box, width, height)
    # everything drawn (tick labels, axis labels, colorbar) lies inside the figure as well, in inches
    drawn = figure.get_tightbbox(renderer)
    inches = figure.get_size_inches()
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01 and drawn.x1 <= inches[0] + 0.01 and drawn.y1 <= inches[1] + 0.01, (drawn, inches)


def test_a_title_of_one_unbreakable_word_is_broken_to_fit():
    figure = heatmap_figure(np.ones((5, 3), dtype=int), title="x" * 400)
    box = figure._suptitle.get_window_extent(figure.canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= figure.bbox.width


def test_counts_spanning_orders_of_magnitude_get_a_log_scale():
    counts = np.array([[5427, 1, 0], [900, 30, 2], [0, 700, 12]])
    image = parts_of(heatmap_figure(counts))[0].images[0]
    assert isinstance(image.norm, (LogNorm, SymLogNorm))
    assert (image.norm.vmin, image.norm.vmax) == (1, 5427)
    # under the old linear scale 900 and 30 were nearly the same colour; on the log scale they are far apart
    assert image.norm(900) - image.norm(30) > 0.35
    linear = parts_of(heatmap_figure(counts, scale="linear"))[0].images[0]
    assert not isinstance(linear.norm, LogNorm) and linear.norm.vmax == 5427


def test_auto_scale_stays_linear_for_even_counts_and_for_percent():
    even = np.full((20, 10), 30) + np.arange(10)  # 30..39: one colour step is readable linearly
    assert not isinstance(parts_of(heatmap_figure(even))[0].images[0].norm, LogNorm)
    assert isinstance(parts_of(heatmap_figure(even, scale="log"))[0].images[0].norm, LogNorm)
    skewed = np.array([[5427, 1, 0], [900, 30, 2]])
    assert not isinstance(parts_of(heatmap_figure(skewed, view="percent"))[0].images[0].norm, LogNorm)


def test_percent_view_shows_each_clients_class_shares():
    counts = np.array([[30, 10, 0], [1, 1, 2], [0, 0, 0], [5, 0, 0]])
    heat, bars = parts_of(heatmap_figure(counts, view="percent"))
    values = np.ma.filled(heat.images[0].get_array(), 0)
    expected = np.array([[75, 25, 0], [25, 25, 50], [0, 0, 0], [100, 0, 0]], dtype=float)
    np.testing.assert_allclose(values, expected)
    assert heat.images[0].norm.vmax == 100
    assert "% of the client's samples" in heat.images[0].colorbar.ax.get_ylabel()
    np.testing.assert_array_equal(bar_widths(bars), [40, 4, 0, 5])  # the sizes the percent view hides


@pytest.mark.parametrize("clients, order", [(30, "auto"), (30, "clustered"), (1000, "auto"), (1000, "client")])
def test_size_bars_are_the_client_sizes_in_the_heatmaps_row_order(clients, order):
    counts = dirichlet_counts(clients, 0.2, per_class=clients * 10)
    heat, bars = parts_of(heatmap_figure(counts, order=order))
    rows = np.ma.filled(heat.images[0].get_array(), 0)
    assert len(bars.patches) == clients
    np.testing.assert_array_equal(bar_widths(bars), rows.sum(axis=1))
    clustered = order == "clustered" or (order == "auto" and clients > 100)
    row_order = cluster_clients(counts).order if clustered else np.arange(clients)
    np.testing.assert_array_equal(rows, counts[row_order])
    np.testing.assert_array_equal(bar_widths(bars), counts.sum(axis=1)[row_order])
    assert bars.get_ylim() == heat.get_ylim() == (clients - 0.5, -0.5)  # bar i beside row i


def test_a_thousand_clients_are_drawn_grouped_by_their_largest_class():
    counts = dirichlet_counts(1000, 0.1)
    counts[[3, 500]] = 0  # empty clients (alpha 0.1 makes some more) go last
    empty = int((counts.sum(axis=1) == 0).sum())
    heat, _ = parts_of(heatmap_figure(counts, NAMES))
    rows = np.ma.filled(heat.images[0].get_array(), 0).astype(int)
    assert sorted(map(tuple, rows)) == sorted(map(tuple, counts))  # the same clients, reordered
    sizes = rows.sum(axis=1)
    assert empty >= 2 and np.all(sizes[-empty:] == 0) and np.all(sizes[:-empty] > 0)
    dominant = rows[:-empty].argmax(axis=1)
    assert np.all(np.diff(dominant) >= 0)  # blocks, one per largest class, not a barcode
    labels = [t.get_text() for t in heat.get_yticklabels()]
    per_class = np.bincount(counts[counts.sum(axis=1) > 0].argmax(axis=1), minlength=10)
    assert labels[:10] == [f"{name} ({n})" for name, n in zip(NAMES, per_class, strict=True)]
    assert labels[10] == f"empty ({empty})" and "grouped by their largest class" in heat.get_ylabel()


def test_more_clients_than_max_rows_draw_an_evenly_spaced_sample_and_title_all_of_them():
    """50,000 clients: 1,000 rows drawn (the figure and its clustering stay bounded), the betas in the title are all clients'."""
    from fedprior.partition.plot import MAX_ROWS, _ticks, shown_clients
    from fedprior.partition.statistics import beta_hetero

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 20, (50_000, 10)) * (rng.random((50_000, 10)) < 0.3)
    figure = heatmap_figure(counts, order="client")
    heat, bars = parts_of(figure)
    rows = np.ma.filled(heat.images[0].get_array(), 0).astype(int)
    ids = shown_clients(50_000)
    assert rows.shape == (MAX_ROWS, 10) and len(bars.patches) == MAX_ROWS and ids[0] == 0 and ids[-1] == 49_999
    np.testing.assert_array_equal(rows, counts[ids])
    assert f"{beta_hetero(counts):.2f} bits" in figure._suptitle.get_text()
    assert "1,000 of 50,000 clients" in heat.get_ylabel() and heat.get_yticklabels()[1].get_text() == str(ids[_ticks(MAX_ROWS)[1]])


def test_cluster_order_puts_alike_clients_next_to_each_other():
    """Two kinds of class-0 clients, interleaved by id: the clustered order makes them two runs."""
    kinds = np.array([[10, 5, 0, 0], [10, 0, 0, 6]])
    counts = np.concatenate([kinds[i % 2] + np.array([i % 3, 0, 0, 0]) for i in range(12)]).reshape(12, 4)
    ordering = cluster_clients(counts)
    assert sorted(ordering.order) == list(range(12)) and len(ordering.groups) == 1
    kind = (counts[ordering.order, 3] > 0).astype(int)
    assert np.count_nonzero(np.diff(kind)) == 1


def test_bad_choices_are_named():
    with pytest.raises(ConfigError, match="view: unknown value 'pct'; accepted: counts, percent"):
        heatmap_figure(np.ones((2, 2), dtype=int), view="pct")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="order: unknown value 'sorted'; accepted: auto, client, clustered"):
        heatmap_figure(np.ones((2, 2), dtype=int), order="sorted")  # type: ignore[arg-type]


def test_plot_heatmap_writes_the_png(tmp_path):
    path = plot_heatmap(dirichlet_counts(200, 0.3, per_class=500), tmp_path / "sub" / "heat.png", NAMES, title=LONG_TITLE, view="percent")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
