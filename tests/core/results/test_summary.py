"""The displayed table: readable units, the CI in the mean's unit, stability, the device, the unstable warning."""

from __future__ import annotations

import itertools
import time

import pandas as pd
import pytest

import nsightx
from nsightx._commands import demo as _demo
from nsightx._results.summary import device_label, mean_and_ci, render_text, scale, summarize, unstable_warning


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (20680.0, "ns", (1e3, "us")),
        (999.0, "ns", (1.0, "ns")),
        (3.2e6, "ns", (1e6, "ms")),
        (4.5e9, "ns", (1e9, "s")),
        (-2.5e4, "ns", (1e3, "us")),
        (0.0, "ns", (1.0, "ns")),
        (2.5, "TFLOP/s", (1.0, "TFLOP/s")),
        (float("nan"), "ns", (1.0, "ns")),
        (7.0, "items/ns", (1.0, "items/ns")),
    ],
)
def test_scale_picks_the_largest_readable_time_unit(value, unit, expected):
    assert scale(value, unit) == expected


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (0.0001406, "TFLOP/s", "140.6 MFLOP/s"),  # the demo's n=128 row on a CPU, issue 38
        (0.03464, "TFLOP/s", "34.64 GFLOP/s"),
        (2.5e4, "TFLOP/s", "25 PFLOP/s"),
        (3.2e9, "FLOP/s", "3.2 GFLOP/s"),
        (0.0, "TFLOP/s", "0 FLOP/s"),
        (3e6, "byte", "3 MB"),
        (512.0, "byte", "512 B"),
        (1500.0, "Kbyte", "1.5 MB"),  # ncu's upper-case K
        (2.0e9, "byte/second", "2 GB/s"),
        (1.98e9, "Hz", "1.98 GHz"),
        (0.002, "s", "2 ms"),
        (3.5e4, "us", "35 ms"),
        (42.0, "%", "42 %"),
    ],
)
def test_derived_rates_and_counts_are_scaled_like_times(value, unit, shown):
    factor, unit_shown = scale(value, unit)
    assert f"{value / factor:.4g} {unit_shown}" == shown


def test_mean_and_ci_share_the_mean_unit():
    assert mean_and_ci(20680.0, 900.0, 40460.0, "ns") == ("20.68 us", "[0.9, 40.46] us")
    assert mean_and_ci(0.05, 0.04, 0.06, "TFLOP/s") == ("50 GFLOP/s", "[40, 60] GFLOP/s")
    assert mean_and_ci(5.0, float("nan"), float("nan"), "ns") == ("5 ns", "-")
    assert mean_and_ci(1.5, 1.0, 2.0, None) == ("1.5", "[1, 2]")


def test_device_label_names_the_cpu_or_the_gpu():
    assert device_label("host", {"GPU": None}) == "CPU (host backend)"
    assert device_label("host", {"GPU": "NVIDIA H200"}) == "CPU (host backend)"
    assert device_label("cupti", {"GPU": "NVIDIA H200"}) == "NVIDIA H200 (cupti backend)"
    assert device_label("events", {}) == "GPU, name not recorded (events backend)"


