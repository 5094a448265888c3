"""What a plot draws against the frame: the matplotlib Axes read back, for random results and random options.

Random results are built through the real code (``test_display_reference``'s shapes: odd names, config values of
several kinds, NaN, infinite, zero and negative values), drawn with random options (line or bar, panels, variant
fields, pooled annotations, ``show_aggregate``, ``x_log``/``y_log``, ``annotate_points``; box and violin from the
runs), and what the figure holds is read back from its Axes: each line's x and y data, each bar's height, the error
bar segments, the tick labels, the panel titles, the axis labels and scales, and the legend. A naive reference,
written from docs/api.md ("Plots") and the frame (``to_dataframe()``), says what each must be:

- one series per annotation (per annotation and variant-field values when split; ``(pooled over ...)`` when not),
  every one of them in the legend, in the order of the annotations;
- one point per row of the metric at its config's x (the value of one numeric x key, else ``a=1, b=2`` or the
  value as text), at ``AvgValue`` with its whisker from ``CI95_Lower`` to ``CI95_Upper``; a pooled point at the mean
  of its rows' means, its whisker from the lowest lower to the highest upper bound (checked where every pooled
  row's values are finite: the docs do not say what a pooled NaN gives);
- values in the readable prefix of their unit chosen by the largest plotted value (``nsightx._units``);
- a log y axis exactly when ``y_log=True``, or unset and the plotted means are positive and span more than two
  decades; a linear one starting at 0, and showing every value drawn (a negative mean or interval end is not cut
  off); a log x axis (base 2 for powers of two) exactly as documented for line plots;
- ``show_aggregate``: the mean (or geometric mean) of the series' plotted means, as a dotted line or an extra group.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_display_reference import displayed_shapes, expected_unit, shown_factor
from test_frame_reference import Shape, build

import nsightx
from nsightx._plot.render import plot_frame

EXAMPLES = int(os.environ.get("NSIGHTX_PLOT_EXAMPLES", "25"))
"""Examples per run (more while hunting: ``NSIGHTX_PLOT_EXAMPLES=300``)."""

SILENT = nsightx.VerbosityLevel.SILENT
BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}


# --- the reference: from the frame and the documented options -------------------------------------------------


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _pairs(names: list[str], values: tuple[Any, ...]) -> str:
    return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


def reference(frame: pd.DataFrame, params: list[str], metric: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Panels, series, points and unit a plot of ``frame`` must show, from docs/api.md's option table."""
    rows = frame[frame["Metric"] == metric].to_dict("records")
    rp, cp, vf = opts.get("row_panels", []), opts.get("col_panels", []), opts.get("variant_fields", [])
    xk = [p for p in params if p not in {*rp, *cp, *vf}]
    annotations = list(dict.fromkeys(str(r["Annotation"]) for r in rows))
    split = set(opts.get("variant_annotations") or annotations) if vf else set()
    numeric = len(xk) == 1 and all(_is_number(r[xk[0]]) for r in rows)
    points: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
    labels: list[tuple[int, str]] = []
    for r in rows:
        ann = str(r["Annotation"])
        if ann in split:
            label = f"{ann} ({_pairs(vf, tuple(r[f] for f in vf))})"
        else:
            label = f"{ann} (pooled over {', '.join(vf)})" if vf else ann
        title = " | ".join(t for t in (_pairs(rp, tuple(r[p] for p in rp)), _pairs(cp, tuple(r[p] for p in cp))) if t)
        values = tuple(r[p] for p in xk)
        x = values[0] if numeric else (_pairs(xk, values) if len(xk) > 1 else str(values[0]))
        points.setdefault((title, label, x), []).append(r)
        if (annotations.index(ann), label) not in labels:
            labels.append((annotations.index(ann), label))
    units = list(dict.fromkeys(str(r["Unit"]) for r in rows if isinstance(r["Unit"], str) and r["Unit"]))
    normalized = rows[0]["Normalized"] if "Normalized" in rows[0] else False
    pooled = {key: _pool(group) for key, group in points.items()}
    finite = [abs(p[0]) for p in pooled.values() if math.isfinite(p[0])]
    unit = "/".join(units)
    factor = 1.0
    if len(units) == 1 and not isinstance(normalized, str) and finite:
        unit = expected_unit(max(finite), units[0]) or units[0]
        factor = shown_factor(units[0], unit) if units[0] in ("ns", "us", "ms", "s", "byte", "bytes", "B") else 1.0
    return {
        "points": {k: (p[0] / factor, p[1] / factor, p[2] / factor, p[3]) for k, p in pooled.items()},
        "labels": [label for _, label in sorted(labels, key=lambda i: i[0])],
        "unit": unit,
        "normalized": normalized if isinstance(normalized, str) else None,
        "numeric": numeric,
        "x_keys": xk,
        "xs": sorted({k[2] for k in points}) if numeric else list(dict.fromkeys(k[2] for k in points)),
        "titles": list(dict.fromkeys(k[0] for k in points)),
    }


