"""nsightx compare: planted slowdowns, changes within noise, identical inputs; the statistics against SciPy."""

from __future__ import annotations

import csv
import io
import json
import math
import random

import pytest
from _paths import ROOT
from _synthetic import make_result, noisy

import nsightx
from nsightx._report.twosample import bootstrap_ratio_ci, holm, mann_whitney_u
from nsightx._report.views import render_text
from nsightx._results.profileresults import ProfileResults
from nsightx.cli import main

stats = pytest.importorskip("scipy.stats")

SIZES = [512, 1024, 2048, 4096]
# CUPTI kernel durations of an fp32 matmul on the H200 (ns), from shared/gpu/README.md
REFERENCE_NS = {512: 12_600.0, 1024: 55_600.0, 2048: 339_500.0, 4096: 2_671_000.0}


def sweep(tmp_path, name, *, factor=None, rsd=0.01, runs=20, seed=0, created="2026-12-02T12:00:00+00:00"):
    """Save a matmul-like result; ``factor`` maps a size to a multiplier of its true mean."""
    values = {}
    for i, n in enumerate(SIZES):
        mean = REFERENCE_NS[n] * (factor(n) if factor else 1.0)
        values[("matmul", i, "gpu__time_duration.sum")] = noisy(mean, rsd, runs, seed=seed + i)
    res = make_result(values, params=["n"], configs=[(n,) for n in SIZES], created=created)
    return res.save(tmp_path / f"{name}.json")


def test_planted_20pct_slowdown_fails_the_gate(tmp_path, capsys):
    base = sweep(tmp_path, "base", seed=0)
    new = sweep(tmp_path, "new", factor=lambda n: 1.2 if n == 2048 else 1.0, seed=100)
    assert main(["compare", str(base), str(new), "--threshold", "5"]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "n=2048" in ln)
    assert "REGRESSION" in line and "slower +" in line
    assert sum("REGRESSION" in ln for ln in out.splitlines()) == 1
    assert "FAIL: 1 significant slowdown(s) larger than 5%" in out
    frame = nsightx.compare(base, new)
    row = frame[frame["n"] == 2048].iloc[0]
    assert row["Regression"] and row["Status"] == "slower"
    assert row["Ratio_CI_Lower"] < 1.2 * 1.01 and row["Ratio_CI_Upper"] > 1.2 * 0.99
    assert 1.15 < row["Ratio"] < 1.25 and row["PValueAdj"] < 1e-6


def test_slowdown_below_threshold_passes(tmp_path):
    base = sweep(tmp_path, "base", seed=0)
    new = sweep(tmp_path, "new", factor=lambda n: 1.2 if n == 2048 else 1.0, seed=100)
    assert main(["compare", str(base), str(new), "--threshold", "25"]) == 0


