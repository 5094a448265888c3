"""Axis scales: a log axis where the values span too much for a linear one, unless the options say otherwise.

On a linear y axis from 0, a sweep whose times run from 1 us to 5 ms puts every point below 50 us on the axis
itself (issue 38). So the y axis is logarithmic when its positive values span more than :data:`Y_LOG_SPAN` (two
decades), and the x axis when a numeric x spans :data:`X_LOG_SPAN` or more (base 2 when every x is a power of
two, as sizes usually are). ``x_log``/``y_log`` (as in Triton's ``perf_report``) force either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError

if TYPE_CHECKING:
    from nsightx._plot.layout import Layout, Series
    from nsightx._plot.plotoptions import PlotOptions

Y_LOG_SPAN = 100.0
"""Largest over smallest positive y value beyond which the y axis is logarithmic (more than two decades)."""

X_LOG_SPAN = 16.0
"""Largest over smallest numeric x from which the x axis is logarithmic (a size sweep of 5 powers of two)."""

MAX_X_LABELS = 12
"""At most this many x tick labels are written; beyond it every second (third, ...) one is."""


def y_values(layout: Layout, distribution: bool) -> list[float]:
    """The finite y values a plot of ``layout`` shows: means, or every run for a box or violin plot."""
    points = [p for panel in layout.panels for s in panel.series for p in s.points]
    values: Iterable[float] = (v for p in points for v in p.values) if distribution else (p.y for p in points)
    return [v for v in values if math.isfinite(v)]


def log_y(values: Sequence[float], opts: PlotOptions) -> bool:
    """Whether the y axis is logarithmic: ``y_log`` when given, else positive values spanning over two decades.

    Raises:
        ConfigError: ``y_log=True`` with a value <= 0, which a log axis cannot show.
    """
    if opts.y_log is not None:
        if opts.y_log and any(v <= 0 for v in values):
            raise ConfigError(
                f"y_log=True, but {sum(v <= 0 for v in values)} plotted value(s) are <= 0 and a log axis cannot "
                "show them; leave y_log unset (a linear axis from 0 is chosen for such values)"
            )
        return opts.y_log
    return bool(values) and min(values) > 0 and max(values) / min(values) > Y_LOG_SPAN


def log_x(layout: Layout, opts: PlotOptions) -> bool:
    """Whether the x axis is logarithmic: ``x_log`` when given, else a numeric x spanning :data:`X_LOG_SPAN`.

    Raises:
        ConfigError: ``x_log=True`` on an axis of categories or with an x value <= 0.
    """
    xs = [float(x) for x in layout.x_order] if layout.numeric_x else []
    if opts.x_log:
        if not xs or min(xs) <= 0:
            what = "categories" if not xs else f"values down to {min(xs):g}"
            raise ConfigError(
                f"x_log=True needs positive numbers on the x axis, and {layout.x_label or 'x'} holds {what}; "
                "leave x_log unset"
            )
        return True
    if opts.x_log is False or opts.plot_type != "line":
        return False
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= X_LOG_SPAN


def base_of(xs: Sequence[float]) -> int:
    """2 when every x is a power of two (sizes), else 10."""
    return 2 if all(x > 0 and float(x).is_integer() and int(x) & (int(x) - 1) == 0 for x in xs) else 10


def binary_labels(xs: Sequence[float]) -> bool:
    """Whether x ticks are written ``1Ki`` ... ``64Mi``: every x a power of two, the largest 16384 or more."""
    return bool(xs) and base_of(xs) == 2 and max(xs) >= 16384


def tick_label(x: Any, binary: bool) -> str:
    """An x tick's text: powers of two from 1024 up as ``1Ki``, ``64Mi`` when ``binary``; else as written."""
    if binary and isinstance(x, int | float) and float(x).is_integer() and x >= 1024:
        for shift, suffix in ((40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")):
            if int(x) % (1 << shift) == 0:
                return f"{int(x) >> shift}{suffix}"
    return str(x)


def thinned(labels: Sequence[str]) -> list[str]:
    """``labels`` with every k-th one kept, so that at most :data:`MAX_X_LABELS` are written.

    The others are empty: their ticks stay, unlabelled. The first label is always kept.
    """
    step = max(1, math.ceil(len(labels) / MAX_X_LABELS))
    return [text if i % step == 0 else "" for i, text in enumerate(labels)]


def drawn_values(series: Iterable[Series]) -> list[float]:
    """The finite y values one panel draws: means, interval ends, runs and aggregates."""
    values = [v for s in series for p in s.points for v in (p.y, p.lower, p.upper, *p.values)]
    values += [s.aggregate for s in series if s.aggregate is not None]
    return [v for v in values if math.isfinite(v)]


def apply_y(ax: Any, log: bool, drawn: Sequence[float] = (), everywhere: Sequence[float] = ()) -> None:
    """A log y axis with plain numbers (``0.01``, not ``10^-2``), or a linear one from 0.

    ``drawn`` are the finite values this panel draws (:func:`drawn_values`), ``everywhere`` those of the whole
    plot. A linear axis starts at 0 unless something drawn lies below it (a negative mean or interval end of a
    derived metric): it then reaches down to that value, with a line at 0, so that no point is cut off. A log
    panel with nothing positive to show (every value of its points NaN) takes the range of the whole plot, where
    matplotlib would otherwise fail to place a single tick.
    """
    if log:
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        if not any(v > 0 for v in drawn):
            positive = [v for v in everywhere if v > 0] or [1.0]
            ax.set_ylim(min(positive), max(max(positive), 10.0 * min(positive)))
    elif min(drawn, default=0.0) < 0:
        ax.axhline(0.0, color="0.5", linewidth=0.8)  # the zero line, which also keeps 0 on the axis
    else:
        ax.set_ylim(bottom=0)