def _pool(group: list[dict[str, Any]]) -> tuple[float, float, float, bool]:
    """Mean of the means, lowest lower and highest upper bound; and whether the docs say what it is."""
    ys = [float(r["AvgValue"]) for r in group]
    lo = [float(r["CI95_Lower"]) for r in group]
    hi = [float(r["CI95_Upper"]) for r in group]
    known = len(group) == 1 or all(math.isfinite(v) for v in (*ys, *lo, *hi))
    ends = [*lo, *hi]  # normalised by a negative mean, a row's ends are swapped (docs: both ends are divided)
    if not all(math.isfinite(v) for v in ends):  # the docs say nothing of a half-open interval: none is checked
        return sum(ys) / len(ys), math.nan, math.nan, known and all(math.isnan(v) for v in ends)
    return sum(ys) / len(ys), min(ends), max(ends), known


# --- reading the figure back -----------------------------------------------------------------------------------


def _same(got: float, want: float) -> bool:
    if not math.isfinite(want):
        return not math.isfinite(got) or got == want
    return got == pytest.approx(want, rel=1e-9, abs=1e-12)


def _tick_value(text: str) -> str:
    """A tick label with the binary suffix the docs name (``64Mi``) written out again."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)", text)
    return str(int(match[1]) * BINARY[match[2]]) if match else text


def _x_text(x: Any) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() and re.fullmatch(r"\d+\.0", str(x)) else str(x)


def check_ticks(ax: Any, xs: list[Any], where: Any) -> None:
    """Every x value's tick reads that value (or is left empty, at most 12 being written)."""
    texts = [t.get_text() for t in ax.get_xticklabels()]
    written = [t for t in texts if t]
    assert len(written) <= 12, where
    for text, x in zip(texts, xs, strict=False):
        if text:
            assert _tick_value(text) in (str(x), _x_text(x)), (where, text, x)


def _drawn_lines(ax: Any) -> dict[str, Any]:
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def _whiskers(container: Any) -> dict[float, tuple[float, float]]:
    segments = container.lines[2][0].get_segments()
    return {round(float(s[0][0]), 6): (float(s[0][1]), float(s[1][1])) for s in segments if len(s) == 2}


def check_whisker(seg: tuple[float, float] | None, y: float, lo: float, hi: float, where: Any) -> None:
    """The whisker spans the interval; without a finite interval there is none to see."""
    if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(y):
        assert seg is not None, where
        size = max(abs(y), abs(lo), abs(hi))  # matplotlib draws y - (y - lo): exact to y's precision
        assert abs(min(seg) - lo) <= 1e-9 * size and abs(max(seg) - hi) <= 1e-9 * size, (where, seg, lo, hi)
    elif seg is not None and math.isfinite(y):
        assert seg[0] == pytest.approx(seg[1], abs=1e-12 * max(abs(y), 1)), (where, seg)


