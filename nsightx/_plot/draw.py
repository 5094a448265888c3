"""Drawing a :class:`~nsightx._plot.layout.Layout` with matplotlib's object API and the Agg canvas.

``matplotlib.pyplot`` is never imported: a :class:`~matplotlib.figure.Figure` is built directly, so plotting
neither picks nor changes the user's matplotlib backend and leaves no figure open.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._plot.layout import Layout, Point, Series

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from nsightx._plot.options import PlotOptions

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


def _use_log_x(layout: Layout) -> bool:
    xs = [float(x) for x in layout.x_order] if layout.numeric_x else []
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 16


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
    labels = [str(x) for x in layout.x_order]
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
            for x, y in zip(xs, ys, strict=True):
                if math.isfinite(y):
                    ax.annotate(
                        _fmt(y),
                        (x, y),
                        textcoords="offset points",
                        xytext=(0, 3),
                        ha="center",
                        fontsize=6 if n > 3 else 7,
                        rotation=90 if n > 3 else 0,
                        va="bottom",
                    )
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(
        labels,
        rotation=30 if max((len(s) for s in labels), default=0) > 6 else 0,
        ha="right" if max((len(s) for s in labels), default=0) > 6 else "center",
    )
    return labels


def _draw_panel(
    ax: Axes,
    panel: Any,
    cell: tuple[int, int],
    layout: Layout,
    pos: dict[Any, float],
    opts: PlotOptions,
    ylabel: str,
) -> None:
    """Draw one subplot (``panel`` of the layout at ``cell``; an empty cell is hidden)."""
    if panel is None:
        ax.set_visible(False)
        return
    r, c = cell
    if opts.plot_type == "bar":
        _draw_bars(ax, panel.series, layout, opts)
    else:
        for series in panel.series:
            st = style(layout.series_labels.index(series.label), len(layout.series_labels))
            _draw_line(ax, series, pos, st, opts)
        if _use_log_x(layout):
            ax.set_xscale("log", base=2)
        if layout.numeric_x:
            ax.set_xticks([float(x) for x in layout.x_order])
            ax.set_xticklabels([str(x) for x in layout.x_order])
            ax.minorticks_off()
        else:
            ax.set_xticks(range(len(layout.x_order)))
            ax.set_xticklabels([str(x) for x in layout.x_order])
    ax.set_ylim(bottom=0)
    ax.grid(True, axis="y", alpha=0.3)
    if panel.title:
        ax.set_title(panel.title, fontsize=10)
    if r == layout.n_rows - 1:
        ax.set_xlabel(layout.x_label)
    if c == 0:
        ax.set_ylabel(ylabel)


def draw(layout: Layout, path: Path, opts: PlotOptions) -> Path:
    """Draw ``layout`` to ``path`` and return it."""
    from matplotlib.figure import Figure

    legend_cols = 1 if len(layout.series_labels) <= 16 else 2
    legend_width = 2.6 * legend_cols
    fig = Figure(
        figsize=(opts.plot_width * layout.n_cols + legend_width, opts.plot_height * layout.n_rows + 0.8),
        layout="constrained",
    )
    axes = fig.subplots(layout.n_rows, layout.n_cols, squeeze=False)
    ylabel = opts.ylabel or _default_ylabel(layout)
    pos = _positions(layout)
    by_cell = {(p.row, p.col): p for p in layout.panels}
    for r in range(layout.n_rows):
        for c in range(layout.n_cols):
            _draw_panel(axes[r][c], by_cell.get((r, c)), (r, c), layout, pos, opts, ylabel)
    handles, labels = _legend_entries(axes, layout)
    fig.legend(
        handles,
        labels,
        loc="outside right upper",
        ncols=legend_cols,
        fontsize=8,
        title="95% CI shown"
        + (f"; dotted: {opts.show_aggregate}" if opts.show_aggregate and opts.plot_type == "line" else ""),
        title_fontsize=8,
    )
    subtitle = "; ".join(layout.environment)
    fig.suptitle(opts.title + (f"\n{subtitle}" if subtitle else ""), fontsize=12)
    if opts.plot_callback is not None:
        opts.plot_callback(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
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
