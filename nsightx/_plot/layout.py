"""From an aggregated DataFrame to what a plot shows: panels, series and points (no matplotlib here).

Each row of the aggregated frame for the plotted metric becomes one point. Parameters are assigned to roles:
``row_panels`` and ``col_panels`` pick the subplot, ``variant_fields`` split an annotation into several series,
and ``x_keys`` (by default every remaining parameter) give the x position. If two rows still land on the same
point, the layout refuses with the parameter that differs instead of silently keeping one of them. The one
deliberate merge: annotations left out of ``variant_annotations`` are not split by ``variant_fields``; their rows
that differ only in those fields are pooled into one point (mean of the means; the whisker spans the lowest
lower and highest upper CI bound), and the legend says so.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError
from nsightx._plot.plotoptions import DISTRIBUTIONS
from nsightx._units import scale

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._plot.plotoptions import PlotOptions


class row_panel:
    """nsight-python's ``row_panel``: an empty marker class, kept so code that imports it runs unchanged.

    In nsight-python it is exported from the top-level package and used nowhere; nsightx gives it the same
    meaning (none). Subplot rows are chosen with ``analyze.plot(row_panels=[...])``: each distinct value of the
    named parameters gets a row of panels (see :func:`build`).

    Example:
        >>> import nsightx as nsight
        >>> isinstance(nsight.row_panel(), nsight.row_panel)
        True
    """


class col_panel:
    """nsight-python's ``col_panel``: an empty marker class, kept so code that imports it runs unchanged.

    As with :class:`row_panel`, nothing reads it; subplot columns are chosen with
    ``analyze.plot(col_panels=[...])``.
    """


@dataclass
class Point:
    """One plotted value with its confidence interval (NaN bounds: no interval, e.g. a single run)."""

    x: Any
    """The x value (a number for one numeric x key, else a label)."""
    y: float
    lower: float
    upper: float
    runs: int
    pooled: int = 1
    """How many rows were pooled into this point (annotations outside ``variant_annotations``)."""
    values: tuple[float, ...] = ()
    """Every run's value (box and violin plots, which are given the runs); empty otherwise."""


@dataclass
class Series:
    """One line (or one bar colour): an annotation, possibly with variant-field values."""

    label: str
    points: list[Point] = field(default_factory=list)
    aggregate: float | None = None
    """``show_aggregate`` value over the series' points, when asked for."""


@dataclass
class Panel:
    """One subplot."""

    row: int
    col: int
    title: str
    series: list[Series] = field(default_factory=list)


@dataclass
class Layout:
    """Everything the renderer needs."""

    metric: str
    unit: str
    x_label: str
    numeric_x: bool
    x_order: list[Any]
    n_rows: int
    n_cols: int
    panels: list[Panel]
    series_labels: list[str]
    """Every series label across panels, in first-seen order (one colour each)."""
    normalized: str | None
    environment: list[str]
    """``GPU``/``Host`` values found in the frame (all of them, not only the first)."""
    tools: list[str] = field(default_factory=list)
    """The backends that measured the plotted rows (the ``Tool`` column), for the default title."""

    def table(self) -> pd.DataFrame:
        """The plotted values as a DataFrame (for ``print_data``)."""
        import pandas as pd

        rows = [
            {
                "Panel": p.title or "-",
                "Series": s.label,
                self.x_label or "x": pt.x,
                f"{self.metric} [{self.unit}]": pt.y,
                "CI95_Lower": pt.lower,
                "CI95_Upper": pt.upper,
                "NumRuns": pt.runs,
            }
            for p in self.panels
            for s in p.series
            for pt in s.points
        ]
        return pd.DataFrame(rows)


def param_columns(frame: pd.DataFrame) -> list[str]:
    """Parameter columns of an aggregated frame: those between ``Metric`` and ``AvgValue``."""
    cols = list(frame.columns)
    try:
        lo, hi = cols.index("Metric"), cols.index("AvgValue")
    except ValueError:
        raise ConfigError(
            "the frame is not an nsightx aggregated DataFrame (it needs the columns Annotation, Metric, "
            f"<parameters>, AvgValue, ...); got columns {cols[:8]}"
        ) from None
    return cols[lo + 1 : hi]


