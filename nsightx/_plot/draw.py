"""Drawing a :class:`~nsightx._plot.layout.Layout` with matplotlib's object API and the Agg canvas.

``matplotlib.pyplot`` is never imported: a :class:`~matplotlib.figure.Figure` is built directly, so plotting
neither picks nor changes the user's matplotlib backend and leaves no figure open. The scales come from
:mod:`nsightx._plot.scales`, box and violin plots from :mod:`nsightx._plot.distribution`, and value labels are kept
apart by :mod:`nsightx._plot.labels`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._plot import scales
from nsightx._plot.distribution import draw_runs
from nsightx._plot.labels import separate
from nsightx._plot.layout import Layout, Point, Series
from nsightx._plot.plotoptions import DISTRIBUTIONS, PlotOptions

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DPI = 110
"""Dots per inch of the figure and of the file written (the labels are measured at the resolution saved)."""

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
_LINESTYLES = ("-", "--", "-.", ":")


def style(index: int, total: int) -> dict[str, Any]:
    """Colour, marker and line style of series ``index`` of ``total``: distinct for any number of series.

    Up to 10 series take the ``tab10`` colours; up to 20, ``tab20``; beyond that colours are spread evenly
    over ``turbo`` and markers and line styles vary too, so no two series look alike and none is dropped.
    """
    from matplotlib import colormaps

    if total <= 10:
        color = colormaps["tab10"](index % 10)
    elif total <= 20:
        color = colormaps["tab20"](index % 20)
    else:
        color = colormaps["turbo"](0.05 + 0.9 * index / max(total - 1, 1))
    return {
        "color": color,
        "marker": _MARKERS[index % len(_MARKERS)],
        "linestyle": _LINESTYLES[(index // len(_MARKERS)) % len(_LINESTYLES)] if total > 10 else "-",
    }


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "nan"
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"


def _positions(layout: Layout) -> dict[Any, float]:
    if layout.numeric_x:
        return {x: float(x) for x in layout.x_order}
    return {x: float(i) for i, x in enumerate(layout.x_order)}


@dataclass(frozen=True)
class _Scales:
    """Which axes of every panel are logarithmic (:mod:`nsightx._plot.scales`)."""

    x_log: bool
    y_log: bool
    values: list[float]
    """The finite y values of the whole plot (:func:`nsightx._plot.scales.y_values`)."""


def _x_labels(layout: Layout) -> list[str]:
    """The x tick texts: ``64Mi`` for large powers of two, every value as written otherwise."""
    binary = layout.numeric_x and scales.binary_labels([float(x) for x in layout.x_order])
    return [scales.tick_label(x, binary) for x in layout.x_order]


def _draw_line(ax: Axes, series: Series, pos: dict[Any, float], st: dict[str, Any], opts: PlotOptions) -> None:
    pts = sorted(series.points, key=lambda p: pos[p.x])
    xs = [pos[p.x] for p in pts]
    ys = [p.y for p in pts]
    ax.plot(
        xs,
        ys,
        label=series.label,
        color=st["color"],
        marker=st["marker"],
        linestyle=st["linestyle"],
        linewidth=1.6,
        markersize=5,
    )
    lo = [p.lower for p in pts]
    hi = [p.upper for p in pts]
    if any(math.isfinite(v) for v in lo):
        ax.fill_between(xs, lo, hi, color=st["color"], alpha=0.18, linewidth=0)
        ax.errorbar(xs, ys, yerr=_yerr(pts), fmt="none", ecolor=st["color"], elinewidth=1, capsize=3)
    if opts.annotate_points:
        for x, y in zip(xs, ys, strict=True):
            if math.isfinite(y):
                ax.annotate(
                    _fmt(y),
                    (x, y),
                    textcoords="offset points",
                    xytext=(0, 6),
                    ha="center",
                    fontsize=7,
                    color=st["color"],
                )
    if series.aggregate is not None and math.isfinite(series.aggregate):
        ax.axhline(series.aggregate, color=st["color"], linestyle=(0, (1, 3)), linewidth=1.2)


def _yerr(points: list[Point]) -> list[list[float]]:
    below = [p.y - p.lower if math.isfinite(p.lower) else 0.0 for p in points]
    above = [p.upper - p.y if math.isfinite(p.upper) else 0.0 for p in points]
    return [[max(v, 0.0) for v in below], [max(v, 0.0) for v in above]]


def _draw_bars(ax: Axes, panel_series: list[Series], layout: Layout, opts: PlotOptions) -> list[str]:
    """Grouped bars: one group per x value (plus one for the aggregate), one bar per series."""
    labels = _x_labels(layout)
    groups = {x: float(i) for i, x in enumerate(layout.x_order)}
    agg_at = float(len(labels))
    if opts.show_aggregate is not None:
        labels.append(opts.show_aggregate)
    n = max(len(panel_series), 1)
    width = 0.8 / n
    for k, series in enumerate(panel_series):
        st = style(layout.series_labels.index(series.label), len(layout.series_labels))
        pts = list(series.points)
        xs = [groups[p.x] - 0.4 + width * (k + 0.5) for p in pts]
        ys = [p.y for p in pts]
        if series.aggregate is not None:
            xs.append(agg_at - 0.4 + width * (k + 0.5))
            ys.append(series.aggregate)
            pts.append(Point(x=opts.show_aggregate, y=series.aggregate, lower=math.nan, upper=math.nan, runs=0))
        ax.bar(xs, ys, width=width * 0.95, color=st["color"], label=series.label, edgecolor="black", linewidth=0.4)
        if any(math.isfinite(p.lower) for p in pts):
            ax.errorbar(xs, ys, yerr=_yerr(pts), fmt="none", ecolor="black", elinewidth=1, capsize=max(1, 6 / n))
        if opts.annotate_points:
            _bar_labels(ax, xs, pts, n)
    _category_ticks(ax, labels)
    return labels


def _bar_labels(ax: Axes, xs: list[float], points: list[Point], n: int) -> None:
    """Each bar's value above its whisker (or its top, without one); :mod:`nsightx._plot.labels` keeps them apart."""
    for x, p in zip(xs, points, strict=True):
        if math.isfinite(p.y):
            top = max(p.y, p.upper) if math.isfinite(p.upper) else p.y
            ax.annotate(
                _fmt(p.y),
                (x, top),
                textcoords="offset points",
                xytext=(0, 2),
                ha="center",
                fontsize=6 if n > 3 else 7,
                rotation=90 if n > 3 else 0,
                va="bottom",
            )


