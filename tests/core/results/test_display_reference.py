"""What a person reads against the frame: the printed table, ``nsightx show``'s fitted table and the notebook view.

Random results are built through the real code (the shapes of ``test_frame_reference``, with annotation names and
config values of several kinds: unicode, long names, floats, text), rendered, and the rendered text or HTML is
parsed back by a small parser written here. Every row is matched to the frame's row of the same position and
checked against it keyed on (Annotation, params, Metric): the mean and both ends of the 95 % interval, after the
unit scaling ``nsightx._units`` documents (the largest unit of the family under which the mean's size is at least
1; the interval in the mean's unit) and the rounding it documents (four significant digits, never an exponent,
whole numbers from 10^4 on), the RSD to one decimal, ``NumRuns``, ``StableMeasurement``, ``Device`` and ``Tool``.
A value that is not a finite number shows no number.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
from html.parser import HTMLParser
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_frame_reference import TIME, Shape, build, shapes

import nsightx
from nsightx._commands.show import show
from nsightx._results.html import results_html
from nsightx._results.summary import render_text, summarize

EXAMPLES = int(os.environ.get("NSIGHTX_DISPLAY_EXAMPLES", "80"))
"""Examples per run (more while hunting: ``NSIGHTX_DISPLAY_EXAMPLES=400``)."""

NAMES = st.sampled_from(
    [
        *("gemm", "ü-naïve", "矩阵乘法", "a<b>&c", "x" * 70, "copy.fp32 [tile]", "Ωmega_∑", "n=3", "-", "1.5"),
        *("copy  fp32", " lead", "trail  "),
    ]
)
"""Annotation names a person might give: unicode, markup characters, long, or looking like a number or a dash, with
two spaces in a row or an outer space (a text table writes such a space as ``\\x20``: :func:`written`)."""

TIME_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BYTE_BASES = {"byte": "B", "bytes": "B", "B": "B"}


def _config_value(draw: Any, kind: str, c: int) -> Any:
    return {
        "int": c * 4096 + 1,
        "float": 0.5 + c,
        "text": f"t{c}-ü",
        "long": "L" * 40 + str(c),
        "spaced": f"t  {c} ",
        "negative": -c - 1,
    }[kind]


@st.composite
def displayed_shapes(draw: Any) -> Shape:
    """A shape of ``test_frame_reference`` with its annotations renamed and its config values of several kinds."""
    shape: Shape = draw(shapes())
    names = draw(st.lists(NAMES, min_size=len(shape.annotations), max_size=len(shape.annotations), unique=True))
    rename = dict(zip(shape.annotations, names, strict=True))
    kinds = [draw(st.sampled_from(["int", "float", "text", "long", "negative", "spaced"])) for _ in shape.params]
    shape.configs = [tuple(_config_value(draw, kind, c) for kind in kinds) for c in range(len(shape.configs))]
    shape.annotations = tuple(rename[a] for a in shape.annotations)
    shape.normalize = None if shape.normalize is None else rename[shape.normalize]
    shape.regions = {(rename[a], c, r): v for (a, c, r), v in shape.regions.items()}
    shape.host_ns = {(rename[a], c, r): v for (a, c, r), v in shape.host_ns.items()}
    shape.attributes = {(rename[a], c, r): v for (a, c, r), v in shape.attributes.items()}
    for name, (scope, values) in list(shape.collectors.items()):
        if scope == "annotation":
            shape.collectors[name] = (scope, {(c, r, rename[a]): v for (c, r, a), v in values.items()})
    return shape


# --- parsers -------------------------------------------------------------------------------------------------


def written(name: str) -> str:
    r"""``name`` as a text table's cell writes it: a space after a space, or at either end, as ``\x20``.

    The names drawn here hold no backslash and only printable characters, so that is the only escape they need.
    """
    out = ""
    for i, c in enumerate(name):
        loose = c == " " and (i == 0 or i == len(name) - 1 or name[i - 1] == " ")
        out += "\\x20" if loose else c
    return out


def parse_text(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and cells of :func:`render_text`'s table: columns are separated by two spaces or more.

    A cell holds no two spaces in a row and no outer space (:func:`written`), and no cell drawn here is empty, so
    splitting on runs of spaces is exact.
    """
    lines = text.split("\n")
    header = re.split(r" {2,}", lines[0].strip())
    rows = [re.split(r" {2,}", line.strip()) for line in lines[1:]]
    return header, rows


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "tr":
            self.rows.append([])
        if tag in ("th", "td"):
            self._cell = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self.header.append(self._cell or "")
        elif tag == "td":
            self.rows[-1].append(self._cell or "")
        self._cell = None if tag in ("th", "td") else self._cell

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data