def check_line_panel(ax: Any, ref: dict[str, Any], title: str, opts: dict[str, Any], where: Any) -> None:
    lines = _drawn_lines(ax)
    mine = {k: v for k, v in ref["points"].items() if k[0] == title}
    labels = [lab for lab in ref["labels"] if any(k[1] == lab for k in mine)]
    assert sorted(lines) == sorted(labels), (where, sorted(lines), labels)
    colours = {}
    for c in ax.containers:
        colours[tuple(c.lines[2][0].get_color()[0])] = _whiskers(c)
    for label in labels:
        line = lines[label]
        pts = sorted(((k[2], v) for k, v in mine.items() if k[1] == label), key=lambda i: _pos(ref, i[0]))
        assert list(line.get_xdata()) == pytest.approx([_pos(ref, x) for x, _ in pts]), (where, label)
        ys = list(line.get_ydata())
        segs = colours.get(tuple(_rgba(line.get_color())), {})
        for (x, (y, lo, hi, known)), got in zip(pts, ys, strict=True):
            if not known:
                continue
            assert _same(float(got), y), (where, label, x, got, y)
            check_whisker(segs.get(round(_pos(ref, x), 6)), y, lo, hi, (where, label, x))
        _check_aggregate_line(ax, line, [v for _, v in pts], opts, (where, label))


def _rgba(colour: Any) -> tuple[float, ...]:
    from matplotlib.colors import to_rgba

    return tuple(to_rgba(colour))


def _pos(ref: dict[str, Any], x: Any) -> float:
    return float(x) if ref["numeric"] else float(ref["xs"].index(x))


def _aggregate(points: list[tuple[float, float, float, bool]], how: str) -> float | None:
    """The documented aggregate where the docs say what it is: every plotted mean finite (and > 0 for geomean)."""
    ys = [p[0] for p in points]
    if not all(p[3] and math.isfinite(p[0]) for p in points) or (how == "geomean" and min(ys) <= 0):
        return None
    if how == "geomean":
        return math.exp(sum(math.log(y) for y in ys) / len(ys))
    return sum(ys) / len(ys)


def _check_aggregate_line(ax: Any, line: Any, points: list[Any], opts: dict[str, Any], where: Any) -> None:
    how = opts.get("show_aggregate")
    if how is None:
        return
    want = _aggregate(points, how)
    if want is None:
        return
    flat = [
        other.get_ydata()[0]
        for other in ax.get_lines()
        if other.get_label().startswith("_") and _rgba(other.get_color()) == _rgba(line.get_color())
    ]
    assert any(_same(float(v), want) for v in flat), (where, flat, want)


def check_bar_panel(ax: Any, ref: dict[str, Any], title: str, opts: dict[str, Any], where: Any) -> None:
    from matplotlib.container import BarContainer, ErrorbarContainer

    mine = {k: v for k, v in ref["points"].items() if k[0] == title}
    labels = [lab for lab in ref["labels"] if any(k[1] == lab for k in mine)]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == labels, (where, [c.get_label() for c in bars], labels)
    whiskers: dict[str, dict[float, tuple[float, float]]] = {}
    for c, after in zip(ax.containers, [*ax.containers[1:], None], strict=True):
        if isinstance(c, BarContainer) and isinstance(after, ErrorbarContainer):
            whiskers[c.get_label()] = _whiskers(after)
    how = opts.get("show_aggregate")
    groups = [*ref["xs"], *([how] if how else [])]
    texts = [t.get_text() for t in ax.get_xticklabels()]
    for container, label in zip(bars, labels, strict=True):
        pts = {kk[2]: v for kk, v in mine.items() if kk[1] == label}
        for patch in container.patches:
            centre = patch.get_x() + patch.get_width() / 2
            g = round(centre)
            assert abs(centre - g) < 0.4, (where, label, centre)
            if g == len(ref["xs"]):  # the aggregate's group
                want = _aggregate(list(pts.values()), how or "")
                if want is not None:
                    assert _same(patch.get_height(), want), (where, label, patch.get_height(), want)
                continue
            y, lo, hi, known = pts[groups[g]]
            if known:
                assert _same(patch.get_height(), y), (where, label, groups[g], patch.get_height(), y)
                check_whisker(whiskers.get(label, {}).get(round(centre, 6)), y, lo, hi, (where, label, groups[g]))
        if how and texts[len(ref["xs"])]:
            assert texts[len(ref["xs"])] == how, where
        assert len(container.patches) == len(pts) + (1 if how else 0), (where, label)


