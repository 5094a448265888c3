"""Quality flags: each rule on real host-backend runs or on records captured on the H200 (CUPTI and ncu fixtures).

The CUPTI cases replay the committed activity of ``tests/fixtures/cupti`` through the real attribution code; the ncu
case reads a committed report through the real reader and merge. Where a rule's evidence is a collector value the
host cannot produce (measured clocks, clock-event reasons), the result is built from records with those values.
"""

from __future__ import annotations

import math
import time

import pytest
import region_clock
from _paths import FIXTURES, ROOT
from _synthetic import cupti_fixture_runs

import nsightx
from nsightx import ConfigError
from nsightx._results.dataframe import aggregate, throttled_runs
from nsightx._results.flags import FLAGS, RULES, SHORT_NS, filter_flags, parse_cell, row_flags
from nsightx._results.profileresults import build_results
from nsightx._results.records import CollectorValue, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo

SILENT = nsightx.VerbosityLevel.SILENT
CUPTI = FIXTURES / "cupti"
NCU = FIXTURES / "ncu"
TIME = "gpu__time_duration.sum"


def plan(backend="cupti", cache_control="all", runs=5, metrics=(TIME,)) -> PlanInfo:
    return PlanInfo(
        function="f",
        params=("n",),
        configs=((1,),),
        runs=runs,
        warmup=0,
        metrics=metrics,
        backend=backend,
        cache_control=cache_control,
        clock_control="none",
        replay_mode="kernel",
    )


def flags_of(results, annotation=None):
    df = results.to_dataframe()
    if annotation is not None:
        df = df[df["Annotation"] == annotation]
    return [parse_cell(c) for c in df["Flags"]]


# --- CUPTI fixtures: launch_bound and short on what the H200 recorded --------------------------------------------


def cupti_runs(name: str, runs: int = 5) -> list[RunRecords]:
    """The fixture's run, attributed by the real code and repeated as ``runs`` measured runs."""
    return cupti_fixture_runs(name, runs)


def test_two_regions_fixture_tiny_kernels_are_launch_bound_and_short():
    runs = cupti_runs("two_regions")
    attrs = runs[0].regions[0].attributes
    assert attrs["launch_bound"] is True and attrs["launch_ns"] > attrs["device_ns"]  # what CUPTI recorded
    results = build_results(plan(), runs, {"GPU": "NVIDIA H200"})
    for flags in flags_of(results):
        assert {"launch_bound", "short"} <= flags
        assert "warm" not in flags and "few_runs" not in flags


def test_launch_bound_needs_a_majority_of_runs():
    runs = cupti_runs("two_regions", runs=5)
    bound = [r.regions[0].attributes["launch_bound"] for r in runs]
    assert all(bound)
    flipped = [
        r.model_copy(
            update={
                "regions": tuple(
                    reg.model_copy(update={"attributes": {**reg.attributes, "launch_bound": False}})
                    for reg in r.regions
                )
            }
        )
        if i < 3
        else r
        for i, r in enumerate(runs)
    ]
    results = build_results(plan(), flipped, {})
    assert all("launch_bound" not in f for f in flags_of(results))


def test_launch_bound_from_host_time_against_gpu_records_when_no_attribute():
    runs = cupti_runs("splitk_512")
    stripped = [
        r.model_copy(update={"regions": tuple(reg.model_copy(update={"attributes": {}}) for reg in r.regions)})
        for r in runs
    ]
    gpu = sum(rec.value for rec in stripped[0].records)
    host_fast = [
        r.model_copy(update={"regions": tuple(reg.model_copy(update={"host_ns": int(gpu / 2)}) for reg in r.regions)})
        for r in stripped
    ]
    host_slow = [
        r.model_copy(update={"regions": tuple(reg.model_copy(update={"host_ns": int(gpu * 2)}) for reg in r.regions)})
        for r in stripped
    ]
    combine = {"combine": lambda a, b: a + b}
    assert all("launch_bound" not in f for f in flags_of(build_results(plan(), host_fast, {}, **combine)))
    assert all("launch_bound" in f for f in flags_of(build_results(plan(), host_slow, {}, **combine)))