def _category_ticks(ax: Axes, labels: list[str]) -> None:
    """One tick per group, its label slanted when some label is long."""
    long = max((len(s) for s in labels), default=0) > 6
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(scales.thinned(labels), rotation=30 if long else 0, ha="right" if long else "center")


def _line_x_axis(ax: Axes, layout: Layout, log: bool) -> None:
    """A numeric x axis (log when ``log``: base 2 for powers of two) with a tick at each x, or one of categories."""
    if not layout.numeric_x:
        ax.set_xticks(range(len(layout.x_order)))
        ax.set_xticklabels([str(x) for x in layout.x_order])
        return
    xs = [float(x) for x in layout.x_order]
    if log:
        ax.set_xscale("log", base=scales.base_of(xs))
    ax.set_xticks(xs)
    ax.set_xticklabels(scales.thinned(_x_labels(layout)))
    ax.minorticks_off()


def _draw_panel(
    ax: Axes,
    panel: Any,
    cell: tuple[int, int],
    layout: Layout,
    opts: PlotOptions,
    ylabel: str,
    axes: _Scales,
) -> None:
    """Draw one subplot (``panel`` of the layout at ``cell``; an empty cell is hidden)."""
    if panel is None:
        ax.set_visible(False)
        return
    r, c = cell
    if opts.plot_type == "bar":
        _draw_bars(ax, panel.series, layout, opts)
    elif opts.plot_type in DISTRIBUTIONS:
        draw_runs(ax, panel.series, layout, opts, style, axes.y_log)
        _category_ticks(ax, _x_labels(layout))
    else:
        pos = _positions(layout)
        for series in panel.series:
            st = style(layout.series_labels.index(series.label), len(layout.series_labels))
            _draw_line(ax, series, pos, st, opts)
        _line_x_axis(ax, layout, axes.x_log)
    scales.apply_y(ax, axes.y_log, scales.drawn_values(panel.series), axes.values)
    ax.grid(True, axis="y", which="both" if axes.y_log else "major", alpha=0.3)
    if panel.title:
        ax.set_title(panel.title, fontsize=10)
    if r == layout.n_rows - 1:
        ax.set_xlabel(layout.x_label)
    if c == 0:
        ax.set_ylabel(ylabel)