def check_y_axis(ax: Any, ref: dict[str, Any], title: str, log: bool, where: Any) -> None:
    """The documented scale; every value drawn lies inside the axis (a linear one starts at 0 or below)."""
    assert ax.get_yscale() == ("log" if log else "linear"), where
    bottom, top = ax.get_ylim()
    drawn = [v for k, p in ref["points"].items() if k[0] == title for v in p[:3] if math.isfinite(v)]
    if not log:
        assert bottom <= 0, (where, bottom)
        if all(v >= 0 for v in drawn):
            assert bottom == 0, (where, bottom)
    if log:
        for v in (v for v in drawn if v > 0):
            assert bottom <= v * (1 + 1e-9) and v <= top * (1 + 1e-9), (where, v, bottom, top)
        return
    tol = 1e-3 * (top - bottom)  # under a thousandth of the axis: the same pixel (matplotlib keeps 0 as an edge)
    for v in drawn:
        assert bottom - tol <= v <= top + tol, (where, v, bottom, top)


def expected_log_y(ref: dict[str, Any], y_log: bool | None) -> bool:
    if y_log is not None:
        return y_log
    ys = [p[0] for p in ref["points"].values() if math.isfinite(p[0])]
    return bool(ys) and min(ys) > 0 and max(ys) / min(ys) > 100


def expected_log_x(ref: dict[str, Any], opts: dict[str, Any]) -> tuple[bool, int]:
    xs = [float(x) for x in ref["xs"]] if ref["numeric"] else []
    if opts.get("x_log") is not None:
        on = opts["x_log"]
    else:
        on = opts.get("plot_type", "line") == "line" and bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 16
    base = 2 if xs and all(x > 0 and x.is_integer() and int(x) & (int(x) - 1) == 0 for x in xs) else 10
    return on, base


# --- the properties ------------------------------------------------------------------------------------------


@st.composite
def plot_options(draw: Any, params: tuple[str, ...], annotations: list[str]) -> dict[str, Any]:
    """Random roles for the parameters and random documented options."""
    roles = [draw(st.sampled_from(["x", "x", "row", "col", "variant"])) for _ in params]
    if "x" not in roles:
        roles[0] = "x"
    opts: dict[str, Any] = {
        "plot_type": draw(st.sampled_from(["line", "bar"])),
        "row_panels": [p for p, r in zip(params, roles, strict=True) if r == "row"],
        "col_panels": [p for p, r in zip(params, roles, strict=True) if r == "col"],
        "variant_fields": [p for p, r in zip(params, roles, strict=True) if r == "variant"],
        "show_aggregate": draw(st.sampled_from([None, None, "avg", "geomean"])),
        "y_log": draw(st.sampled_from([None, None, None, True, False])),
        "annotate_points": draw(st.booleans()),
        "plot_width": 3.0,
        "plot_height": 2.0,
    }
    if opts["variant_fields"] and draw(st.booleans()):
        opts["variant_annotations"] = draw(st.lists(st.sampled_from(annotations), min_size=1, unique=True))
    if opts["plot_type"] == "line":
        opts["x_log"] = draw(st.sampled_from([None, None, False]))
    return opts


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate] if os.environ.get("NSIGHTX_PLOT_NO_SHRINK") else list(Phase),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


def draw_and_read(frame: pd.DataFrame, path: Any, **opts: Any) -> Any:
    figures: list[Any] = []
    plot_frame(frame, path, plot_callback=figures.append, **opts)
    [figure] = figures
    return figure


