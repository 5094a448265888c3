"""Reconciling two backends' times: each difference above the threshold explained from the data.

The CUPTI side is the split-K matmul at n=512 that the H200 recorded (``fixtures/cupti/splitk_512.json``: a gemm
kernel and a split-K reduce kernel, their span and kernel sum). The other sides are built from records shaped as
ncu and CUDA events write them; their numbers are stated in each test.
"""

from __future__ import annotations

import pytest
from _paths import FIXTURES
from _synthetic import cupti_fixture_runs

import nsightx
from nsightx import CompareError, ConfigError
from nsightx._api.reconcile import reconcile
from nsightx._results.profileresults import build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo
from nsightx.cli import main

CUPTI = FIXTURES / "cupti"
TIME = "gpu__time_duration.sum"
SPAN = "region__stream_span_duration"
ADD = {"combine": lambda a, b: a + b}


def plan(backend, metric=TIME, cache_control="all"):
    return PlanInfo(
        function="mm",
        params=("n",),
        configs=((512,),),
        runs=5,
        warmup=1,
        metrics=(metric,),
        backend=backend,
        cache_control=cache_control,
        clock_control="none",
        replay_mode="kernel",
    )


def cupti_runs(runs=5, clock=None):
    def collectors(r):
        return (CollectorValue(name="MeasuredSMClockMHz", scope="run", config=0, run=r, value=clock),) if clock else ()

    return cupti_fixture_runs("splitk_512", runs, collectors)


def cupti_result(**kw):
    return build_results(plan("cupti"), cupti_runs(**kw), {"GPU": "NVIDIA H200"}, **ADD)


def names():
    return [rec.kernel for rec in cupti_runs(1)[0].records]


def ncu_result(times=(10_100.0, 6_100.0)):
    """Split-K under ncu: the same two kernels, each replayed alone after a flush (times stated here)."""
    runs = []
    for r in range(2):
        recs = tuple(
            Record(annotation="matmul", config=0, run=r, kernel=k, metric=TIME, value=t, unit="ns", seq=s)
            for s, (k, t) in enumerate(zip(names(), times, strict=True))
        )
        regions = (RegionRun(annotation="matmul", config=0, run=r, host_ns=10**8, attributes={"kernel_count": 2}),)
        runs.append(RunRecords(config=0, run=r, records=recs, regions=regions))
    return build_results(plan("ncu"), runs, {"SerializesKernels": True}, **ADD)


def test_split_k_gap_at_512_is_explained_by_ncu_serialising_the_two_kernels():
    df = reconcile(cupti_result(), ncu_result())
    (row,) = df.to_dict("records")
    assert row["MeanA"] == pytest.approx(9952 + 3040) and row["MeanB"] == pytest.approx(16_200)
    assert row["DiffPct"] == pytest.approx(100 * (16_200 - 12_992) / 12_992)
    assert row["KernelsA"] == 2 and row["KernelsB"] == 2
    assert row["Causes"] == "serialized"
    text = row["Explanation"]
    assert "ncu ran the region's 2 kernels one at a time" in text
    assert "split_k_kernel" in text and "3.04 us (cupti) vs 6.1 us (ncu, +101%)" in text


def test_events_span_against_cupti_kernels_gives_the_gap_in_numbers():
    span_ns = 14_080  # what CUPTI saw as the region's span (kernel sum 12_992 ns)
    runs = [
        RunRecords(
            config=0,
            run=r,
            records=(
                Record(
                    annotation="matmul",
                    config=0,
                    run=r,
                    kernel="region",
                    metric=SPAN,
                    value=span_ns + 2_000.0,
                    unit="ns",
                ),
            ),
            regions=(RegionRun(annotation="matmul", config=0, run=r, host_ns=50_000),),
        )
        for r in range(5)
    ]
    events = build_results(plan("events", SPAN), runs, {})
    (row,) = reconcile(cupti_result(), events).to_dict("records")
    assert row["Causes"] == "span_gaps" and row["KernelsB"] == "region"
    text = row["Explanation"]
    assert "events timed the whole region (region__stream_span_duration: 16.08 us)" in text
    assert "cupti saw the kernels span 14.08 us, of which 1.088 us idle between them" in text
    assert "the rest, 2 us, is launch latency" in text


def test_clocks_and_cache_control_are_causes_and_a_small_difference_is_not_explained():
    slow = cupti_runs(clock=1700.0)
    slow = [
        r.model_copy(update={"records": tuple(rec.model_copy(update={"value": rec.value * 1.15}) for rec in r.records)})
        for r in slow
    ]
    b = build_results(plan("cupti", cache_control="none"), slow, {}, **ADD)
    (row,) = reconcile(cupti_result(clock=1980.0), b).to_dict("records")
    assert row["Causes"] == "clocks,cache"
    assert "SM clock differed: 1980 MHz (cupti) vs 1700 MHz (cupti, -14.1%)" in row["Explanation"]
    (same,) = reconcile(cupti_result(), cupti_result()).to_dict("records")
    assert same["Causes"] == "" and same["Explanation"] == "within threshold"


