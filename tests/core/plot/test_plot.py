"""Plots: analyze.plot stacked on analyze.kernel, ProfileResults.plot, layout rules, option validation.

Set NSIGHTX_PLOT_OUT=<folder> to keep the PNGs the tests draw (they were looked at when these tests were written).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _paths import ROOT
from _synthetic import make_result, noisy

import nsightx
from nsightx import ConfigError, ConfigTypeError
from nsightx._plot.layout import build
from nsightx._plot.render import plot_options

matplotlib = pytest.importorskip("matplotlib")

SILENT = nsightx.VerbosityLevel.SILENT


@pytest.fixture
def out(tmp_path: Path) -> Path:
    keep = os.environ.get("NSIGHTX_PLOT_OUT")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep)
    return tmp_path


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _sweep_result():
    """Synthetic 2 dtypes x 2 k x 4 sizes x 3 annotations, time in ns with 1% noise."""
    sizes, ks, dtypes = [256, 512, 1024, 2048], [1, 2], ["f32", "f16"]
    configs = [(n, k, d) for d in dtypes for k in ks for n in sizes]
    values = {}
    for ci, (n, k, d) in enumerate(configs):
        for j, ann in enumerate(("copy", "scale", "fused")):
            mean = 1000.0 * n * k * (0.5 if d == "f16" else 1.0) * (1.0, 1.3, 0.8)[j]
            values[(ann, ci, "gpu__time_duration.sum")] = noisy(mean, 0.02, 8, seed=ci * 10 + j)
    return make_result(values, params=["n", "k", "dtype"], configs=configs)


def test_line_plot_with_row_and_col_panels(plugin_host, out):
    seen = {}

    def grab(fig):
        seen["axes"] = [ax for ax in fig.axes if ax.get_visible()]
        seen["legend"] = [t.get_text() for t in fig.legends[0].get_texts()]

    @nsightx.analyze.plot(
        str(out / "line_panels.png"),
        row_panels=["dtype"],
        col_panels=["k"],
        show_aggregate="geomean",
        annotate_points=True,
        plot_callback=grab,
    )
    @nsightx.analyze.kernel(
        configs=[(n, k, d) for d in ("f32", "f16") for k in (1, 2) for n in (64, 128, 256)],
        runs=4,
        backend="host",
        verbosity=SILENT,
    )
    def sweep(n, k, dtype):
        for name in ("copy", "scale", "fused"):
            with nsightx.annotate(name):
                time.sleep(2e-6 * n * k)

    res = sweep()
    assert isinstance(res, nsightx.ProfileResults)
    w, h = _png_size(out / "line_panels.png")
    assert w > 1000 and h > 700
    assert len(seen["axes"]) == 4
    assert seen["legend"] == ["copy", "scale", "fused"]
    titles = sorted(ax.get_title() for ax in seen["axes"])
    assert titles == ["dtype=f16 | k=1", "dtype=f16 | k=2", "dtype=f32 | k=1", "dtype=f32 | k=2"]
    for ax in seen["axes"]:
        assert ax.get_ylim()[0] == 0
        assert len(ax.collections) >= 3, "one CI band per series"
        assert "host__time_duration.sum" in ax.get_ylabel() or ax.get_ylabel() == ""


def test_bar_plot_with_panels_draws_ci_whiskers_from_the_frame(out):
    res = _sweep_result()
    frame = res.to_dataframe()
    seen = {}
    res.plot(
        str(out / "bar_panels.png"),
        plot_type="bar",
        row_panels=["dtype"],
        col_panels=["k"],
        show_aggregate="avg",
        plot_callback=lambda fig: seen.setdefault("fig", fig),
    )
    _png_size(out / "bar_panels.png")
    fig = seen["fig"]
    ax = next(a for a in fig.axes if a.get_title() == "dtype=f32 | k=1")
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    rows = frame[(frame["dtype"] == "f32") & (frame["k"] == 1)]
    scale = 1e6  # ns shown in ms (the largest mean is 5.3e6 ns)
    expected = sorted(round(v / scale, 6) for v in rows["AvgValue"])
    assert all(any(math.isclose(e, h, rel_tol=1e-9) for h in heights) for e in expected)
    assert len(ax.patches) == 3 * (4 + 1), "3 series x (4 sizes + the avg group)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512", "1024", "2048", "avg"]
    # whisker ends are the CI bounds of the aggregated frame
    layout = build(frame, plot_options(plot_type="bar", row_panels=["dtype"], col_panels=["k"]))
    pt = next(
        p
        for pa in layout.panels
        if pa.title == "dtype=f32 | k=1"
        for s in pa.series
        if s.label == "copy"
        for p in s.points
        if p.x == 512
    )
    row = rows[(rows["Annotation"] == "copy") & (rows["n"] == 512)].iloc[0]
    assert math.isclose(pt.lower * scale, row["CI95_Lower"]) and math.isclose(pt.upper * scale, row["CI95_Upper"])
    assert layout.unit == "ms"


def test_every_annotation_is_drawn_however_many(out):
    names = [f"kernel_{i:02d}" for i in range(25)]
    values = {
        (a, c, "gpu__time_duration.sum"): noisy(1000.0 * (i + 1) * (c + 1), 0.01, 3, seed=i * 7 + c)
        for i, a in enumerate(names)
        for c in range(3)
    }
    res = make_result(values, params=["n"], configs=[(1,), (2,), (3,)])
    seen = {}
    res.plot(str(out / "many_series.png"), plot_callback=lambda fig: seen.setdefault("fig", fig))
    fig = seen["fig"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == names
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_label() in names]
    assert len(lines) == 25
    looks = {(tuple(ln.get_color()), ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(looks) == 25, "no two series look the same"
    res.plot(str(out / "many_bars.png"), plot_type="bar")


def test_loaded_result_plots(tmp_path, out):
    res = _sweep_result()
    path = res.save(tmp_path / "result.json")
    loaded = nsightx.load(path)
    written = loaded.plot(str(out / "loaded.png"), col_panels=["dtype"], x_keys=["n"], variant_fields=["k"])
    assert written == out / "loaded.png"
    layout = build(loaded.to_dataframe(), plot_options(col_panels=["dtype"], x_keys=["n"], variant_fields=["k"]))
    assert layout.series_labels == [
        "copy (k=1)",
        "copy (k=2)",
        "scale (k=1)",
        "scale (k=2)",
        "fused (k=1)",
        "fused (k=2)",
    ]


def test_variant_annotations_pool_the_others():
    frame = _sweep_result().to_dataframe()
    frame = frame[frame["dtype"] == "f32"]
    layout = build(
        frame, plot_options(x_keys=["n"], variant_fields=["k"], variant_annotations=["fused"], col_panels=["dtype"])
    )
    assert layout.series_labels == ["copy (pooled over k)", "scale (pooled over k)", "fused (k=1)", "fused (k=2)"]
    copy = next(s for s in layout.panels[0].series if s.label.startswith("copy"))
    assert all(p.pooled == 2 for p in copy.points)


def test_rows_on_one_point_are_refused_not_dropped():
    frame = _sweep_result().to_dataframe()
    with pytest.raises(ConfigError, match=r"\['k', 'dtype'\]|\['k'\]|\['dtype'\]") as e:
        build(frame, plot_options(x_keys=["n"]))
    assert "x_keys, variant_fields, row_panels or col_panels" in str(e.value)


def test_several_metrics_need_metric(plugin_host, tmp_path):
    @nsightx.analyze.kernel(
        configs=[10, 20], runs=2, backend="host", verbosity=SILENT, derive_metric=lambda t, n: (n / t, "items/ns")
    )
    def f(n):
        with nsightx.annotate("a"):
            sum(range(n))

    res = f()
    with pytest.raises(ConfigError, match="pass metric=") as e:
        res.plot(str(tmp_path / "x.png"))
    assert "host__time_duration.sum" in str(e.value) and "<lambda>" in str(e.value)
    with pytest.raises(ConfigError, match="Metric 'nope' not found in the profile results"):
        res.plot(str(tmp_path / "x.png"), metric="nope")
    res.plot(str(tmp_path / "x.png"), metric="<lambda>")
    assert (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"plot_type": "pie"}, ConfigError, "invalid plot_type 'pie'; expected 'line' or 'bar'"),
        ({"row_panels": "k"}, ConfigTypeError, r"write row_panels=\['k'\]"),
        ({"show_aggregate": "median"}, ConfigError, "expected None, 'avg' or 'geomean'"),
        ({"plot_width": 0}, ConfigError, "plot_width must be between 0 and 100"),
        ({"plot_height": "4"}, ConfigTypeError, "plot_height must be a number"),
        ({"plot_callback": 3}, ConfigTypeError, "plot_callback must be callable"),
        ({"annotate_points": "yes"}, ConfigTypeError, "annotate_points must be True or False"),
        ({"colour": "red"}, ConfigError, r"unknown plot option\(s\) \['colour'\]"),
    ],
)
def test_option_values_are_checked_when_decorating(options, error, match, tmp_path):
    ran = []
    with pytest.raises(error, match=match):

        @nsightx.analyze.plot(str(tmp_path / "p.png"), **options)
        @nsightx.analyze.kernel(configs=[(1, 2)], backend="host")
        def f(n, k):
            ran.append(1)

    assert not ran


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"col_panels": ["nope"]}, r"names \['nope'\], which are not parameters of f"),
        ({"row_panels": ["k"], "col_panels": ["k"]}, "'k' is in both row_panels and col_panels"),
        ({"variant_annotations": ["a"]}, "only applies with variant_fields"),
        ({"x_keys": []}, "x_keys=\\[\\] leaves nothing"),
        ({"x_keys": ["q"]}, r"^Field 'q' is not present in the DataFrame. Available fields: \['n', 'k'\]"),
        ({"x_keys": ["n"], "row_panels": ["n"]}, r"^x_keys cannot contain fields used in row_panels, col_panels"),
    ],
)
def test_roles_of_parameters_are_raised_by_the_call_before_any_run(options, match, tmp_path):
    """What to draw is checked at decoration but raised by the call, where nsight-python raises it."""
    ran = []

    @nsightx.analyze.plot(str(tmp_path / "p.png"), **options)
    @nsightx.analyze.kernel(configs=[(1, 2)], backend="host")
    def f(n, k):
        ran.append(1)

    for _ in range(2):  # every call raises it, each time as a new exception
        with pytest.raises(ConfigError, match=match) as info:
            f()
        assert info.value.__traceback__ is not None and info.value.__context__ is None
    assert not ran and not (tmp_path / "p.png").exists()


def test_filename_extension_and_stacking_order(tmp_path):
    with pytest.raises(ConfigError, match="cannot tell the image format"):
        nsightx.analyze.plot(str(tmp_path / "plot.txt"))
    with pytest.raises(ConfigError, match=r"stacked above analyze\.kernel"):

        @nsightx.analyze.kernel(configs=[1], backend="host")
        @nsightx.analyze.plot(str(tmp_path / "p.png"))
        def f(n):
            pass


def test_normalized_result_ylabel_and_print_data(capsys, tmp_path):
    values = {}
    for c, n in enumerate([1, 2, 4]):
        values[("base", c, "gpu__time_duration.sum")] = noisy(100.0 * n, 0.01, 5, seed=c)
        values[("fast", c, "gpu__time_duration.sum")] = noisy(60.0 * n, 0.01, 5, seed=c + 50)
    res = make_result(values, params=["n"], configs=[(1,), (2,), (4,)])
    res.data.plan.__dict__["normalize_against"] = "base"  # what normalize_against="base" stores
    seen = {}
    res.plot(str(tmp_path / "norm.png"), print_data=True, plot_callback=lambda fig: seen.setdefault("f", fig))
    assert seen["f"].axes[0].get_ylabel() == "gpu__time_duration.sum / base"
    printed = capsys.readouterr().out
    assert "fast" in printed and "CI95_Lower" in printed


def test_plotting_never_imports_pyplot():
    code = (
        "import sys, nsightx; assert 'matplotlib' not in sys.modules;"
        "sys.path.insert(0, 'tests'); from _synthetic import make_result;"
        "r = make_result({('a', 0, 'm'): [1.0, 2.0]}, params=['n'], configs=[(1,)]);"
        "import tempfile, os; d = tempfile.mkdtemp(); r.plot(os.path.join(d, 'p.png'));"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_panel_keys_without_panels_are_one_empty_key_per_row():
    # pandas 3 yields no rows from itertuples() over zero columns; the layout must not depend on it
    from nsightx._plot.layout import _keys

    frame = _sweep_result().to_dataframe()
    assert _keys(frame, []) == [()] * len(frame)
    assert _keys(frame, ["k"])[:2] == [(1,), (1,)]


def test_stacked_plots_share_one_measurement(plugin_host, tmp_path):
    calls = []

    @nsightx.analyze.plot(str(tmp_path / "rate.png"), metric="<lambda>")
    @nsightx.analyze.plot(str(tmp_path / "time.png"), metric="host__time_duration.sum", plot_type="bar")
    @nsightx.analyze.kernel(
        configs=[100, 200], runs=2, backend="host", verbosity=SILENT, derive_metric=lambda t, n: (n / t, "items/ns")
    )
    def f(n):
        calls.append(n)
        with nsightx.annotate("a"):
            sum(range(n))

    res = f()
    assert isinstance(res, nsightx.ProfileResults)
    assert (tmp_path / "rate.png").exists() and (tmp_path / "time.png").exists()
    assert len(calls) == 2 * (2 + 1), "measured once (2 configs x (2 runs + 1 warm-up))"


def test_several_metrics_without_metric_fail_at_the_call_before_any_run():
    import nsightx as nx

    ran = []

    def body(n):
        ran.append(n)

    derived = nx.analyze.plot("x.png")(nx.analyze.kernel(configs=[1], derive_metric=lambda t, n: t)(body))
    with pytest.raises(nx.ConfigError, match=r"result will hold .*: pass metric=<name> to analyze\.plot"):
        derived()
    two = nx.analyze.plot("x.png")(nx.analyze.kernel(configs=[1], metrics=["a", "b"])(body))
    with pytest.raises(nx.ConfigError, match=r"result will hold .*: pass metric=<name> to analyze\.plot"):
        two()
    assert ran == []


def test_the_calls_own_errors_come_before_the_plots():
    """nsight-python profiles (and so checks the call and its configs) before it looks at what to plot."""
    import nsightx as nx

    bad_configs = nx.analyze.plot("x.png")(nx.analyze.kernel(configs=[(1,), (1, 2)], metrics=["a", "b"])(_two))
    with pytest.raises(nx.ConfigError, match=r"^All configs must have the same number of arguments"):
        bad_configs()
    plotted = nx.analyze.plot("x.png", x_keys=["q"])(nx.analyze.kernel(metrics=["a", "b"])(_two))
    with pytest.raises(nx.ConfigError, match=r"^You have provided no configs"):
        plotted()
    with pytest.raises(nx.ConfigError, match=r"^Keyword arguments are not supported yet"):
        plotted(1, k=2)
    with pytest.raises(nx.ConfigError, match=r"^Cannot visualize multiple metrics"):
        plotted(1)


def _two(n, k=0):
    raise AssertionError("never runs")


# --- issue 38: scales, labels that do not overlap, the default title, every run ----------------------------------


def _size_sweep(low: float = 1024, runs: int = 6):
    """Two annotations over 1 KiB .. 64 MiB: times from 3 us to 5 ms, so more than two decades."""
    sizes = [int(low) * 2**i for i in range(17)]
    values = {
        (ann, c, "gpu__time_duration.sum"): noisy(3000.0 + s / bw * 1e9, 0.02, runs, seed=c * 3 + j)
        for c, s in enumerate(sizes)
        for j, (ann, bw) in enumerate((("copy", 20e9), ("scale", 14e9)))
    }
    return make_result(values, params=["size"], configs=[(s,) for s in sizes], function="memcpy")


def _grab(res, path, **options):
    seen = {}
    res.plot(str(path), plot_callback=lambda fig: seen.setdefault("fig", fig), **options)
    return seen["fig"]


def test_a_sweep_over_more_than_two_decades_gets_log_axes(out):
    fig = _grab(_size_sweep(), out / "sweep_log.png")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2  # sizes: powers of two
    assert ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels[0] == "1Ki" and labels[-1] == "64Mi" and len(labels) <= 12
    narrow = _sweep_result()  # 0.1 ms .. 5.3 ms: under two decades
    ax = _grab(narrow, out / "narrow.png", row_panels=["dtype"], col_panels=["k"]).axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0


def test_x_log_and_y_log_force_either_way(out):
    ax = _grab(_size_sweep(), out / "forced_linear.png", x_log=False, y_log=False).axes[0]
    assert (ax.get_xscale(), ax.get_yscale(), ax.get_ylim()[0]) == ("linear", "linear", 0)
    ax = _grab(_sweep_result(), out / "forced_log.png", row_panels=["dtype"], col_panels=["k"], y_log=True).axes[0]
    assert ax.get_yscale() == "log"
    ax = _grab(_size_sweep(), out / "bars_log.png", plot_type="bar").axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "linear"  # bars stand on categories


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"x_log": True, "plot_type": "bar"}, ConfigError, r"x_log=True applies to line plots"),
        ({"y_log": "yes"}, ConfigTypeError, r"y_log must be True, False or None"),
    ],
)
def test_log_options_are_checked(options, error, match, tmp_path):
    with pytest.raises(error, match=match):
        nsightx.analyze.plot(str(tmp_path / "p.png"), **options)


def test_y_log_refuses_values_a_log_axis_cannot_show(tmp_path):
    res = make_result({("a", 0, "m"): [0.0, 0.0], ("a", 1, "m"): [5.0, 6.0]}, params=["n"], configs=[(1,), (2,)])
    with pytest.raises(ConfigError, match=r"y_log=True, but 1 plotted value\(s\) are <= 0"):
        res.plot(str(tmp_path / "p.png"), y_log=True)


def _boxes(fig):
    """Every value label's box on the saved figure's canvas, per axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    return [(ax, [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]) for ax in fig.axes]