def pick_metric(frame: pd.DataFrame, metric: str | None) -> str:
    """The metric to plot: ``metric`` if given (and present), else the only one in the frame."""
    found = list(dict.fromkeys(frame["Metric"].tolist()))
    if metric is None:
        if len(found) == 1:
            return str(found[0])
        if not found:
            raise ConfigError(
                "No metrics found in the profile results. Please ensure that the profiler is "
                "configured correctly. The frame has no rows to plot."
            )
        raise ConfigError(
            f"Cannot visualize multiple metrics ({len(found)} > 1) with the @nsight.analyze.plot decorator. "
            f"Please specify a metric to plot. The metrics found are: {found}: pass metric=<one of them>"
        )
    if metric not in found:
        raise ConfigError(
            f"Metric '{metric}' not found in the profile results. Please check the metric name and "
            f"try again. The metrics found are: {found}. Pass metric=<one of them>"
        )
    return metric


def _label(names: Sequence[str], values: Sequence[Any]) -> str:
    return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def build(frame: pd.DataFrame, options: PlotOptions, runs: pd.DataFrame | None = None) -> Layout:
    """Assign rows to panels, series and x positions.

    Args:
        frame: The aggregated frame.
        options: The plot's options.
        runs: The per-run frame of the same result (:meth:`ProfileResults.runs_dataframe`): each point then holds
            its runs' values (:attr:`Point.values`), which box and violin plots draw.

    Raises:
        ConfigError: an unknown metric, parameter or annotation was named, two rows would share a point, or a
            box or violin plot was asked of a frame without its runs.
    """
    params = param_columns(frame)
    metric = pick_metric(frame, options.metric)
    if options.plot_type in DISTRIBUTIONS and runs is None:
        raise ConfigError(
            f"plot_type={options.plot_type!r} draws every run of each point, and an aggregated DataFrame holds "
            "none: plot the result itself (results.plot(...), analyze.plot or nsightx plot FILE OUT.png)"
        )
    rows = frame[frame["Metric"] == metric].reset_index(drop=True)
    options.check_params(params, "the function")
    annotations = list(dict.fromkeys(rows["Annotation"].tolist()))
    split = set(annotations) if options.variant_annotations is None else set(options.variant_annotations)
    missing = sorted(split - set(annotations))
    if missing:
        raise ConfigError(
            f"variant_annotations names {missing}, which are not in the result; its annotations are {annotations}"
        )
    used = {*options.row_panels, *options.col_panels, *options.variant_fields}
    x_keys = list(options.x_keys) if options.x_keys is not None else [p for p in params if p not in used]
    xs = _keys(rows, x_keys)
    numeric_x = len(x_keys) == 1 and all(_is_number(x[0]) for x in xs)
    x_values: list[Any] = [
        x[0] if numeric_x else (_label(x_keys, x) if len(x_keys) > 1 else (str(x[0]) if x else metric)) for x in xs
    ]
    grid = _Grid(rows, options, split, annotations, x_values)
    grid.fill(params, _run_values(runs, metric, params))
    unit, normalized, env = _facts(rows)
    if normalized is False or not isinstance(normalized, str):
        unit = _rescale(grid.panels.values(), unit)
    x_order = list(dict.fromkeys(x_values))
    return Layout(
        metric=metric,
        unit=unit,
        x_label=", ".join(x_keys) if x_keys else "",
        numeric_x=numeric_x,
        x_order=sorted(x_order) if numeric_x else x_order,
        n_rows=max(len(grid.row_order), 1),
        n_cols=max(len(grid.col_order), 1),
        panels=sorted(grid.panels.values(), key=lambda p: (p.row, p.col)),
        series_labels=grid.series_labels,
        normalized=str(normalized) if isinstance(normalized, str) else None,
        environment=env,
        tools=[str(t) for t in dict.fromkeys(rows["Tool"].tolist())] if "Tool" in rows else [],
    )