def _frame(rows):
    base = {"Annotation": "a", "Metric": "host__time_duration.sum", "Unit": "ns", "NumRuns": 5, "Tool": "host"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_summarize_formats_each_row_and_marks_stability():
    frame = _frame(
        [
            {
                "n": 64,
                "AvgValue": 2.068e4,
                "CI95_Lower": 2.0e4,
                "CI95_Upper": 2.1e4,
                "RelativeStdDevPct": 1.2,
                "StableMeasurement": True,
            },
            {
                "n": 128,
                "AvgValue": 3.5e6,
                "CI95_Lower": 2.0e6,
                "CI95_Upper": 5.0e6,
                "RelativeStdDevPct": 40.0,
                "StableMeasurement": False,
            },
        ]
    )
    summary = summarize(frame, ["n"])
    assert summary.header == ("Annotation", "n", "Metric", "Mean", "95% CI", "RSD", "Runs", "Stable", "Tool")
    assert summary.rows[0].cells == (
        "a",
        "64",
        "host__time_duration.sum",
        "20.68 us",
        "[20, 21] us",
        "1.2%",
        "5",
        "yes",
        "host",
    )
    assert summary.rows[1].cells[3:8] == ("3.5 ms", "[2, 5] ms", "40.0%", "5", "no")
    assert [r.label for r in summary.unstable] == ["a n=128 host__time_duration.sum"]
    assert summary.right == {"n", "Mean", "95% CI", "RSD", "Runs"}
    assert "tag" not in summarize(frame.assign(tag=["x", "y"]), ["n", "tag"]).right  # text stays left-aligned
    text = render_text(summary)
    assert "e+0" not in text and text.splitlines()[0].split() == [
        "Annotation",
        "n",
        "Metric",
        "Mean",
        "95%",
        "CI",
        "RSD",
        "Runs",
        "Stable",
        "Tool",
    ]
    warning = unstable_warning(summary)
    assert warning is not None and warning.startswith("1 of 2 row(s) unstable (relative std dev >= 2%")
    assert "a n=128 host__time_duration.sum (40.0%)" in warning


def test_warning_names_three_rows_then_counts_the_rest():
    rows = [
        {
            "n": n,
            "AvgValue": 1e3,
            "CI95_Lower": 0.0,
            "CI95_Upper": 2e3,
            "RelativeStdDevPct": 50.0,
            "StableMeasurement": False,
        }
        for n in range(5)
    ]
    warning = unstable_warning(summarize(_frame(rows), ["n"]))
    assert warning is not None and "a n=2 host__time_duration.sum (50.0%) and 2 more" in warning
    assert "n=3" not in warning
    stable = [{**r, "StableMeasurement": True} for r in rows]
    assert unstable_warning(summarize(_frame(stable), ["n"])) is None


def _unstable_sweep(tmp_path):
    """A real host sweep whose runs alternate 1 ms and 6 ms: its row is unstable by construction."""
    delays = itertools.cycle([0.001, 0.006])

    @nsightx.analyze.kernel(
        configs=[64], runs=4, warmup=0, backend="host", verbosity=0, output_prefix=str(tmp_path) + "/"
    )
    def matmul(n):
        with nsightx.annotate("matmul"):
            time.sleep(next(delays))

    return matmul()


def test_demo_report_warns_about_unstable_rows(plugin_host, tmp_path, capsys):
    _demo._report(_unstable_sweep(tmp_path), tmp_path)
    out, err = capsys.readouterr()
    assert "device: CPU (host backend)" in out and " ms " in out and "e+0" not in out
    [line] = err.strip().splitlines()
    assert line.startswith("nsightx demo: warning: 1 of 1 row(s) unstable") and "matmul n=64" in line


def test_fit_cuts_a_heading_when_long_values_leave_no_other_way():
    """A wide rate and spread once left `nsightx show` a column over a 60-column terminal: the heading is cut too."""
    from nsightx._results.summary import Row, Summary, fit

    header = ("Annotation", "n", "Metric", "Mean", "RSD", "Runs")
    rows = tuple(
        Row(("build", str(n), "<lambda>", "0.006925 items/ns", "188.4%", "4"), False, f"build n={n}", 188.4)
        for n in (1000, 20000, 400000)
    )
    summary, above = fit(Summary(header, rows, frozenset({"n", "Mean", "RSD", "Runs"})), 50)
    lines = render_text(summary).splitlines()
    assert above == ["metric: <lambda>"] and all(len(line) <= 50 for line in lines), lines
    assert lines[0].split()[0].endswith("..") and lines[1].startswith("build")  # the heading, cut as far as needed


def test_a_single_run_row_is_not_called_unstable(plugin_host, tmp_path):
    """A row of one run has ``StableMeasurement`` ``<NA>`` (unknown): the table showed ``no`` and the warning named
    it unstable for "relative std dev >= 2% or a throttled run", neither of which was true."""

    @nsightx.analyze.kernel(configs=[1, 2], runs=1, warmup=0, backend="host", verbosity=0)
    def once(n):
        with nsightx.annotate("once"):
            time.sleep(0.0001 * n)

    frame = once().to_dataframe()
    assert frame["StableMeasurement"].isna().all()
    summary = summarize(frame, ["n"])
    assert [r.cells[summary.header.index("Stable")] for r in summary.rows] == ["-", "-"]
    assert summary.unstable == () and unstable_warning(summary) is None


def test_the_warning_names_few_runs_as_a_reason():
    """A row of 4 runs with a 1 % spread is unstable for its few runs alone: the warning says that reason too."""
    row = {"n": 1, "AvgValue": 1e3, "CI95_Lower": 9e2, "CI95_Upper": 1.1e3, "RelativeStdDevPct": 1.0}
    warning = unstable_warning(summarize(_frame([{**row, "NumRuns": 4, "StableMeasurement": False}]), ["n"]))
    assert warning is not None and "(relative std dev >= 2%, fewer than 5 valid runs or a throttled run)" in warning