def check_figure(fig: Any, ref: dict[str, Any], metric: str, opts: dict[str, Any]) -> None:
    """Every panel of ``fig`` against the reference: titles, series, points, whiskers, scales, labels, legend."""
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in visible) == sorted(ref["titles"])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ref["labels"], (legend, ref["labels"])
    log_y = expected_log_y(ref, opts.get("y_log"))
    log_x, base = expected_log_x(ref, opts)
    ylabel = f"{metric} / {ref['normalized']}" if ref["normalized"] else f"{metric} ({ref['unit']})"
    ylabel = ylabel if ref["unit"] or ref["normalized"] else metric
    for ax in visible:
        title = ax.get_title()
        where = (title, opts)
        if opts["plot_type"] == "line":
            check_line_panel(ax, ref, title, opts, where)
            assert ax.get_xscale() == ("log" if log_x else "linear"), where
            if log_x:
                assert ax.xaxis.get_transform().base == base, where
            if ref["numeric"]:
                ticks = list(ax.get_xticks())
                assert ticks == pytest.approx([float(x) for x in ref["xs"]]), where
            check_ticks(ax, ref["xs"], where)
        else:
            check_bar_panel(ax, ref, title, opts, where)
            check_ticks(ax, ref["xs"], where)
        check_y_axis(ax, ref, title, log_y, where)
        if ax.get_ylabel():
            assert ax.get_ylabel() == ylabel, (where, ax.get_ylabel(), ylabel)
        if ax.get_xlabel():
            assert ax.get_xlabel() == ", ".join(ref["x_keys"]), where


def _frame(shape: Shape) -> pd.DataFrame | None:
    try:
        return build(shape).to_dataframe()
    except nsightx.ConfigError as error:  # nothing to normalise against: test_frame_reference's property
        assert re.search(r"no baseline value|names no annotation", str(error)), error
        return None


@SETTINGS
@given(shape=displayed_shapes(), pick=st.integers(0, 3), data=st.data())
def test_what_a_plot_draws_is_the_frame(shape: Shape, pick: int, data: Any, tmp_path: Any) -> None:
    frame = _frame(shape)
    if frame is None or frame.empty:
        return
    metrics = list(dict.fromkeys(frame["Metric"]))
    metric = metrics[pick % len(metrics)]
    annotations = list(dict.fromkeys(str(a) for a in frame[frame["Metric"] == metric]["Annotation"]))
    opts = data.draw(plot_options(shape.params, annotations))
    ref = reference(frame, list(shape.params), metric, opts)
    plotted = [p[0] for p in ref["points"].values() if math.isfinite(p[0])]
    if opts["y_log"] and any(v <= 0 for v in plotted):
        with pytest.raises(nsightx.ConfigError, match="y_log=True"):
            draw_and_read(frame, tmp_path / "p.png", metric=metric, **opts)
        return
    fig = draw_and_read(frame, tmp_path / "p.png", metric=metric, **opts)
    check_figure(fig, ref, metric, opts)


# --- the roofline chart ----------------------------------------------------------------------------------------

ROOF_VALUES = st.sampled_from([1e9, 3.5e12, 2.0e13, 0.5, 0.0, -1.0, math.nan, math.inf])
ROOF_CI = st.sampled_from([math.nan, 0.0, 1e8, 4e12, -1.0, math.inf])


@st.composite
def roofline_frames(draw: Any) -> pd.DataFrame:
    """A roofline table (the columns ``draw_roofline`` reads) with odd values: zero, negative, NaN, infinite."""
    rows = []
    for i in range(draw(st.integers(1, 8))):
        rows.append(
            {
                "Annotation": draw(st.sampled_from(["gemm", "a<b>&'\"", "copy"])),
                "n": 64 * (i + 1),
                "Kernel": draw(st.sampled_from(["k", "x" * 40])),
                "Precision": draw(st.sampled_from(["fp32", "fp16"])),
                "FLOPPerSecond": draw(ROOF_VALUES),
                "FLOPPerSecond_CI95": draw(ROOF_CI),
                "ArithmeticIntensity": draw(st.sampled_from([0.25, 8.0, 300.0, 0.0, -2.0, math.nan, math.inf])),
                "PeakFLOPPerSecond": 6.0e13,
                "PeakBytesPerSecond": 3.0e12,
            }
        )
    return pd.DataFrame(rows)