@pytest.mark.parametrize("series", [3, 5])
def test_bar_labels_do_not_overlap_and_stay_inside_the_axes(out, series):
    """Issue 38: neighbouring bars of about one height put their labels on top of one another."""
    names = [f"kernel_{i}" for i in range(series)]
    sizes = [64 * (i + 1) for i in range(10)]
    values = {
        (a, c, "gpu__time_duration.sum"): noisy(1234.5 * (1 + 0.1 * c) * (1 + 0.004 * i), 0.001, 4, seed=c * 9 + i)
        for i, a in enumerate(names)
        for c in range(len(sizes))
    }
    res = make_result(values, params=["n"], configs=[(n,) for n in sizes])
    fig = _grab(res, out / f"bar_labels_{series}.png", plot_type="bar", annotate_points=True)
    [(ax, boxes)] = _boxes(fig)
    assert len(boxes) == len(sizes) * series
    apart = [box.padded(1.0) for box in boxes]  # 2 px between two labels at least: touching ones read as one
    overlapping = [(i, j) for i, a in enumerate(apart) for j, b in enumerate(apart[:i]) if a.overlaps(b)]
    assert not overlapping, f"{len(overlapping)} pairs of labels overlap or touch"
    top = ax.get_window_extent().y1
    assert all(b.y1 <= top + 0.5 for b in boxes), "every label inside the axes"