_RowKey = tuple[str, tuple[str, ...]]
"""An annotation and its config's parameter values as text: where a run and its aggregated row meet."""


def _row_key(rows: pd.DataFrame, i: int, params: list[str]) -> _RowKey:
    return str(rows.at[i, "Annotation"]), tuple(str(rows.at[i, p]) for p in params)


def _divisor(rows: pd.DataFrame, i: int) -> float:
    """What row ``i``'s values were divided by: its baseline's mean when normalised (its runs are divided alike).

    A baseline mean of 0 gives NaN here, so that its runs are left out as the frame's infinite ratios are.
    """
    divisor = float(rows.at[i, "NormalizationValue"]) if "NormalizationValue" in rows else 1.0
    return divisor if divisor != 0 else math.nan


def _run_values(runs: pd.DataFrame | None, metric: str, params: list[str]) -> dict[_RowKey, list[float]]:
    """Every run's value of ``metric``, by annotation and config (empty without ``runs``)."""
    if runs is None:
        return {}
    rows = runs[runs["Metric"] == metric]
    found: dict[_RowKey, list[float]] = {}
    columns = [rows[p].tolist() for p in params]
    for i, (ann, value) in enumerate(zip(rows["Annotation"].tolist(), rows["Value"].tolist(), strict=True)):
        key = (str(ann), tuple(str(c[i]) for c in columns))
        found.setdefault(key, []).append(float(value))
    return found


def _facts(rows: pd.DataFrame) -> tuple[str, object, list[str]]:
    """The plotted rows' unit(s), normalisation and the environment line (GPU and host)."""
    units = [str(u) for u in dict.fromkeys(rows["Unit"].tolist()) if isinstance(u, str) and u]
    normalized = rows["Normalized"].iloc[0] if "Normalized" in rows and len(rows) else False
    env = [
        f"{col} {v}"
        for col in ("GPU", "Host")
        if col in rows
        for v in dict.fromkeys(rows[col].tolist())
        if isinstance(v, str) and v
    ]
    return "/".join(units), normalized, env


class _Grid:
    """The rows of one metric placed on panels and series: what :func:`build` lays out."""

    def __init__(
        self,
        rows: pd.DataFrame,
        options: PlotOptions,
        split: set[str],
        annotations: list[str],
        x_values: list[Any],
    ) -> None:
        self.rows, self.options, self.split, self.annotations, self.x_values = (
            rows,
            options,
            split,
            annotations,
            x_values,
        )
        self.row_keys = _keys(rows, options.row_panels)
        self.col_keys = _keys(rows, options.col_panels)
        self.row_order = list(dict.fromkeys(self.row_keys))
        self.col_order = list(dict.fromkeys(self.col_keys))
        self.panels: dict[tuple[int, int], Panel] = {}
        self.points: dict[tuple[int, int, str, Any], list[int]] = {}
        self.series_labels: list[str] = []
        self.pooled: set[str] = set()
        self.series_ann: dict[str, int] = {}

    def fill(self, params: list[str], run_values: dict[_RowKey, list[float]]) -> None:
        """Place every row, then turn each (panel, series, x) into one point, series in annotation order."""
        for i in range(len(self.rows)):
            self._place(i)
        for (r, c, label, x), idx in self.points.items():
            if len(idx) > 1 and label not in self.pooled:
                _refuse_duplicates(self.rows, idx, params, label, x)
            panel = self.panels[(r, c)]
            series = next((s for s in panel.series if s.label == label), None)
            if series is None:
                series = Series(label)
                panel.series.append(series)
            point = _point(self.rows, idx, x)
            if run_values:
                point.values = tuple(
                    v / _divisor(self.rows, i) for i in idx for v in run_values.get(_row_key(self.rows, i, params), ())
                )
            series.points.append(point)
        self.series_labels.sort(key=lambda label: self.series_ann[label])  # grouped by annotation, stable
        for panel in self.panels.values():
            panel.series.sort(key=lambda s: self.series_labels.index(s.label))
            if self.options.show_aggregate is not None:
                for s in panel.series:
                    s.aggregate = _aggregate([p.y for p in s.points], self.options.show_aggregate)

    def _place(self, i: int) -> None:
        options, rows = self.options, self.rows
        ann = str(rows.at[i, "Annotation"])
        variant = [rows.at[i, f] for f in options.variant_fields] if ann in self.split else []
        label = ann + (f" ({_label(options.variant_fields, variant)})" if variant else "")
        if options.variant_fields and ann not in self.split:
            label += f" (pooled over {', '.join(options.variant_fields)})"
            self.pooled.add(label)
        r, c = self.row_order.index(self.row_keys[i]), self.col_order.index(self.col_keys[i])
        if (r, c) not in self.panels:
            titles = (_label(options.row_panels, self.row_keys[i]), _label(options.col_panels, self.col_keys[i]))
            self.panels[(r, c)] = Panel(r, c, " | ".join(t for t in titles if t))
        self.points.setdefault((r, c, label, self.x_values[i]), []).append(i)
        if label not in self.series_labels:
            self.series_labels.append(label)
            self.series_ann[label] = self.annotations.index(ann)


