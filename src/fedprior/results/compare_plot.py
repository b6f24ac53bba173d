"""The accuracy curves of ``fedprior compare``: one mean line and a shaded ±sd band per group.

A distinct colour per group (a sweep's groups of one algorithm told apart too), and a line style
per setting (the fields that vary within one algorithm: the groups of one setting share it),
the legend outside the axes with long labels wrapped, so that 30 runs in a dozen groups, or
groups told apart by many fields, stay readable.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

from fedprior.atomic import save_figure
from fedprior.errors import FedpriorError
from fedprior.results.compare_groups import Group
from fedprior.results.report import label_accuracy_axes

DASHES: list[str | tuple[float, tuple[float, ...]]] = [
    "-",
    "--",
    ":",
    "-.",
    (0, (8, 2, 1, 2, 1, 2)),
    (0, (4, 1, 1, 1, 1, 1)),
    (0, (10, 3)),
    (0, (2, 4)),
]
"""Line styles, one per setting (solid first); beyond these, markers tell settings apart too."""
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LABEL_WIDTH = 60
"""Characters per legend line: a longer label (many varying fields) wraps, so that the legend stays beside the axes
rather than squeezing them to nothing and covering the title and the curves."""


def palette(n: int) -> list:
    """``n`` distinct colours: tab10 up to 10, tab20 up to 20, then evenly spaced hues."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in range(n)]
    return [colormaps["hsv"](i / n) for i in range(n)]


def plot_groups(groups: Sequence[Group], path: Path, title: str = "", x: str = "round") -> None:
    """Test accuracy (%) by round: per group its mean over the runs, and mean ± sd shaded where it has two or more runs.

    ``x = 'time'``: against simulated seconds instead (runs with a system model, ``[system]``): each evaluated round at the
    mean over the group's runs of its simulated time (:meth:`Group.time_curve`); a FedpriorError naming a group without it.
    """
    import matplotlib

    if x == "time":
        untimed = [g.label for g in groups if not g.time_curve()]
        if untimed:
            raise FedpriorError(
                f"--x time: the runs of {', '.join(untimed[:3])}{' ...' if len(untimed) > 3 else ''} have no simulated time "
                "(they ran without a system model: set system.speed); plot them with --x round"
            )

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = palette(len(groups))
    entries = [textwrap.fill(f"{g.label} (n={len(g.runs)})", LABEL_WIDTH) for g in groups]
    columns = 1 if len(groups) <= 16 else 2
    longest = max((len(line) for entry in entries for line in entry.splitlines()), default=0)
    lines = sum(entry.count("\n") + 1 for entry in entries)
    width = 6 + 0.065 * longest * columns
    height = max(4.5, 1.2 + 0.19 * math.ceil(lines / columns))  # a legend taller than the axes would be cut off
    fig, ax = plt.subplots(figsize=(width, height), dpi=120, layout="constrained")
    for group, entry, colour in zip(groups, entries, colours, strict=True):
        curve = group.curve()
        if x == "time":
            timed = group.time_curve()
            curve = {step: curve[step] for step in timed}
            position = {step: timed[step][0] for step in timed}
        else:
            position = {step: float(step) for step in curve}
        rounds = [position[step] for step in curve]
        mean = [100 * m for m, _, _ in curve.values()]
        style = DASHES[group.style % len(DASHES)]
        marker = MARKERS[(group.style // len(DASHES)) % len(MARKERS)] if group.style >= len(DASHES) else None
        ax.plot(rounds, mean, color=colour, linestyle=style, marker=marker, markersize=3, linewidth=1.5, label=entry)
        banded = [(step, m, sd) for step, (m, sd, _) in curve.items() if sd is not None]
        if banded:
            steps = [position[s] for s, _, _ in banded]
            ax.fill_between(steps, [100 * (m - sd) for _, m, sd in banded], [100 * (m + sd) for _, m, sd in banded], color=colour, alpha=0.15, linewidth=0)
    label_accuracy_axes(ax, title, x)
    fig.legend(loc="outside right upper", fontsize="small", ncols=columns, title="mean ± sd over seeds", title_fontsize="small", frameon=False)
    save_figure(fig, path)  # never a half-written PNG