def parse_html(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and data cells of :func:`results_html`'s table (HTML entities decoded by the parser)."""
    parser = _Html()
    parser.feed(text)
    return parser.header, [r for r in parser.rows if r]


# --- the reference -------------------------------------------------------------------------------------------


def shown_factor(unit: str | None, shown: str | None) -> float:
    """How many of ``unit`` one ``shown`` is, by the families of ``nsightx._units`` (1 outside them)."""
    if unit is None or unit == shown:
        return 1.0
    if unit in TIME_NS:
        assert shown in TIME_NS, (unit, shown)
        return TIME_NS[shown] / TIME_NS[unit]
    assert unit in BYTE_BASES, unit  # the only prefixed family the shapes hold
    assert shown is not None and shown.endswith("B") and shown[:-1] in PREFIX, (unit, shown)
    return PREFIX[shown[:-1]]


def expected_unit(value: float, unit: str | None) -> str | None:
    """The documented display unit: the largest of the family under which ``|value|`` is at least 1."""
    if unit is None or not math.isfinite(value):
        return unit
    if unit in TIME_NS:
        ns = abs(value) * TIME_NS[unit]
        return next((u for u, f in sorted(TIME_NS.items(), key=lambda i: -i[1]) if ns >= f), "ns")
    if unit in BYTE_BASES:
        return next((p + "B" for p, f in sorted(PREFIX.items(), key=lambda i: -i[1]) if abs(value) >= f), "B")
    return unit


def close(text: str, value: float, factor: float) -> bool:
    """``text`` (a number as shown) is ``value / factor`` rounded to the digits it shows."""
    assert "e" not in text.lower(), text  # never an exponent
    places = len(text.split(".")[1]) if "." in text else 0
    shown = float(text)
    exact = value / factor
    digits = len(text.lstrip("-").replace(".", "").lstrip("0"))
    if abs(exact) >= 1e4:
        assert places == 0, text
    elif exact != 0:
        assert digits <= 4 and (digits == 4 or len(f"{exact:.4g}".lstrip("-").replace(".", "").lstrip("0")) == digits)
    return abs(shown - exact) <= 0.5 * 10.0**-places * (1 + 1e-9) + 1e-12 * abs(exact)


def check_number_cell(cell: str, value: float, unit: str | None, where: Any) -> str | None:
    """The mean's cell against the frame's value; the unit it is shown in (for the interval)."""
    if not math.isfinite(value):
        assert not re.search(r"\d", cell.split(" ")[0]), (where, cell, value)  # no number for NaN/inf
        return None
    text, _, shown = cell.partition(" ")
    shown_unit = shown or None
    assert shown_unit == expected_unit(value, unit), (where, cell, value, unit)
    assert close(text, value, shown_factor(unit, shown_unit)), (where, cell, value, unit)
    return shown_unit


def same_name(cell: str, full: str) -> bool:
    """``cell`` is ``full`` as written (:func:`written`), or that cut as :func:`nsightx._results.summary.fit`
    documents (``..`` at the end)."""
    full = written(full)
    return cell == full or (cell.endswith("..") and len(cell) < len(full) + 2 and full.startswith(cell[:-2]))


def check_row(header: list[str], cells: list[str], record: dict[str, Any], params: tuple[str, ...]) -> None:
    """One displayed row against the frame's row at the same position."""
    got = dict(zip(header, cells, strict=True))
    key = (record["Annotation"], *(record[p] for p in params), record["Metric"])
    assert same_name(got["Annotation"], str(record["Annotation"])), (key, got["Annotation"])
    assert [got[p] for p in params] == [written(str(record[p])) for p in params], key
    if "Metric" in got:
        assert same_name(got["Metric"], record["Metric"]), (key, got["Metric"])
    unit = record["Unit"] or None
    avg = float(record["AvgValue"])
    shown = check_number_cell(got["Mean"], avg, unit, key)
    low, high = float(record["CI95_Lower"]), float(record["CI95_Upper"])
    if "95% CI" in got:
        ci = got["95% CI"]
        if not (math.isfinite(low) and math.isfinite(high)):
            assert ci == "-", (key, ci, low, high)
        else:
            match = re.fullmatch(r"\[(\S+), (\S+)\](?: (\S+))?", ci)
            assert match is not None, (key, ci)
            assert match[3] == shown, (key, ci, got["Mean"])  # in the mean's unit
            factor = shown_factor(unit, shown)
            assert close(match[1], low, factor) and close(match[2], high, factor), (key, ci, low, high)
    rsd = float(record["RelativeStdDevPct"])
    assert got["RSD"] == ("-" if not math.isfinite(rsd) else f"{rsd:.1f}%"), (key, got["RSD"], rsd)
    if math.isfinite(rsd):
        assert abs(float(got["RSD"][:-1]) - rsd) <= 0.05 + 1e-9, key
    assert got["Runs"] == str(record["NumRuns"]), key
    stable = record["StableMeasurement"]
    if "Stable" in got:
        want = "-" if stable is None or pd.isna(stable) else ("yes" if stable else "no")
        assert got["Stable"] == want, (key, got["Stable"], stable)
    if "Tool" in got:
        assert got["Tool"] == str(record["Tool"]), key


def check_table(header: list[str], rows: list[list[str]], frame: pd.DataFrame, params: tuple[str, ...]) -> None:
    """Every displayed row is the frame's row of the same position (order, keys and values)."""
    records = frame.to_dict("records")
    assert len(rows) == len(records), (len(rows), len(records))
    for cells, record in zip(rows, records, strict=True):
        check_row(header, cells, record, params)


SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _frame(shape: Shape) -> pd.DataFrame | None:
    try:
        frame = build(shape).to_dataframe()
    except nsightx.ConfigError as error:  # nothing to normalise against: test_frame_reference's property
        assert re.search(r"no baseline value|names no annotation", str(error)), error
        return None
    return frame


@SETTINGS
@given(shape=displayed_shapes())
def test_the_printed_table_says_what_the_frame_says(shape: Shape) -> None:
    frame = _frame(shape)
    if frame is None or frame.empty:
        return
    header, rows = parse_text(render_text(summarize(frame, shape.params, text=True)))  # as show and demo print it
    check_table(header, rows, frame, shape.params)


@SETTINGS
@given(shape=displayed_shapes())
def test_the_notebook_view_says_what_the_frame_says(shape: Shape) -> None:
    result = build(shape)
    frame = _frame(shape)
    if frame is None or frame.empty:
        return
    header, rows = parse_html(results_html(frame, result.data))
    check_table(header, rows, frame, shape.params)


FULL_HEADER = ("Annotation", "Metric", "Mean", "95% CI", "RSD", "Runs", "Stable", "Device", "Tool")


def _full_names(header: list[str], params: tuple[str, ...]) -> list[str]:
    """The headings of a fitted table, named in full again (``fit`` cuts a heading as it cuts its cells)."""
    names = [*params, *FULL_HEADER]
    out = []
    for h in header:
        [full] = [n for n in names if same_name(h, n) and n not in out][:1]
        out.append(full)
    return out


@settings(
    max_examples=max(EXAMPLES // 2, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(shape=displayed_shapes(), width=st.one_of(st.none(), st.integers(30, 220)))
def test_nsightx_show_says_what_the_frame_says(shape: Shape, width: int | None, tmp_path: Any) -> None:
    """``nsightx show FILE`` on a saved result, fitted to a terminal of ``width`` columns (``None``: not one)."""
    if _frame(shape) is None:
        return
    path = build(shape).save(tmp_path / f"result-{abs(hash((repr(shape), width)))}.parquet")
    frame = nsightx.load(path).to_dataframe()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert show(str(path), width) == 0
    lines = out.getvalue().rstrip("\n").split("\n")
    assert lines[0].startswith(f"bench: {len(shape.configs)} config(s) x {shape.runs} run(s) on x (cupti backend)")
    if frame.empty:
        assert lines[1:] == ["(no completed run)"]
        return
    above = {}
    while ": " in lines[1] and lines[1].split(": ")[0] in ("tool", "device", "metric"):
        name, _, value = lines.pop(1).partition(": ")
        above[name.capitalize()] = value
    for column, value in above.items():  # a column moved above the table holds that one value in every row
        assert frame[column].astype(str).eq(value).all(), (column, value)
    header, rows = parse_text("\n".join(lines[1:]))
    check_table(_full_names(header, shape.params), rows, frame, shape.params)


# --- nsightx compare's printed table -------------------------------------------------------------------------


def _scaled(shape: Shape, factor: float, drop: str | None) -> Shape:
    """``shape`` with every measured value times ``factor`` and, when ``drop`` names one, that annotation gone."""
    new = Shape(**{**shape.__dict__, "regions": {}})
    for (ann, c, r), value in shape.regions.items():
        if ann == drop:
            continue
        new.regions[(ann, c, r)] = (
            value if isinstance(value, str) else [{m: v * factor for m, v in kernel.items()} for kernel in value]
        )
    if drop is not None and drop == new.normalize:
        new.normalize = None
    return new


def _compare_config(record: dict[str, Any], params: list[str]) -> str:
    parts = [f"{p}={record[p]}" for p in params if not (record[p] is None or pd.isna(record[p]))]
    return ", ".join(parts) or "-"


def check_compare_row(header: list[str], cells: list[str], record: dict[str, Any], params: list[str]) -> None:
    """One row of ``nsightx compare``'s text table against the comparison frame's row at the same position."""
    got = dict(zip(header, cells, strict=True))
    key = (record["Annotation"], _compare_config(record, params), record["Metric"])
    assert same_name(got["Function"], str(record["Function"])), key
    if "Annotation" in got:
        assert same_name(got["Annotation"], str(record["Annotation"])), key
    assert same_name(got["Config"], _compare_config(record, params)), (key, got["Config"])
    if "Metric" in got:
        assert same_name(got["Metric"], str(record["Metric"])), key
    unit = record["Unit"] if isinstance(record["Unit"], str) else None
    for column, value in (("Baseline", record["BaselineMean"]), ("New", record["NewMean"])):
        check_number_cell(got[column], float(value), unit, (key, column))
        if not math.isfinite(value):
            assert got[column] == "-", (key, column, got[column])
    ratio = float(record["Ratio"])
    assert got["Ratio"] == (f"{ratio:.3f}" if math.isfinite(ratio) else "-"), (key, got["Ratio"], ratio)
    if "95% CI" in got:
        low, high = float(record["Ratio_CI_Lower"]), float(record["Ratio_CI_Upper"])
        assert got["95% CI"] == (f"[{low:.3f}, {high:.3f}]" if math.isfinite(low) else "-"), key
    p = float(record["PValueAdj"])
    assert got["p (Holm)"] == (f"{p:.2g}" if math.isfinite(p) else "-"), key
    runs = [record["BaselineRuns"], record["NewRuns"]]
    assert got["Runs"] == "/".join(str(int(n)) if not pd.isna(n) else "-" for n in runs), (key, got["Runs"], runs)
    status = str(record["Status"])
    change = float(record["ChangePct"])
    if status in ("slower", "faster"):
        assert got["Status"].startswith((status, "REGRESSION")) and f"{change:+.1f}%" in got["Status"], key
    elif status == "within noise" and math.isfinite(change):
        assert got["Status"].startswith(("within noise", "noise")) and f"{change:+.1f}%" in got["Status"], key
    else:
        assert got["Status"] == status, (key, got["Status"], status)


COMPARE_HEADER = ("Function", "Annotation", "Config", "Metric", "Baseline", "New", "Ratio", "95% CI", "p (Holm)")


def parse_compare(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ``nsightx compare``'s text table: the lines between the rule and the verdict."""
    lines = text.split("\n")
    rule = next(i for i, line in enumerate(lines) if line and set(line) <= {"-", " "} and "--" in line)
    end = lines.index("", rule)
    header = re.split(r" {2,}", lines[rule - 1].strip())
    return header, [re.split(r" {2,}", line.strip()) for line in lines[rule + 1 : end]]


@settings(
    max_examples=max(EXAMPLES // 2, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    shape=displayed_shapes(),
    factor=st.sampled_from([1.0, 1.3, 0.5, 1.01, 1e3]),
    drop=st.booleans(),
    width=st.one_of(st.none(), st.integers(40, 240)),
)
@example(  # a random draw: the status "slower +30.0%  REGRESSION (> 5%)" held the columns' separator
    shape=Shape(
        configs=[(1,), (65,)],
        params=("n",),
        runs=6,
        annotations=("gemm",),
        metrics=(TIME, "bytes"),
        combine=False,
        derive=False,
        regions={("gemm", c, r): [{TIME: 1000.0 + r, "bytes": math.nan}] for c in range(2) for r in range(6)},
    ),
    factor=1.3,
    drop=False,
    width=None,
)
@example(  # names and a config value with two spaces in a row or an outer space read as more cells than the header
    shape=Shape(
        configs=[("t  0 ",), ("t  1 ",)],
        params=("n",),
        runs=3,
        annotations=("copy  fp32", " lead"),
        metrics=(TIME,),
        combine=False,
        derive=False,
        regions={(a, c, r): [{TIME: 1000.0 + r}] for a in ("copy  fp32", " lead") for c in range(2) for r in range(3)},
    ),
    factor=1.3,
    drop=False,
    width=None,
)
def test_the_compare_table_says_what_the_comparison_says(
    shape: Shape, factor: float, drop: bool, width: int | None
) -> None:
    from nsightx._report.views import render_text as render_compare

    baseline = build(shape)
    new = build(_scaled(shape, factor, shape.annotations[-1] if drop and len(shape.annotations) > 1 else None))
    try:
        frame = nsightx.compare(baseline, new, resamples=200)
    except nsightx.CompareError:
        return  # nothing comparable (fewer than 2 runs a side everywhere): the compare tests' business
    except nsightx.ConfigError as error:  # nothing to normalise against: test_frame_reference's property
        assert re.search(r"no baseline value|names no annotation", str(error)), error
        return
    params = [c for c in frame.columns if c in shape.params]
    header, rows = parse_compare(render_compare(frame, width))
    records = frame.to_dict("records")
    assert len(rows) == len(records)
    for cells, record in zip(rows, records, strict=True):
        check_compare_row(header, cells, record, params)


# --- the plots' data ------------------------------------------------------------------------------------------


@SETTINGS
@given(shape=displayed_shapes(), pick=st.integers(0, 3), box=st.booleans())
def test_the_plotted_points_are_the_frame_s_rows(shape: Shape, pick: int, box: bool) -> None:
    """Default options: one series per annotation, one point per config, at the frame's mean and interval."""
    from nsightx._plot.layout import build as layout
    from nsightx._plot.plotoptions import plot_options

    result = build(shape)
    frame = _frame(shape)
    if frame is None or frame.empty:
        return
    metrics = list(dict.fromkeys(frame["Metric"]))
    metric = metrics[pick % len(metrics)]
    runs = result.runs_dataframe() if box else None
    plotted = layout(frame, plot_options(metric=metric, plot_type="box" if box else "line"), runs)
    rows = frame[frame["Metric"] == metric].to_dict("records")
    [panel] = plotted.panels
    assert [s.label for s in panel.series] == list(dict.fromkeys(str(r["Annotation"]) for r in rows))
    units = list(dict.fromkeys(r["Unit"] for r in rows if isinstance(r["Unit"], str) and r["Unit"]))
    finite = [abs(float(r["AvgValue"])) for r in rows if math.isfinite(float(r["AvgValue"]))]
    normalized = isinstance(rows[0]["Normalized"], str)
    shown = units[0] if len(units) == 1 and not normalized and finite else None
    want_unit = expected_unit(max(finite), shown) if shown else "/".join(units)
    assert plotted.unit == want_unit, (plotted.unit, units)
    factor = shown_factor(shown, want_unit) if shown else 1.0
    numeric = len(shape.params) == 1 and isinstance(shape.configs[0][0], int | float)
    points = {(s.label, p.x): p for s in panel.series for p in s.points}
    assert len(points) == len(rows)
    for r in rows:
        values = tuple(r[p] for p in shape.params)
        x = (
            values[0]
            if numeric
            else (
                ", ".join(f"{n}={v}" for n, v in zip(shape.params, values, strict=True))
                if len(values) > 1
                else str(values[0])
            )
        )
        point = points[(str(r["Annotation"]), x)]
        key = (r["Annotation"], values)
        ends = [float(r["CI95_Lower"]), float(r["CI95_Upper"])]
        if all(math.isfinite(v) for v in ends):
            ends.sort()  # normalised by a negative mean, the frame's ends are swapped: the plot draws them in order
        for got, want in ((point.y, r["AvgValue"]), (point.lower, ends[0]), (point.upper, ends[1])):
            want = float(want)
            if math.isfinite(want):
                assert got * factor == pytest.approx(want, rel=1e-12), (key, got, want)
            else:
                assert math.isnan(got) or got == want, (key, got, want)
        assert point.runs == r["NumRuns"], key
        if box:
            per_run = runs[(runs["Metric"] == metric) & (runs["Annotation"] == r["Annotation"])]
            for p, v in zip(shape.params, values, strict=True):
                per_run = per_run[per_run[p].astype(str) == str(v)]
            base = float(r["NormalizationValue"]) if normalized else 1.0  # a ratio's runs are ratios too
            base = base if base != 0 else math.nan  # (a zero baseline: left out, as the frame's infinite ratios)
            want_runs = [float(v) / base / factor for v in per_run["Value"]]
            assert len(point.values) == len(want_runs), key
            assert all(
                a == pytest.approx(b, rel=1e-12, nan_ok=True) for a, b in zip(point.values, want_runs, strict=True)
            ), key