def test_planted_half_percent_change_within_noise_passes(tmp_path, capsys):
    base = sweep(tmp_path, "base", rsd=0.02, runs=10, seed=0)
    new = sweep(tmp_path, "new", factor=lambda n: 1.005, rsd=0.02, runs=10, seed=100)
    assert main(["compare", str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" not in out and "ok: no significant slowdown larger than 5%" in out
    frame = nsightx.compare(base, new)
    assert not frame["Regression"].any()
    assert (frame["Status"] == "within noise").all()


def test_identical_inputs_say_no_change(tmp_path, capsys):
    base = sweep(tmp_path, "base")
    assert main(["compare", str(base), str(base)]) == 0
    out = capsys.readouterr().out
    assert "no change" in out.splitlines()[-1]
    frame = nsightx.compare(base, base)
    assert (frame["Status"] == "no change").all() and (frame["Ratio"] == 1.0).all()


def test_real_host_results_from_output_prefix(plugin_host, tmp_path, capsys):
    @nsightx.analyze.kernel(
        configs=[2000, 4000],
        runs=5,
        backend="host",
        output_prefix=str(tmp_path / "a") + "/",
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def build(n):
        with nsightx.annotate("list"):
            list(range(n))

    build()
    saved = sorted((tmp_path / "a").glob("result-*.parquet"))
    assert len(saved) == 1
    assert main(["compare", str(tmp_path / "a"), str(saved[0])]) == 0
    assert "no change" in capsys.readouterr().out


def test_folder_uses_newest_result_per_function(tmp_path):
    (tmp_path / "runs").mkdir()
    sweep(tmp_path / "runs", "result-bench-0", factor=lambda n: 2.0, created="2026-12-01T00:00:00+00:00")
    sweep(tmp_path / "runs", "result-bench-1", created="2026-12-02T00:00:00+00:00")
    base = sweep(tmp_path, "base")
    frame = nsightx.compare(base, tmp_path / "runs")
    assert (frame["Status"] == "no change").all()


def test_throughput_drop_is_a_regression(tmp_path):
    def result(scale, seed):
        values = {("gemm", 0, "tflops"): noisy(500.0 * scale, 0.01, 10, seed)}
        return make_result(values, params=["n"], configs=[(4096,)], units={"tflops": "TFLOP/s"})

    frame = nsightx.compare(result(1.0, 0), result(0.8, 9))
    row = frame.iloc[0]
    assert row["HigherIsBetter"] and row["Regression"] and row["Status"] == "slower"
    faster = nsightx.compare(result(1.0, 0), result(1.3, 9)).iloc[0]
    assert faster["Status"] == "faster" and not faster["Regression"]


def test_unmatched_rows_and_too_few_runs(tmp_path):
    a = make_result(
        {("x", 0, "m"): [1.0, 1.1, 0.9], ("only_a", 0, "m"): [1.0, 2.0], ("y", 0, "m"): [1.0, 2.0]},
        params=["n"],
        configs=[(1,)],
    )
    b = make_result(
        {("x", 0, "m"): [1.0], ("only_b", 0, "m"): [1.0, 2.0], ("y", 0, "m"): [1.0, 2.0]}, params=["n"], configs=[(1,)]
    )
    frame = nsightx.compare(a, b).set_index("Annotation")
    assert frame.loc["x", "Status"] == "too few runs"
    assert frame.loc["only_a", "Status"] == "only in baseline"
    assert frame.loc["only_b", "Status"] == "only in new"
    assert not frame["Regression"].any()


def test_markdown_and_metric_filter(tmp_path, capsys):
    base = sweep(tmp_path, "base", seed=0)
    new = sweep(tmp_path, "new", factor=lambda n: 1.2, seed=100)
    assert main(["compare", str(base), str(new), "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("### nsightx compare: **FAIL: 4 significant slowdown(s)")
    assert "| Function | Annotation | Config |" in out and "**slower +" in out
    assert main(["compare", str(base), str(new), "--metric", "other"]) == 2  # in neither result: not a pass


def test_bad_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["compare", str(bad), str(bad)]) == 2
    assert "is not an nsightx result" in capsys.readouterr().err
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2


def test_backend_mismatch_is_warned(tmp_path):
    a = make_result({("x", 0, "m"): [1.0, 2.0]}, params=["n"], configs=[(1,)], backend="cupti")
    b = make_result({("x", 0, "m"): [1.0, 2.0]}, params=["n"], configs=[(1,)], backend="events")
    assert any("'cupti', new with 'events'" in w for w in nsightx.compare(a, b).attrs["warnings"])


# --- the statistics, checked against SciPy ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_mann_whitney_matches_scipy(seed):
    rng = random.Random(seed)
    m, n = rng.randint(2, 40), rng.randint(2, 40)
    ties = seed % 2 == 0
    x = [round(rng.gauss(0, 1), 1 if ties else 12) for _ in range(m)]
    y = [round(rng.gauss(0.4, 1), 1 if ties else 12) for _ in range(n)]
    has_ties = len(set(x + y)) < m + n
    u, p = mann_whitney_u(x, y)
    ref = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic" if has_ties else "exact")
    assert u == pytest.approx(ref.statistic)
    assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


def test_bootstrap_interval_covers_the_true_ratio_about_95pct():
    hits = 0
    for seed in range(200):
        a = noisy(100.0, 0.05, 15, seed=seed)
        b = noisy(110.0, 0.05, 15, seed=seed + 1000)
        lo, hi = bootstrap_ratio_ci(a, b, resamples=1000, seed=seed)
        hits += lo <= 1.1 <= hi
    assert 0.88 <= hits / 200 <= 0.99
    assert bootstrap_ratio_ci([1.0, 2.0], [3.0, 4.0]) == bootstrap_ratio_ci([1.0, 2.0], [3.0, 4.0])


def test_holm():
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    out = holm([math.nan, 0.5])
    assert math.isnan(out[0]) and out[1] == 0.5


# --- the gate cannot pass on nothing ----------------------------------------------------------------------------


def _saved(tmp_path, name, values, *, function="bench", configs=((1,),), units=None):
    res = make_result(values, params=["n"], configs=list(configs), function=function, units=units)
    return str(res.save(tmp_path / f"{name}.json"))


TWO = [1.0, 1.1, 0.9, 1.05]


@pytest.mark.parametrize(
    ("base", "new", "why"),
    [
        (
            {"function": "gemm"},
            {"function": "gemv"},
            "no function is in both results (baseline: 'gemm'; new: 'gemv'); compare results of the same",
        ),
        (
            {"values": {("a", 0, "m"): TWO}},
            {"values": {("b", 0, "m"): TWO}},
            "bench: no annotation is in both results (baseline: 'a'; new: 'b')",
        ),
        (
            {"values": {("a", 0, "m"): TWO}},
            {"values": {("a", 0, "t"): TWO}},
            "bench: no metric is in both results (baseline: 'm'; new: 't')",
        ),
        ({"configs": [(1,)]}, {"configs": [(2,)]}, "bench: no config is in both results (baseline: (n=1); new: (n=2))"),
        ({"values": {("a", 0, "m"): [1.0]}}, {"values": {("a", 0, "m"): [2.0]}}, "fewer than 2 valid runs"),
    ],
)
def test_nothing_compared_exits_2_and_says_why(tmp_path, capsys, base, new, why):
    def side(name, kw):
        kw = {"values": {("a", 0, "m"): TWO}, **kw}
        return _saved(tmp_path, name, kw.pop("values"), **kw)

    a, b = side("a", base), side("b", new)
    assert main(["compare", a, b]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nsightx compare: nothing to compare: ") and why in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(nsightx.CompareError, match="nothing to compare"):
        nsightx.compare(a, b)


def test_metric_in_neither_result_exits_2(tmp_path, capsys):
    a = _saved(tmp_path, "a", {("a", 0, "m"): TWO})
    assert main(["compare", a, a, "--metric", "m", "--metric", "typo"]) == 2
    assert "metric(s) ['typo'] are in neither result; the results hold 'm'" in capsys.readouterr().err


def test_metric_in_one_result_only_exits_2(tmp_path, capsys):
    a = _saved(tmp_path, "a", {("a", 0, "m"): TWO, ("a", 0, "t"): TWO})
    b = _saved(tmp_path, "b", {("a", 0, "m"): TWO})
    assert main(["compare", a, b, "--metric", "t"]) == 2
    assert "the metric(s) ['t'] are not in both results; metrics in both: 'm'" in capsys.readouterr().err


@pytest.mark.parametrize("metrics", ["m", b"m", 3, ["m", 3], [], {"m": 1}])
def test_python_api_refuses_a_bare_str_or_bad_metrics(tmp_path, metrics):
    a = _saved(tmp_path, "a", {("a", 0, "m"): TWO})
    with pytest.raises(nsightx.ConfigTypeError, match="metrics must be a"):
        nsightx.compare(a, a, metrics=metrics)


def test_rows_in_one_result_are_listed_and_fail_only_with_require_all(tmp_path, capsys):
    a = _saved(tmp_path, "a", {("a", 0, "m"): TWO, ("gone", 0, "m"): TWO})
    b = _saved(tmp_path, "b", {("a", 0, "m"): TWO, ("added", 0, "m"): TWO})
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert any("gone" in ln and "only in baseline" in ln for ln in out.splitlines())
    assert any("added" in ln and "only in new" in ln for ln in out.splitlines())
    assert "note: 2 row(s) are in only one result (listed above) and do not fail the gate" in out
    assert main(["compare", a, b, "--require-all"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: 2 row(s) in only one result (--require-all)" in out and "note:" not in out
    assert main(["compare", a, b, "--require-all", "--format", "markdown"]) == 1
    assert "**FAIL: 2 row(s) in only one result (--require-all)" in capsys.readouterr().out
    assert main(["compare", a, a, "--require-all"]) == 0


def test_report_shows_each_sides_flags(plugin_host, tmp_path, capsys):
    """Real host runs: 3 runs are few_runs, 6 are not; the host never flushes caches, so both sides are warm."""
    import time

    def measure(runs, folder):
        @nsightx.analyze.kernel(
            configs=[(1,)],
            runs=runs,
            backend="host",
            output_prefix=str(tmp_path / folder) + "/",
            verbosity=nsightx.VerbosityLevel.SILENT,
        )
        def bench(n):
            with nsightx.annotate("region"):
                time.sleep(0.002)

        return bench()

    measure(3, "a")
    measure(6, "b")
    frame = nsightx.compare(tmp_path / "a", tmp_path / "b")
    (row,) = frame.to_dict("records")
    assert "few_runs" in row["BaselineFlags"].split(",") and "few_runs" not in row["NewFlags"].split(",")
    assert "warm" in row["BaselineFlags"] and "warm" in row["NewFlags"]
    main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    out = capsys.readouterr().out
    header = next(ln for ln in out.splitlines() if ln.startswith("Function"))
    assert header.rstrip().endswith("Flags")
    line = next(ln for ln in out.splitlines() if ln.startswith("bench"))
    assert f"{row['BaselineFlags']} / {row['NewFlags']}" in line


# --- formats, environments, the noise floor, the width ------------------------------------------------------------

DATA = ROOT / "docs" / "data"


def test_format_json_parses_back_and_csv_has_every_column(tmp_path, capsys):
    base = sweep(tmp_path, "base", seed=0)
    new = sweep(tmp_path, "new", factor=lambda n: 1.2 if n == 2048 else 1.0, seed=100)
    assert main(["compare", str(base), str(new), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] is True and doc["verdict"].startswith("FAIL: 1 significant slowdown(s) larger than 5%")
    assert doc["threshold_pct"] == 5.0 and doc["environment"] == [] and doc["warnings"] == []
    by_n = {row["n"]: row for row in doc["rows"]}
    assert sorted(by_n) == SIZES and by_n[2048]["Regression"] is True and by_n[2048]["Status"] == "slower"
    assert 1.15 < by_n[2048]["Ratio"] < 1.25 and not any(r["Regression"] for n, r in by_n.items() if n != 2048)
    assert set(doc["rows"][0]) >= {"NoiseFloorPct", "BaselineProcesses", "PValueAdj", "Ratio_CI_Lower"}
    assert main(["compare", str(base), str(base), "--format", "json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["failed"] is False and same["rows"][0]["NoiseFloorPct"] is None  # NaN becomes null
    assert main(["compare", str(base), str(new), "--format", "csv"]) == 1
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(table) == 4 and [r["Regression"] for r in table].count("True") == 1


def test_format_csv_keeps_a_row_whose_parameter_holds_a_carriage_return(tmp_path, capsys):
    values = {("matmul", 0, "gpu__time_duration.sum"): TWO}
    base = _saved(tmp_path, "base", values, configs=[("a\rb",)])
    new = _saved(tmp_path, "new", values, configs=[("a\rb",)])
    main(["compare", base, new, "--format", "csv"])
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out, newline="")))
    assert [row["n"] for row in table] == ["a\rb"]  # the row was cut in two at the \r


def _with_env(res, **env):
    return ProfileResults(res.data.model_copy(update={"environment": {**res.environment, **env}}))


def test_environment_differences_are_printed_next_to_the_verdict(tmp_path, capsys):
    values = {("matmul", 0, "gpu__time_duration.sum"): noisy(1000.0, 0.01, 20, 0)}
    res = make_result(values, params=["n"], configs=[(1,)])
    a = _with_env(res, CPU="AMD EPYC 7763", GitCommit="a" * 40, torch="2.9.0", Driver="570.86.15")
    b = _with_env(res, CPU="Intel Xeon 8480", GitCommit="b" * 40, torch="2.9.0", Driver="580.65.06")
    a_path, b_path = a.save(tmp_path / "a.json"), b.save(tmp_path / "b.json")
    assert main(["compare", str(a_path), str(b_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("no change"))
    assert lines[verdict + 1 : verdict + 4] == [
        "differs: GitCommit: aaaaaaaaaa (baseline) -> bbbbbbbbbb (new)",
        "differs: CPU: 'AMD EPYC 7763' (baseline) -> 'Intel Xeon 8480' (new)",
        "differs: Driver: '570.86.15' (baseline) -> '580.65.06' (new)",
    ]
    assert not any("torch" in line for line in lines)  # the same on both sides
    frame = nsightx.compare(a, b)
    assert {d["key"] for d in frame.attrs["environment"]} == {"GitCommit", "CPU", "Driver"}


def test_history_floor_lets_a_drift_seen_before_pass_and_a_larger_change_fail(tmp_path):
    """Three stored processes of the baseline whose means spread 30%: +20% is within noise, +60% is not."""
    (tmp_path / "runs").mkdir()
    for i, factor in enumerate((1.0, 1.3, 1.0)):
        sweep(tmp_path / "runs", f"result-bench-{i}", factor=lambda n, f=factor: f, seed=10 * i,
              created=f"2026-12-0{i + 1}T00:00:00+00:00")  # fmt: skip
    new = sweep(tmp_path, "new", factor=lambda n: 1.2, seed=100)
    frame = nsightx.compare(tmp_path / "runs", new)
    assert (frame["BaselineProcesses"] == 3).all() and (frame["NoiseFloorPct"] > 29).all()
    assert not frame["Regression"].any() and (frame["Status"] == "within noise").all() and frame["Significant"].all()
    assert nsightx.compare(tmp_path / "runs", new, history=1)["Regression"].all()  # the runs alone: +20% fails
    slower = sweep(tmp_path, "slower", factor=lambda n: 1.6, seed=100)
    assert nsightx.compare(tmp_path / "runs", slower)["Regression"].all()


def test_text_table_fits_the_width_and_leaves_out_a_repeated_column(capsys):
    frame = nsightx.compare(DATA / "h200-gemm-tf32.json", DATA / "h200-gemm-fp32.json")
    assert (frame["Annotation"] == frame["Function"]).all()
    full = render_text(frame)
    header = next(line for line in full.splitlines() if line.startswith("Function"))
    assert "Annotation" not in header and "95% CI" in header and "Metric" in header  # no limit: all but the repeat
    for width in (120, 100, 80):
        text = render_text(frame, width)
        table = text.split("\n\n")[1].splitlines()
        assert max(len(line) for line in table) <= width, text
        assert sum("REGRESSION" in line for line in table) == 3
    assert "metric: gpu__time_duration.sum" in render_text(frame, 80)