def test_short_threshold_is_on_the_mean_of_time_rows_only():
    runs = cupti_runs("splitk_512")
    total = sum(rec.value for rec in runs[0].records)
    assert total > SHORT_NS  # split-K at n=512 on the H200: about 13 us in two kernels
    scale = 0.5 * SHORT_NS / total
    fast = [
        r.model_copy(
            update={"records": tuple(rec.model_copy(update={"value": rec.value * scale}) for rec in r.records)}
        )
        for r in runs
    ]
    combine = {"combine": lambda a, b: a + b}
    assert all("short" not in f for f in flags_of(build_results(plan(), runs, {}, **combine)))
    assert all("short" in f for f in flags_of(build_results(plan(), fast, {}, **combine)))
    counts = [
        r.model_copy(update={"records": tuple(rec.model_copy(update={"unit": "byte"}) for rec in r.records)})
        for r in runs
    ]
    assert all("short" not in f for f in flags_of(build_results(plan(), counts, {}, **combine)))


# --- ncu fixture: serialized ---------------------------------------------------------------------------------------


def test_ncu_two_kernel_region_is_serialized_single_kernel_region_is_not():
    pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")
    from nsightx_ncu._reader import read_report
    from nsightx_ncu._report import merge_runs

    actions = read_report(str(NCU / "two_kernels.ncu-rep"), (TIME,))
    worker = [
        RunRecords(
            config=0,
            run=r,
            regions=tuple(RegionRun(annotation=a, config=0, run=r, host_ns=10**9) for a in ("pair/a|b@c 1%", "single")),
        )
        for r in range(2)
    ]
    merged = merge_runs(actions, worker, (TIME,)).runs
    env = {"SerializesKernels": True}
    results = build_results(plan(backend="ncu", runs=2), merged, env, combine=lambda a, b: a + b)
    pair, single = flags_of(results, "pair/a|b@c 1%")[0], flags_of(results, "single")[0]
    assert "serialized" in pair and "serialized" not in single
    # host times under replay say nothing about launches: the 1 s host_ns is not launch_bound
    assert "launch_bound" not in pair and "launch_bound" not in single
    assert "few_runs" in pair
    without_env = build_results(plan(backend="ncu", runs=2), merged, {}, combine=lambda a, b: a + b)
    assert "serialized" not in flags_of(without_env, "pair/a|b@c 1%")[0]


# --- measured clocks: throttled, clock_varied -----------------------------------------------------------------------


def clock_runs(clocks, reasons=None):
    runs = []
    for r, mhz in enumerate(clocks):
        cvs = [CollectorValue(name="MeasuredSMClockMHz", scope="run", config=0, run=r, value=mhz)]
        if reasons is not None:
            cvs.append(CollectorValue(name="ClockEventReasons", scope="run", config=0, run=r, value=reasons[r]))
        runs.append(
            RunRecords(
                config=0,
                run=r,
                records=tuple(cupti_runs("splitk_512", 1)[0].records[:1]),
                regions=(RegionRun(annotation="matmul", config=0, run=r, host_ns=1),),
                collectors=tuple(cvs),
            )
        )
    return [
        r.model_copy(update={"records": tuple(rec.model_copy(update={"run": r.run}) for rec in r.records)})
        for r in runs
    ]


def test_clock_varied_over_three_percent_of_the_median():
    steady = build_results(plan(), clock_runs([1980, 1975, 1980, 1970, 1980]), {})
    varied = build_results(plan(), clock_runs([1980, 1900, 1980, 1980, 1980]), {})
    assert "clock_varied" not in flags_of(steady)[0]
    assert "clock_varied" in flags_of(varied)[0]


