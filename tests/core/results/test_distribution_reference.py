"""What a box or violin plot draws against the runs: the matplotlib Axes read back, for random results.

Random results are built through the real code (``test_display_reference``'s shapes: odd names, config values of
several kinds, NaN, infinite, failed and missing runs, normalised results) and drawn with ``plot_type="box"`` or
``"violin"`` and random roles (panels, variant fields, pooled annotations) and ``y_log``. A naive reference, written
from docs/api.md ("Plots") and the per-run frame (``runs_dataframe()``), says what each point must show:

- its runs: those of its annotation (or the annotations pooled into its series) and config, grouped as bars are:
  one group per x value, one box per series in legend order, at ``group - 0.4 + width * (k + 0.5)`` with width
  ``0.8 / series in the panel``; the docs do not say what happens to a NaN, infinite or failed run: the reference
  expects the finite runs, and a point without one to draw nothing;
- a normalised result's runs divided by the row's ``NormalizationValue`` (docs: every value is divided by the
  baseline's mean for the same config and metric), shown in the unit the line plot shows;
- box: the quartiles and median (the docs name no quartile method: numpy's default, linear, is checked), whiskers
  that end at the farthest run within 1.5 IQR of the box (not at the fence), and every run beyond as a dot;
- violin: a median line at the runs' median (a point with two different values or more), its body spanning the
  lowest to the highest run, and one dot per run at that run's value, near the violin's centre;
- a log y axis exactly when ``y_log=True``, or unset and every run is positive and they span more than two decades.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_display_reference import displayed_shapes, expected_unit, shown_factor
from test_frame_reference import Shape, build

import nsightx

EXAMPLES = int(os.environ.get("NSIGHTX_DIST_EXAMPLES", "30"))
"""Examples per run (more while hunting: ``NSIGHTX_DIST_EXAMPLES=300``)."""

SILENT = nsightx.VerbosityLevel.SILENT
TIMES = ("ns", "us", "ms", "s", "byte", "bytes", "B")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _pairs(names: list[str], values: tuple[Any, ...]) -> str:
    return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


def reference(frame: pd.DataFrame, runs: pd.DataFrame, params: list[str], metric: str, opts: dict[str, Any]) -> Any:
    """Per panel title: the series labels in order, the x groups, and per (label, x) the finite runs shown."""
    rows = frame[frame["Metric"] == metric].to_dict("records")
    rp, cp, vf = opts.get("row_panels", []), opts.get("col_panels", []), opts.get("variant_fields", [])
    xk = [p for p in params if p not in {*rp, *cp, *vf}]
    annotations = list(dict.fromkeys(str(r["Annotation"]) for r in rows))
    split = set(opts.get("variant_annotations") or annotations) if vf else set()
    numeric = len(xk) == 1 and all(_is_number(r[xk[0]]) for r in rows)

    def place(r: dict[str, Any]) -> tuple[str, str, Any]:
        ann = str(r["Annotation"])
        if ann in split:
            label = f"{ann} ({_pairs(vf, tuple(r[f] for f in vf))})"
        else:
            label = f"{ann} (pooled over {', '.join(vf)})" if vf else ann
        title = " | ".join(t for t in (_pairs(rp, tuple(r[p] for p in rp)), _pairs(cp, tuple(r[p] for p in cp))) if t)
        values = tuple(r[p] for p in xk)
        return title, label, values[0] if numeric else (_pairs(xk, values) if len(xk) > 1 else str(values[0]))

    keys = [place(r) for r in rows]
    labels = sorted(dict.fromkeys(k[1] for k in keys), key=lambda lab: _ann_of(lab, annotations))
    xs = sorted({k[2] for k in keys}) if numeric else list(dict.fromkeys(k[2] for k in keys))
    config = lambda r: (str(r["Annotation"]), *(r[p] for p in params))  # noqa: E731
    denom = {config(r): r.get("NormalizationValue", 1.0) for r in rows}
    values: dict[tuple[str, str, Any], list[float]] = {k: [] for k in keys}
    for r in runs[runs["Metric"] == metric].to_dict("records"):
        key = place(r)
        if key in values:
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero baseline mean: an infinite ratio
                values[key].append(float(np.float64(r["Value"]) / np.float64(denom[config(r)])))
    units = list(dict.fromkeys(str(r["Unit"]) for r in rows if isinstance(r["Unit"], str) and r["Unit"]))
    normalized = isinstance(rows[0].get("Normalized"), str)
    means = [abs(float(r["AvgValue"])) for r in rows if math.isfinite(float(r["AvgValue"]))]
    factor = 1.0
    if len(units) == 1 and not normalized and means and units[0] in TIMES:
        factor = shown_factor(units[0], expected_unit(max(means), units[0]) or units[0])
    shown = {k: sorted(v / factor for v in vs if math.isfinite(v)) for k, vs in values.items()}
    return {"labels": labels, "xs": xs, "values": shown, "titles": list(dict.fromkeys(k[0] for k in keys))}


def _ann_of(label: str, annotations: list[str]) -> int:
    """The annotation index of a series label (the longest annotation name that starts it)."""
    found = [i for i, a in enumerate(annotations) if label == a or label.startswith(a + " (")]
    return max(found, key=lambda i: len(annotations[i]))


def box_stats(d: list[float]) -> dict[str, Any]:
    """Quartiles (numpy's default method), the whiskers' ends (the farthest run within 1.5 IQR), the runs beyond."""
    q1, med, q3 = (float(v) for v in np.percentile(d, [25, 50, 75]))
    iqr = q3 - q1
    inside = [v for v in d if q1 - 1.5 * iqr <= v <= q3 + 1.5 * iqr]
    lo, hi = min(min(inside), q1), max(max(inside), q3)  # no run between box and fence: no whisker, not one inside
    return {"q1": q1, "med": med, "q3": q3, "lo": lo, "hi": hi, "out": sorted(v for v in d if v < lo or v > hi)}


def _close(a: float, b: float) -> bool:
    return a == pytest.approx(b, rel=1e-9, abs=1e-12)


# --- reading the figure back -----------------------------------------------------------------------------------


def read_boxes(ax: Any) -> dict[float, dict[str, Any]]:
    """Per box position: what matplotlib's ``boxplot`` drew (whiskers, caps, median, fliers, in that order)."""
    lines = [  # not the legend entries (no data) nor the line at 0 (in axes coordinates across)
        line
        for line in ax.get_lines()
        if (len(line.get_xdata()) or line.get_linewidth() != 6) and line.get_transform() == ax.transData
    ]
    found: dict[float, dict[str, Any]] = {}
    for i in range(0, len(lines), 6):
        w_lo, w_hi, _, _, median, fliers = lines[i : i + 6]
        at = round(float(w_lo.get_xdata()[0]), 6)
        found[at] = {
            "q1": float(w_lo.get_ydata()[0]),
            "lo": float(w_lo.get_ydata()[1]),
            "q3": float(w_hi.get_ydata()[0]),
            "hi": float(w_hi.get_ydata()[1]),
            "med": float(median.get_ydata()[0]),
            "out": sorted(float(v) for v in fliers.get_ydata()),
        }
    return found


def read_violins(ax: Any) -> tuple[list[tuple[float, float]], list[Any], list[tuple[float, float, float]]]:
    """The dots (x, y), the bodies' paths, and the median segments (x centre, y, half-width)."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection

    dots = [(float(x), float(y)) for c in ax.collections if isinstance(c, PathCollection) for x, y in c.get_offsets()]
    bodies = [p for c in ax.collections if isinstance(c, PolyCollection) for p in c.get_paths()]
    medians = [
        ((float(s[0][0]) + float(s[1][0])) / 2, float(s[0][1]), abs(float(s[1][0]) - float(s[0][0])) / 2)
        for c in ax.collections
        if isinstance(c, LineCollection)
        for s in c.get_segments()
    ]
    return dots, bodies, medians


def check_panel(ax: Any, ref: dict[str, Any], title: str, plot_type: str, where: Any) -> None:
    mine = {k: v for k, v in ref["values"].items() if k[0] == title}
    labels = [lab for lab in ref["labels"] if any(k[1] == lab for k in mine)]
    width = 0.8 / max(len(labels), 1)
    want = {}
    for (_, label, x), values in mine.items():
        if values:
            at = ref["xs"].index(x) - 0.4 + width * (labels.index(label) + 0.5)
            want[round(at, 6)] = (values, (label, x))
    if plot_type == "box":
        got = read_boxes(ax)
        assert sorted(got) == pytest.approx(sorted(want)), (where, sorted(got), sorted(want))
        for (_at, (values, what)), drawn in zip(sorted(want.items()), [got[k] for k in sorted(got)], strict=True):
            stats = box_stats(values)
            for name in ("q1", "med", "q3", "lo", "hi"):
                assert _close(drawn[name], stats[name]), (where, what, name, drawn[name], stats[name], values)
            assert drawn["out"] == pytest.approx(stats["out"], rel=1e-9), (where, what, drawn["out"], stats["out"])
        return
    dots, bodies, medians = read_violins(ax)
    assert len(dots) == sum(len(v) for v, _ in want.values()), (where, len(dots))
    spread = {at: v for at, (v, _) in want.items() if len(set(v)) > 1}
    assert len(medians) == len(spread) == len(bodies), (where, len(medians), len(spread), len(bodies))
    for x, y, _ in sorted(medians):
        at = min(spread, key=lambda a: abs(a - x))
        assert abs(at - x) < 1e-6, (where, x, sorted(spread))
        assert _close(y, float(np.median(spread[at]))), (where, at, y, spread[at])
    for body in bodies:
        ys = body.vertices[:, 1]
        x = float(np.mean(body.vertices[:, 0]))
        at = min(spread, key=lambda a: abs(a - x))
        assert _close(float(ys.min()), min(spread[at])) and _close(float(ys.max()), max(spread[at])), (where, at)
    for at, (values, what) in want.items():
        near = sorted(y for x, y in dots if abs(x - at) <= 0.25 * width + 1e-6)
        assert near == pytest.approx(values, rel=1e-9), (where, what, near, values)


def expected_log_y(ref: dict[str, Any], y_log: bool | None) -> bool:
    if y_log is not None:
        return y_log
    values = [v for vs in ref["values"].values() for v in vs]
    return bool(values) and min(values) > 0 and max(values) / min(values) > 100


def check_figure(fig: Any, ref: dict[str, Any], opts: dict[str, Any]) -> None:
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in visible) == sorted(ref["titles"])
    drawn = {k[1] for k, v in ref["values"].items() if v}
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == [lab for lab in ref["labels"] if lab in drawn], (legend, ref["labels"])
    log = expected_log_y(ref, opts.get("y_log"))
    for ax in visible:
        check_panel(ax, ref, ax.get_title(), opts["plot_type"], (ax.get_title(), opts))
        assert ax.get_yscale() == ("log" if log else "linear"), opts


@st.composite
def distribution_options(draw: Any, params: tuple[str, ...], annotations: list[str]) -> dict[str, Any]:
    roles = [draw(st.sampled_from(["x", "x", "row", "col", "variant"])) for _ in params]
    if "x" not in roles:
        roles[0] = "x"
    opts: dict[str, Any] = {
        "plot_type": draw(st.sampled_from(["box", "violin"])),
        "row_panels": [p for p, r in zip(params, roles, strict=True) if r == "row"],
        "col_panels": [p for p, r in zip(params, roles, strict=True) if r == "col"],
        "variant_fields": [p for p, r in zip(params, roles, strict=True) if r == "variant"],
        "y_log": draw(st.sampled_from([None, None, None, True, False])),
        "plot_width": 3.0,
        "plot_height": 2.0,
    }
    if opts["variant_fields"] and draw(st.booleans()):
        opts["variant_annotations"] = draw(st.lists(st.sampled_from(annotations), min_size=1, unique=True))
    return opts


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=displayed_shapes(), pick=st.integers(0, 3), data=st.data())
def test_what_a_box_or_violin_draws_is_the_runs(shape: Shape, pick: int, data: Any, tmp_path: Any) -> None:
    try:
        result = build(shape)
        frame = result.to_dataframe()
    except nsightx.ConfigError as error:  # nothing to normalise against: test_frame_reference's property
        assert re.search(r"no baseline value|names no annotation", str(error)), error
        return
    if frame.empty:
        return
    metrics = list(dict.fromkeys(frame["Metric"]))
    metric = metrics[pick % len(metrics)]
    annotations = list(dict.fromkeys(str(a) for a in frame[frame["Metric"] == metric]["Annotation"]))
    opts = data.draw(distribution_options(shape.params, annotations))
    ref = reference(frame, result.runs_dataframe(), list(shape.params), metric, opts)
    runs = [v for vs in ref["values"].values() for v in vs]
    figures: list[Any] = []
    if opts["y_log"] and any(v <= 0 for v in runs):
        with pytest.raises(nsightx.ConfigError, match="y_log=True"):
            result.plot(str(tmp_path / "p.png"), metric=metric, plot_callback=figures.append, **opts)
        return
    result.plot(str(tmp_path / "p.png"), metric=metric, plot_callback=figures.append, **opts)
    check_figure(figures[0], ref, opts)


# --- the differences found, each at its smallest -----------------------------------------------------------------


def _two_runs_shape(base: list[float], other: list[float], normalize: str | None) -> Shape:
    from test_frame_reference import ANNOTATIONS

    a, b = ANNOTATIONS[:2]
    regions = {(a, 0, r): [{"gpu__time_duration.sum": v}] for r, v in enumerate(base)}
    regions |= {(b, 0, r): [{"gpu__time_duration.sum": v}] for r, v in enumerate(other)}
    return Shape(
        configs=[(1,)],
        params=("n",),
        runs=len(base),
        annotations=(a, b),
        metrics=("gpu__time_duration.sum",),
        combine=False,
        derive=False,
        normalize=normalize,
        regions=regions,
    )


def test_a_normalised_box_plot_draws_the_runs_as_ratios(tmp_path: Any) -> None:
    """Normalised, the axis read ``metric / baseline`` but the boxes stood at the runs' raw values (ns)."""
    shape = _two_runs_shape([10.0, 20.0, 30.0], [40.0, 60.0, 80.0], normalize=None)
    shape.normalize = shape.annotations[0]
    result = build(shape)
    figures: list[Any] = []
    result.plot(str(tmp_path / "p.png"), plot_type="box", plot_callback=figures.append)
    boxes = [read_boxes(figures[0].axes[0])[k] for k in sorted(read_boxes(figures[0].axes[0]))]
    assert [(b["lo"], b["med"], b["hi"]) for b in boxes] == [(0.5, 1.0, 1.5), (2.0, 3.0, 4.0)]


def test_a_violin_on_a_log_axis_draws_the_median_of_an_even_number_of_runs(tmp_path: Any) -> None:
    """On a log axis the median line stood at the geometric mean of the middle two runs (100), not their median."""
    result = build(_two_runs_shape([10.0, 1000.0], [10.0, 1000.0], normalize=None))
    figures: list[Any] = []
    result.plot(str(tmp_path / "p.png"), plot_type="violin", y_log=True, plot_callback=figures.append)
    _, _, medians = read_violins(figures[0].axes[0])
    assert [y for _, y, _ in medians] == pytest.approx([505.0, 505.0])