def _placed(row: dict[str, Any]) -> bool:
    return all(math.isfinite(row[c]) and row[c] > 0 for c in ("FLOPPerSecond", "ArithmeticIntensity"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=roofline_frames())
def test_the_roofline_chart_places_every_measured_kernel(frame: pd.DataFrame, tmp_path: Any) -> None:
    """One point per row with a positive finite intensity and FLOP/s (docs/roofline.md), its CI bar +- the
    half-width where that is a positive number; log-log axes; one legend entry per point naming its row."""
    from matplotlib.container import ErrorbarContainer
    from matplotlib.figure import Figure

    from nsightx._plot.roofchart import draw_roofline

    rows = frame.to_dict("records")
    placed = [r for r in rows if _placed(r)]
    if not placed:
        with pytest.raises(nsightx.ConfigError, match="plot_roofline"):
            draw_roofline(frame, tmp_path / "r.png")
        return
    figures: list[Any] = []
    original = Figure.savefig

    def keep(fig: Any, *args: Any, **kwargs: Any) -> None:
        figures.append(fig)
        original(fig, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", keep)
        draw_roofline(frame, tmp_path / "r.png")
    [ax] = figures[0].axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    points = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(points) == len(placed)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for container, row in zip(points, placed, strict=True):
        line = container.lines[0]
        assert (list(line.get_xdata()), list(line.get_ydata())) == (
            [row["ArithmeticIntensity"]],
            [row["FLOPPerSecond"]],
        )
        ci = row["FLOPPerSecond_CI95"]
        bars = container.lines[2]
        if math.isfinite(ci) and ci > 0:
            [segment] = bars[0].get_segments()
            y = row["FLOPPerSecond"]
            assert sorted(float(p[1]) for p in segment) == pytest.approx([y - ci, y + ci], rel=1e-12), row
        else:
            assert not bars, row
        kernel = row["Kernel"] if len(row["Kernel"]) <= 28 else row["Kernel"][:27] + "…"
        want = f"{row['Annotation']} (n={row['n']}) {kernel} [{row['Precision']}]"
        assert container.get_label() == want and want in labels, (container.get_label(), want)
    lo, hi = ax.get_xlim()
    assert all(lo <= r["ArithmeticIntensity"] <= hi for r in placed)


# --- the notebook view: markup in names and config values ------------------------------------------------------

MARKUP = ("<td>x</td>", "a&b", '"q"', "it's", "<script>alert(1)</script>")


def test_the_notebook_view_escapes_markup_in_names_and_config_values() -> None:
    """Every annotation name and config value with HTML's special characters reads back as written, and the
    markup stays text (one table row per frame row; no tag but the table's own)."""
    from html.parser import HTMLParser

    from test_display_reference import parse_html

    from nsightx._results.html import results_html

    @nsightx.analyze.kernel(configs=[(m, i) for i, m in enumerate(MARKUP)], runs=2, backend="host", verbosity=SILENT)
    def marked(tag: str, i: int) -> None:
        with nsightx.annotate(MARKUP[i]):
            pass
        with nsightx.annotate("<b>&amp;"):
            pass

    result = marked()
    frame = result.to_dataframe()
    html = results_html(frame, result.data)
    header, rows = parse_html(html)
    assert len(rows) == len(frame)
    for cells, record in zip(rows, frame.to_dict("records"), strict=True):
        got = dict(zip(header, cells, strict=True))
        assert (got["Annotation"], got["tag"], got["i"]) == (record["Annotation"], record["tag"], str(record["i"]))
    tags: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: Any) -> None:
            tags.append(tag)

    Tags().feed(html)
    assert set(tags) <= {"table", "caption", "thead", "tbody", "tr", "th", "td", "p"}, set(tags)
    assert tags.count("tr") == len(frame) + 1


# --- the differences found, each at its smallest -----------------------------------------------------------------


def _rows(values: list[tuple[int, float, float, float]], unit: str = "ns", normalized: Any = False) -> pd.DataFrame:
    base = {"Annotation": "a", "Metric": "m", "NumRuns": 3, "Unit": unit, "Normalized": normalized, "Tool": "host"}
    return pd.DataFrame(
        [{**base, "n": n, "AvgValue": y, "CI95_Lower": lo, "CI95_Upper": hi} for n, y, lo, hi in values]
    )[["Annotation", "Metric", "n", "AvgValue", "NumRuns", "Unit", "CI95_Lower", "CI95_Upper", "Normalized", "Tool"]]


def test_a_host_result_whose_derived_metric_is_negative_is_drawn_below_zero(tmp_path: Any) -> None:
    """A derived metric below 0 (a difference, a signed error): the linear axis reached only from 0 up, so every
    point sat under the axis and none was visible. Real host backend; the figure checked as the property does."""

    @nsightx.analyze.kernel(
        configs=[1, 2, 4],
        runs=3,
        backend="host",
        verbosity=SILENT,
        derive_metric=lambda t, n: (-float(n) - 1e-9 * t, "x"),
    )
    def signed(n: int) -> None:
        with nsightx.annotate("sum"):
            sum(range(10 * n))

    result = signed()
    frame = result.to_dataframe()
    metrics = list(dict.fromkeys(frame["Metric"]))
    metric = next(m for m in metrics if frame[frame["Metric"] == m]["AvgValue"].max() < 0)
    for plot_type in ("line", "bar"):
        opts = {"plot_type": plot_type, "plot_width": 3.0, "plot_height": 2.0}
        figures: list[Any] = []
        result.plot(str(tmp_path / f"{plot_type}.png"), metric=metric, plot_callback=figures.append, **opts)
        check_figure(figures[0], reference(frame, ["n"], metric, opts), metric, opts)
        assert figures[0].axes[0].get_ylim()[0] < frame[frame["Metric"] == metric]["AvgValue"].min()


def test_a_panel_with_no_positive_value_on_a_log_axis_is_drawn(tmp_path: Any) -> None:
    """A panel whose only point is NaN, on a log y axis (asked for, or chosen for the others' span): matplotlib
    raised ValueError ("Data cannot be log-scaled") from inside savefig instead of drawing the plot."""
    frame = _rows([(1, 5.0, math.nan, math.nan), (2, 5000.0, math.nan, math.nan), (3, math.nan, math.nan, math.nan)])
    for opts in ({"y_log": True}, {}):
        for plot_type in ("line", "bar"):
            fig = draw_and_read(frame, tmp_path / "p.png", row_panels=["n"], plot_type=plot_type, **opts)
            assert [ax.get_yscale() for ax in fig.axes] == ["log"] * 3


def test_a_whisker_spans_an_interval_whose_ends_normalising_swapped(tmp_path: Any) -> None:
    """Normalised by a negative mean, a row's CI95_Lower is above its CI95_Upper (docs: both ends are divided);
    the whisker was drawn with no length at all, as if the mean were exact."""
    frame = _rows([(1, 1.0, 8.0, -6.0), (2, 2.0, 1.5, 2.5)], unit="ratio", normalized="b")
    for plot_type in ("line", "bar"):
        fig = draw_and_read(frame, tmp_path / "p.png", plot_type=plot_type)
        ax = fig.axes[0]
        [whiskers] = [c for c in ax.containers if hasattr(c, "has_yerr") and c.has_yerr]
        segments = sorted(sorted(float(p[1]) for p in s) for s in whiskers.lines[2][0].get_segments())
        assert segments == [[-6.0, 8.0], [1.5, 2.5]]
        assert ax.get_ylim()[0] <= -6.0