def test_default_title_names_the_function_the_metric_and_the_backend(plugin_host, out):
    fig = _grab(_size_sweep(), out / "title.png")
    assert fig.get_suptitle().splitlines()[0] == "memcpy: gpu__time_duration.sum (cupti backend)"
    seen = {}

    @nsightx.analyze.plot(str(out / "title_host.png"), plot_callback=lambda fig: seen.setdefault("fig", fig))
    @nsightx.analyze.kernel(configs=[1, 2], runs=2, backend="host", verbosity=SILENT)
    def build_list(n):
        with nsightx.annotate("a"):
            list(range(n))

    build_list()
    assert seen["fig"].get_suptitle().splitlines()[0] == "build_list: host__time_duration.sum (host backend)"
    assert _grab(_size_sweep(), out / "own_title.png", title="mine").get_suptitle().splitlines()[0] == "mine"


def _runs_sweep():
    """A steady annotation with one slow first run, and one whose runs fall into two groups (ns)."""
    values = {}
    for c, n in enumerate([256, 512]):
        steady = [1000.0 * n * (1.0 + 0.001 * (i % 7)) for i in range(20)]
        steady[0] *= 1.6
        values[("steady", c, "gpu__time_duration.sum")] = steady
        values[("bimodal", c, "gpu__time_duration.sum")] = [1000.0 * n * (1.0, 1.4)[i % 2] for i in range(20)]
    return make_result(values, params=["n"], configs=[(256,), (512,)], function="matmul")