def test_idle_clock_reads_are_left_out_of_clock_varied():
    reasons = ["none", "gpu_idle", "none", "none", "none"]
    results = build_results(plan(), clock_runs([1980, 345, 1980, 1980, 1980], reasons), {})
    assert "clock_varied" not in flags_of(results)[0]


def test_throttled_from_a_clock_event_reason():
    reasons = ["none", "sw_thermal_slowdown", "none", "none", "none"]
    results = build_results(plan(), clock_runs([1980] * 5, reasons), {})
    flags = flags_of(results)[0]
    assert "throttled" in flags and "clock_varied" not in flags
    assert results.to_dataframe()["ThrottledRuns"].tolist() == [1]
    assert throttled_runs(results.data)[(0, 1)] is True


# --- real host-backend runs: warm, few_runs, unstable, short ---------------------------------------------------------


def test_host_runs_warm_few_runs_and_short(plugin_host, monkeypatch):
    clock = region_clock.install(monkeypatch)  # one preempted run of ten would lift a real empty region's mean

    def tiny(n):
        with nsightx.annotate("noop"):
            clock.advance(1e-6)

    few = nsightx.analyze.kernel(configs=[(1,)], runs=3, backend="host", verbosity=SILENT)(tiny)
    (flags,) = flags_of(few())
    assert {"warm", "few_runs"} <= flags  # the host cannot flush caches; 3 < 5 runs
    assert "launch_bound" not in flags and "serialized" not in flags  # no GPU time, no replay
    enough = nsightx.analyze.kernel(configs=[(1,)], runs=10, backend="host", verbosity=SILENT)(tiny)
    (flags,) = flags_of(enough())
    assert "short" in flags and "few_runs" not in flags  # a region of 1 us


def test_host_runs_that_alternate_1_and_4_ms_are_unstable(plugin_host):
    sleeps = iter([0.001, 0.004] * 10)

    @nsightx.analyze.kernel(configs=[(1,)], runs=8, warmup=0, backend="host", verbosity=SILENT)
    def jumpy(n):
        with nsightx.annotate("sleep"):
            time.sleep(next(sleeps))

    (flags,) = flags_of(jumpy())
    assert "unstable" in flags and "short" not in flags and "few_runs" not in flags


def test_every_flag_has_a_rule_and_a_doc():
    assert tuple(RULES) == FLAGS == tuple(sorted(FLAGS))
    doc = (ROOT / "docs" / "flags.md").read_text()
    for name in FLAGS:
        assert f"`{name}`" in doc and RULES[name].__doc__


def test_row_flags_keys_match_the_aggregated_rows():
    results = build_results(plan(), cupti_runs("two_regions"), {})
    keys = set(row_flags(results.data))
    assert keys == {("first", TIME, 0), ("second", TIME, 0)}
    assert len(aggregate(results.data)) == 2


# --- filtering -------------------------------------------------------------------------------------------------------


def test_filter_flags_include_exclude_clean():
    steady = build_results(plan(), clock_runs([1980, 1900, 1980, 1980, 1980]), {})
    df = steady.to_dataframe()
    assert len(filter_flags(df, include="clock_varied")) == 1
    assert len(filter_flags(df, exclude=["clock_varied"])) == 0
    assert len(filter_flags(df, clean=True)) == 0
    with pytest.raises(ConfigError, match=r"unknown flag.*'slow'"):
        filter_flags(df, exclude=["slow"])
    with pytest.raises(ConfigError, match="'Flags' column"):
        filter_flags(df.drop(columns=["Flags"]))
    assert nsightx.filter_flags is filter_flags


def test_row_mean_and_sample_std_match_statistics():
    import statistics

    from nsightx._results.flags import RowEvidence

    row = RowEvidence("a", "t", 0, "ns", values=[1.0, 2.0, 4.0, 8.5])
    assert row.mean == pytest.approx(statistics.fmean(row.values))
    assert row.std == pytest.approx(statistics.stdev(row.values))
    assert math.isnan(RowEvidence("a", "t", 0, "ns", values=[1.0]).std)