def _keys(rows: pd.DataFrame, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """One tuple of ``columns`` values per row (empty tuples when ``columns`` is empty: every pandas version)."""
    values = [rows[c].tolist() for c in columns]
    return [tuple(v[i] for v in values) for i in range(len(rows))]


def _refuse_duplicates(rows: pd.DataFrame, idx: list[int], params: list[str], label: str, x: Any) -> None:
    varying = [p for p in params if rows.loc[idx, p].astype(str).nunique() > 1]
    raise ConfigError(
        f"{len(idx)} rows of {label!r} fall on the same point (x={x!r}); the parameter(s) {varying or params} "
        "differ between them: add them to x_keys, variant_fields, row_panels or col_panels"
    )


def _point(rows: pd.DataFrame, idx: list[int], x: Any) -> Point:
    def column(name: str) -> list[float]:
        return [float(v) for v in rows[name].iloc[idx].tolist()] if name in rows else []

    ys = column("AvgValue")
    lows = column("CI95_Lower")
    highs = column("CI95_Upper")
    runs = int(sum(column("NumRuns")))
    finite = [y for y in ys if math.isfinite(y)]
    y = sum(finite) / len(finite) if finite else math.nan
    lo = min(lows) if lows and all(math.isfinite(v) for v in lows) else math.nan
    hi = max(highs) if highs and all(math.isfinite(v) for v in highs) else math.nan
    if math.isfinite(lo) and math.isfinite(hi):  # normalised by a negative mean, a row's ends are swapped
        lo, hi = min(*lows, *highs), max(*lows, *highs)
    return Point(x=x, y=y, lower=lo, upper=hi, runs=runs, pooled=len(idx))


def _aggregate(values: list[float], how: str) -> float:
    finite = [v for v in values if math.isfinite(v)]
    if how == "geomean":
        positive = [v for v in finite if v > 0]
        return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else math.nan
    return sum(finite) / len(finite) if finite else math.nan


def _rescale(panels: Iterable[Panel], unit: str) -> str:
    """Show the values in a readable unit (ns -> us/ms/s, byte -> kB/MB, TFLOP/s -> GFLOP/s...); return the unit.

    The largest value picks the unit (:func:`nsightx._units.scale`), so every point of the plot shares it.
    """
    panels = list(panels)
    values = [abs(p.y) for pa in panels for s in pa.series for p in s.points if math.isfinite(p.y)]
    if not unit or not values:
        return unit
    factor, new_unit = scale(max(values), unit)
    if factor == 1.0:
        return new_unit or unit
    for pa in panels:
        for s in pa.series:
            for p in s.points:
                p.y, p.lower, p.upper = p.y / factor, p.lower / factor, p.upper / factor
                p.values = tuple(v / factor for v in p.values)
            if s.aggregate is not None:
                s.aggregate /= factor
    return new_unit or unit