def test_violin_draws_every_run_of_each_config(out):
    res = _runs_sweep()
    ax = _grab(res, out / "violin.png", plot_type="violin").axes[0]
    runs = res.runs_dataframe()
    from matplotlib.collections import PathCollection

    scattered = [c for c in ax.collections if isinstance(c, PathCollection)]
    dots = sorted(round(float(y), 6) for coll in scattered for _, y in coll.get_offsets())
    expected = sorted(round(v / 1e3, 6) for v in runs["Value"])  # ns shown in us
    assert dots == expected, "one dot per run, at its value"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512"]
    assert ax.figure.get_suptitle().startswith("matmul: gpu__time_duration.sum, every run (cupti backend)")


def test_box_plot_marks_the_slow_first_run_beyond_the_whiskers(out):
    res = _runs_sweep()
    ax = _grab(res, out / "box.png", plot_type="box").axes[0]
    fliers = [y for line in ax.get_lines() if line.get_marker() == "o" for y in line.get_ydata()]
    firsts = res.runs_dataframe().query("Annotation == 'steady' and Run == 0")["Value"] / 1e3
    assert sorted(round(y, 6) for y in fliers) == sorted(round(v, 6) for v in firsts)


def test_distribution_of_an_aggregated_frame_is_refused_with_what_to_do(tmp_path):
    from nsightx._plot.render import plot_frame

    with pytest.raises(ConfigError, match=r"plot_type='box' draws every run .* plot the result itself"):
        plot_frame(_runs_sweep().to_dataframe(), tmp_path / "p.png", plot_type="box")