def host_result(value_ns):
    metric = "host__time_duration.sum"
    runs = [
        RunRecords(
            config=0,
            run=r,
            records=(
                Record(annotation="matmul", config=0, run=r, kernel="region", metric=metric, value=value_ns, unit="ns"),
            ),
            regions=(RegionRun(annotation="matmul", config=0, run=r, host_ns=int(value_ns)),),
        )
        for r in range(5)
    ]
    return build_results(plan("host", metric), runs, {})


def test_unexplained_when_nothing_in_the_data_accounts_for_it():
    (row,) = reconcile(host_result(50_000.0), host_result(80_000.0)).to_dict("records")
    assert row["Causes"] == "unexplained" and row["Explanation"] == "no cause found in the data"
    assert row["DiffPct"] == pytest.approx(60.0)


def test_cli_prints_one_line_per_row_and_refuses_bad_input(tmp_path, capsys):
    a = cupti_result().save(tmp_path / "a.json")
    b = ncu_result().save(tmp_path / "b.json")
    assert main(["reconcile", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mm matmul (n=512): cupti 12.99 us vs ncu 16.2 us (+24.7%): ncu ran")
    assert main(["reconcile", str(a), str(b), "--threshold", "-1"]) == 2
    assert "nsightx reconcile: error: argument --threshold: must be a number >= 0" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="threshold_pct"):
        reconcile(a, b, threshold_pct=float("nan"))
    other = build_results(plan("ncu").model_copy(update={"function": "other"}), ncu_result().data.runs, {}, **ADD)
    with pytest.raises(CompareError, match="no \\(function, annotation, config\\) is in both"):
        nsightx.reconcile(a, other)


class _TimerSession:
    """An in-process per-kernel timer (a stand-in for CUPTI, which needs a GPU), registered as a plugin backend."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.start = 0

    def region_enter(self, region):
        import time

        self.start = time.perf_counter_ns()

    def region_exit(self, region, failed):
        import time

        self.records.append(
            Record(
                annotation=region.annotation,
                config=region.config,
                run=region.run,
                kernel="gemm",
                metric=TIME,
                value=float(time.perf_counter_ns() - self.start),
                unit="ns",
            )
        )

    def finish_run(self, config, run):
        from nsightx._run.backend import RunOutput

        out, self.records = self.records, []
        return RunOutput(records=out)


def _timer_plugin():
    import contextlib

    from nsightx._run.backend import Availability, Backend, Capabilities, Session

    session_type = type("TimerSession", (_TimerSession, Session), {})

    class KernelTimer(Backend):
        name = "kerneltimer"
        capabilities = Capabilities(metrics=frozenset({TIME}), default_metrics=(TIME,), needs_gpu=False)

        @classmethod
        def availability(cls):
            return Availability(available=True, reason="test stand-in")

        @contextlib.contextmanager
        def session(self, plan):
            yield session_type()

    class Plugin:
        @nsightx.hookimpl
        def nsightx_register_backends(self, register):
            register(KernelTimer)

    return Plugin()


def test_reconcile_runs_one_decorated_function_on_two_backends(plugin_host):
    plugin_host.register(_timer_plugin(), name="timer")

    @nsightx.analyze.kernel(runs=5, verbosity=0, thermal_mode="off", metrics=["host__time_duration.sum"])
    def mm(n):
        with nsightx.annotate("matmul"):
            sum(range(n))

    df = nsightx.reconcile(mm, backends=("host", "kerneltimer"), configs=[(2000,), (4000,)], threshold_pct=0.0)
    assert list(df["n"]) == [2000, 4000]
    assert set(df["MetricA"]) == {"host__time_duration.sum"} and set(df["MetricB"]) == {TIME}  # natural metrics
    assert (df["Causes"] == "span_gaps").all()  # the host times the whole region, the timer its kernel
    assert df["Explanation"].str.contains("host timed the whole region").all()
    with pytest.raises(ConfigError, match="two backend names"):
        nsightx.reconcile(mm, backends=("host",), configs=[(1,)])
    with pytest.raises(ConfigError, match=r"decorated with @nsightx\.analyze\.kernel"):
        nsightx.reconcile(lambda n: None, backends=("host", "kerneltimer"))
    with pytest.raises(ConfigError, match="not both"):
        nsightx.reconcile(mm, mm, backends=("host", "kerneltimer"))
    with pytest.raises(ConfigError, match="needs two results"):
        nsightx.reconcile(mm)