def default_title(layout: Layout, function: str | None, plot_type: str) -> str:
    """What a plot shows, when ``title`` is not given: ``matmul: host__time_duration.sum (host backend)``.

    nsight-python titles every plot "Nsight Analyze Kernel Plot Results", which names neither the function nor
    the backend (issue 38).
    """
    what = f"{layout.metric}, every run" if plot_type in DISTRIBUTIONS else layout.metric
    tools = "/".join(layout.tools)
    text = f"{what} ({tools} backend)" if tools else what
    return f"{function}: {text}" if function else text


def _legend_title(opts: PlotOptions) -> str:
    if opts.plot_type == "box":
        return "every run: box from the\n1st to 3rd quartile, median,\nwhiskers 1.5 IQR, dots beyond"
    if opts.plot_type == "violin":
        return "every run: density,\nmedian line, a dot per run"
    aggregate = f"; dotted: {opts.show_aggregate}" if opts.show_aggregate and opts.plot_type == "line" else ""
    return "95% CI shown" + aggregate


def draw(layout: Layout, path: Path, opts: PlotOptions, function: str | None = None) -> Path:
    """Draw ``layout`` to ``path`` and return it (``function`` names the profiled function in the default title)."""
    from matplotlib.figure import Figure

    legend_cols = 1 if len(layout.series_labels) <= 16 else 2
    legend_width = 2.6 * legend_cols
    fig = Figure(
        figsize=(opts.plot_width * layout.n_cols + legend_width, opts.plot_height * layout.n_rows + 0.8),
        layout="constrained",
        dpi=DPI,
    )
    axes = fig.subplots(layout.n_rows, layout.n_cols, squeeze=False)
    ylabel = opts.ylabel or _default_ylabel(layout)
    values = scales.y_values(layout, opts.plot_type in DISTRIBUTIONS)
    chosen = _Scales(x_log=scales.log_x(layout, opts), y_log=scales.log_y(values, opts), values=values)
    by_cell = {(p.row, p.col): p for p in layout.panels}
    for r in range(layout.n_rows):
        for c in range(layout.n_cols):
            _draw_panel(axes[r][c], by_cell.get((r, c)), (r, c), layout, opts, ylabel, chosen)
    handles, labels = _legend_entries(axes, layout)
    fig.legend(
        handles,
        labels,
        loc="outside right upper",
        ncols=legend_cols,
        fontsize=8,
        title=_legend_title(opts),
        title_fontsize=8,
    )
    subtitle = "; ".join(layout.environment)
    title = opts.title if opts.title is not None else default_title(layout, function, opts.plot_type)
    fig.suptitle(title + (f"\n{subtitle}" if subtitle else ""), fontsize=12)
    if opts.annotate_points:
        separate(fig)
    if opts.plot_callback is not None:
        opts.plot_callback(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path


def _legend_entries(axes: Any, layout: Layout) -> tuple[list[Any], list[str]]:
    found: dict[str, Any] = {}
    for row in axes:
        for ax in row:
            for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
                found.setdefault(label, h)
    order = [label for label in layout.series_labels if label in found]
    return [found[label] for label in order], order


def _default_ylabel(layout: Layout) -> str:
    if layout.normalized:
        return f"{layout.metric} / {layout.normalized}"
    return f"{layout.metric} ({layout.unit})" if layout.unit else layout.metric
