"""Box and violin plots: every run of each point, for spotting outliers and runs that fall into two groups.

A mean and its confidence interval hide how the runs are spread: one slow first run, or runs that alternate
between two speeds, give the same bar as a wide, even spread. ``plot_type="box"`` draws the quartiles, the
whiskers (1.5 IQR) and each run beyond them; ``"violin"`` draws the density of the runs with their median, and
every run as a dot over it (as ``pytest-benchmark --benchmark-histogram`` shows the rounds of each benchmark).
Points are grouped as bars are: one group per x value, one box or violin per series, in the series' colour.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from nsightx._plot.layout import Layout, Series

if TYPE_CHECKING:
    from nsightx._plot.plotoptions import PlotOptions

JITTER = 0.25
"""Half the spread of the run dots across a violin, as a fraction of its width."""


def _slots(layout: Layout, panel_series: list[Series]) -> tuple[dict[Any, float], float]:
    """The centre of each x group and the width of one box: the groups of a bar plot."""
    groups = {x: float(i) for i, x in enumerate(layout.x_order)}
    return groups, 0.8 / max(len(panel_series), 1)


def _jitter(n: int) -> list[float]:
    """``n`` offsets spread evenly over [-1, 1] in a fixed order (the same drawing every time)."""
    if n < 2:
        return [0.0] * n
    return [((i * 0.618034) % 1.0) * 2.0 - 1.0 for i in range(n)]


def draw_runs(
    ax: Any, panel_series: list[Series], layout: Layout, opts: PlotOptions, style: Any, log: bool = False
) -> None:
    """Draw one panel's series as boxes or violins of their runs, grouped by x value (``log``: on a log y axis)."""
    groups, width = _slots(layout, panel_series)
    for k, series in enumerate(panel_series):
        colour = style(layout.series_labels.index(series.label), len(layout.series_labels))["color"]
        points = [p for p in series.points if any(math.isfinite(v) for v in p.values)]
        data = [[v for v in p.values if math.isfinite(v)] for p in points]
        at = [groups[p.x] - 0.4 + width * (k + 0.5) for p in points]
        if not points:
            continue
        if opts.plot_type == "box":
            _boxes(ax, data, at, width, colour)
        else:
            _violins(ax, data, at, width, colour, log)
        ax.plot([], [], color=colour, linewidth=6, label=series.label)  # a legend entry in the series' colour
    ax.set_xticks(range(len(layout.x_order)))


def _unlog(parts: dict[str, Any], data: list[list[float]]) -> None:
    """Violins drawn from the logarithms of the runs ``data``, put back at the runs' values: what a log axis shows.

    A density estimated on the values themselves is stretched on a log axis (a tail of slow runs becomes a long
    spike); estimated on their logarithms, it is the density the reader sees. The median line is put at the
    runs' median: of an even number of runs, the median of their logarithms is the geometric mean of the middle
    two, which is not the median the box plot and the legend name.
    """
    for body in parts["bodies"]:
        for path in body.get_paths():
            path.vertices[:, 1] = 10.0 ** path.vertices[:, 1]
    medians = parts["cmedians"]
    middles = [statistics.median(d) for d in data]
    medians.set_segments(
        [[(x, middle) for x, _ in segment] for segment, middle in zip(medians.get_segments(), middles, strict=True)]
    )


def _boxes(ax: Any, data: list[list[float]], at: list[float], width: float, colour: Any) -> None:
    parts = ax.boxplot(
        data,
        positions=at,
        widths=width * 0.8,
        patch_artist=True,
        manage_ticks=False,
        medianprops={"color": "black", "linewidth": 1.2},
        flierprops={"marker": "o", "markersize": 3, "markerfacecolor": colour, "markeredgecolor": colour},
    )
    for box in parts["boxes"]:
        box.set_facecolor(colour)
        box.set_alpha(0.55)


def _violins(ax: Any, data: list[list[float]], at: list[float], width: float, colour: Any, log: bool) -> None:
    spread = [d for d in data if len(set(d)) > 1]  # a violin needs two different values; a lone run is a dot
    places = [a for a, d in zip(at, data, strict=True) if len(set(d)) > 1]
    if spread:
        shown = [[math.log10(v) for v in d] for d in spread] if log else spread
        parts = ax.violinplot(shown, positions=places, widths=width * 0.9, showmedians=True, showextrema=False)
        for body in parts["bodies"]:
            body.set_facecolor(colour)
            body.set_edgecolor(colour)
            body.set_alpha(0.45)
        parts["cmedians"].set_color("black")
        if log:
            _unlog(parts, spread)
    for x, values in zip(at, data, strict=True):
        offsets = _jitter(len(values))
        xs = [x + o * JITTER * width for o in offsets]
        ax.scatter(xs, values, s=6, color=colour, edgecolors="none", alpha=0.8, zorder=3)