def test_violins_on_a_log_axis_are_drawn_from_the_logarithms_and_keep_their_medians(out):
    values = {("a", c, "m"): [10.0**c * (1.0 + 0.01 * (i % 5)) for i in range(11)] for c in range(4)}
    res = make_result(values, params=["n"], configs=[(1,), (2,), (3,), (4,)], units={"m": "us"})
    ax = _grab(res, out / "violin_log.png", plot_type="violin").axes[0]
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "m (ms)"  # 1 us .. 1.04 ms: shown in ms
    from matplotlib.collections import LineCollection, PolyCollection

    [medians] = [c for c in ax.collections if isinstance(c, LineCollection)]
    shown = sorted(segment[0][1] for segment in medians.get_segments())
    assert shown == pytest.approx([sorted(v)[5] / 1e3 for v in values.values()], rel=1e-9)  # 11 runs: the 6th
    bodies = [c for c in ax.collections if isinstance(c, PolyCollection)]
    for body, runs in zip(bodies, values.values(), strict=True):
        ys = body.get_paths()[0].vertices[:, 1]
        assert min(ys) == pytest.approx(min(runs) / 1e3) and max(ys) == pytest.approx(max(runs) / 1e3)


def test_a_derived_rate_is_drawn_in_its_readable_prefix(out):
    """Issue 38: a rate derived in TFLOP/s on a CPU was 0.0001406 TFLOP/s; it is drawn as 140.6 MFLOP/s."""
    values = {("mm", c, "tflops"): [v] * 3 for c, v in enumerate([0.0001406, 0.0003, 0.0005])}
    res = make_result(values, params=["n"], configs=[(64,), (128,), (256,)], units={"tflops": "TFLOP/s"})
    ax = _grab(res, out / "rate.png").axes[0]
    assert ax.get_ylabel() == "tflops (MFLOP/s)"
    assert sorted(round(y, 6) for y in ax.get_lines()[0].get_ydata()) == [140.6, 300.0, 500.0]


def test_a_label_taller_than_its_squeezed_axes_leaves_the_axis_alone():
    """Each round of label placement raised a log axis's top by (hi/lo)**need; on axes squeezed to a sliver (many
    panels, long names) that compounded to inf and matplotlib raised "Axis limits cannot be NaN or Inf"."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nsightx._plot import labels

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.set_yscale("log")
    ax.set_ylim(2.3e-7, 175.0)
    box = ax.get_window_extent()
    try:
        assert labels._grow(ax, box.y1 + 10 * box.height) is False
        assert ax.get_ylim() == (2.3e-7, 175.0)
        assert labels._grow(ax, box.y1 + 0.1 * box.height) is True  # a label just above still makes room
        assert math.isfinite(ax.get_ylim()[1]) and ax.get_ylim()[1] > 175.0
    finally:
        plt.close(fig)
