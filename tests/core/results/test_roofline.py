"""Roofline arithmetic against hand-computed values, the per-kernel table over runs, and the roofline plot."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy import stats

import nsightx
from nsightx import ConfigError
from nsightx._results.profileresults import build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.roofline import (
    DRAM_BYTES,
    DRAM_CLOCK,
    DRAM_PEAK,
    ROOFLINE_METRICS,
    SM_CLOCK,
    TENSOR_INST,
    TENSOR_OPS,
    TENSOR_PEAK,
    TIME,
    inst_metric,
    per_second,
    roofline_point,
    roofline_rows,
    seconds,
)
from nsightx._results.schema import PlanInfo

FFMA_PEAK = f"{inst_metric('ffma')}.peak_sustained"
HFMA_PEAK = f"{inst_metric('hfma')}.peak_sustained"

# A memory-bound fp32 kernel: 1 ms, 0.2e9 FADD + 0.3e9 FMUL + 1e9 FFMA, 1e9 DRAM bytes, on H200-like peaks:
# 132 SMs x 128 FFMA/cycle = 16896 inst/cycle at 1.98 GHz, 1500 byte/cycle at 3.2 GHz.
MEMORY_BOUND = {
    TIME: (1_000_000.0, "ns"),
    inst_metric("fadd"): (2e8, "inst"),
    inst_metric("fmul"): (3e8, "inst"),
    inst_metric("ffma"): (1e9, "inst"),
    DRAM_BYTES: (1e9, "byte"),
    FFMA_PEAK: (16896.0, "inst/cycle"),
    SM_CLOCK: (1.98e9, "hz"),
    DRAM_PEAK: (1500.0, "byte/cycle"),
    DRAM_CLOCK: (3.2e9, "hz"),
}


def test_memory_bound_point_by_hand():
    p = roofline_point(MEMORY_BOUND)
    assert p is not None and p.precision == "fp32"
    flop = 2e8 + 3e8 + 2 * 1e9  # an FMA is two FLOP
    assert p.flop == pytest.approx(flop)
    assert p.seconds == pytest.approx(1e-3)
    assert p.flop_per_s == pytest.approx(2.5e12)
    assert p.bytes_per_s == pytest.approx(1e12)
    assert p.intensity == pytest.approx(2.5)
    assert p.peak_flop_per_s == pytest.approx(2 * 16896 * 1.98e9)  # 66.9 TFLOP/s
    assert p.peak_bytes_per_s == pytest.approx(1500 * 3.2e9)  # 4.8 TB/s
    assert p.roof_flop_per_s == pytest.approx(2.5 * 4.8e12)  # under the bandwidth slope
    assert p.roof_fraction == pytest.approx(2.5e12 / 12e12)
    assert p.bound == "memory"


def test_compute_bound_point_and_units_converted():
    values = {
        **MEMORY_BOUND,
        TIME: (1.0, "msecond"),
        DRAM_BYTES: (1.0, "Mbyte"),  # AI = 2.5e9 / 1e6 = 2500 FLOP/byte, right of the ridge (13.9)
        SM_CLOCK: (1.98, "cycle/nsecond"),
    }
    p = roofline_point(values)
    assert p is not None
    assert p.intensity == pytest.approx(2500.0)
    assert p.peak_flop_per_s == pytest.approx(2 * 16896 * 1.98e9)
    assert p.roof_flop_per_s == pytest.approx(p.peak_flop_per_s)
    assert p.roof_fraction == pytest.approx(2.5e12 / (2 * 16896 * 1.98e9))
    assert p.bound == "compute"


NS_IN = {"ns": 1, "nsecond": 1, "us": 10**3, "usecond": 10**3, "ms": 10**6, "msecond": 10**6, "s": 10**9}


@given(
    value=st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False),
    unit=st.sampled_from(sorted(NS_IN)),
)
@example(value=0.1, unit="us")  # 0.1 * 1e3 / 1e9 gave 1e-07, an ulp below 0.1 us in seconds rounded once
def test_a_duration_in_seconds_is_rounded_once(value, unit):
    """Regression (open24): ``value * ns / 1e9`` rounded twice, and moved about a quarter of the durations given
    in us or ms by an ulp; the seconds are the exact quotient, rounded once."""
    assert seconds(value, unit) == float(Fraction(value) * NS_IN[unit] / 10**9), (value, unit)


@pytest.mark.parametrize("unit", ["kB", "KB", "Kbyte", "kbyte"])
def test_byte_units_of_the_units_module_are_read_with_their_prefix(unit):
    """Regression (fix20b): ``kB``, ``KB``, ``MB`` and ``GB`` were read as plain bytes (1000x off per prefix)."""
    for prefix, factor in (("", 1e3), ("M", 1e6), ("G", 1e9)):
        spelled = unit if not prefix else prefix + unit[1:]  # kB -> MB -> GB, Kbyte -> Mbyte -> Gbyte
        p = roofline_point({**MEMORY_BOUND, DRAM_BYTES: (1e9 / factor, spelled)})
        assert p is not None and p.dram_bytes == pytest.approx(1e9), spelled
        assert p.intensity == pytest.approx(2.5) and p.bound == "memory", spelled


def test_an_unknown_unit_gives_nan_not_a_guess():
    """Regression (fix20b): an unknown time unit was read as ns, an unknown byte unit as bytes."""
    p = roofline_point({**MEMORY_BOUND, TIME: (1.0, "fortnight")})
    assert p is not None and math.isnan(p.seconds) and math.isnan(p.flop_per_s) and math.isnan(p.roof_fraction)
    for unit in ("sector", "mbyte", "MB/s"):  # mbyte: milli, not mega; MB/s: a rate
        p = roofline_point({**MEMORY_BOUND, DRAM_BYTES: (1.0, unit)})
        assert p is not None and math.isnan(p.dram_bytes) and math.isnan(p.intensity), unit
        assert math.isnan(p.bytes_per_s) and p.bound == "unknown", unit
    p = roofline_point({**MEMORY_BOUND, SM_CLOCK: (1.98, "cycle/fortnight")})
    assert p is not None and math.isnan(p.peak_flop_per_s) and p.bound == "unknown"


@pytest.mark.parametrize("missing", [DRAM_PEAK, DRAM_CLOCK])
def test_a_roof_without_the_dram_peak_is_nan_not_the_compute_peak(missing):
    # The memory-bound kernel (AI 2.5 FLOP/byte) without its peak bandwidth: its roof is not known. It was the
    # compute peak (Python's min keeps its first argument against a NaN), a fraction of 0.04 for a kernel at 21%.
    values = {k: v for k, v in MEMORY_BOUND.items() if k != missing}
    p = roofline_point(values)
    assert p is not None and p.intensity == pytest.approx(2.5) and math.isnan(p.peak_bytes_per_s)
    assert math.isnan(p.roof_flop_per_s) and math.isnan(p.roof_fraction) and p.bound == "unknown"
    (row,) = roofline_rows(
        [
            RunRecords(
                config=0,
                run=0,
                records=tuple(
                    Record(annotation="mm", config=0, run=0, kernel="k", metric=m, value=v, unit=u, seq=0)
                    for m, (v, u) in values.items()
                ),
            )
        ]
    )
    assert math.isnan(row["roof_flop_per_s"]) and math.isnan(row["roof_fraction"])


def test_per_second_units():
    assert per_second(1.5, "GHz") == pytest.approx(1.5e9)
    assert per_second(2.0, "cycle/usecond") == pytest.approx(2e6)
    assert per_second(7.0, "hz") == 7.0
    assert per_second(1.41, "Ghz") == pytest.approx(1.41e9)  # ncu's spelling
    assert math.isnan(per_second(1.0, "byte/cycle"))


def test_dominant_precision_and_tensor_factor():
    values = {
        TIME: (1000.0, "ns"),
        inst_metric("ffma"): (10.0, "inst"),
        inst_metric("hfma"): (1000.0, "inst"),
        HFMA_PEAK: (33792.0, "inst/cycle"),
        SM_CLOCK: (2e9, "hz"),
    }
    p = roofline_point(values)
    assert p is not None and p.precision == "fp16" and p.flop == 2000.0
    assert p.peak_flop_per_s == pytest.approx(2 * 33792 * 2e9)
    assert math.isnan(p.intensity) and p.bound == "unknown"  # no DRAM counter
    tensor = roofline_point(
        {TIME: (1000.0, "ns"), TENSOR_INST: (10.0, "inst"), TENSOR_PEAK: (4.0, "inst/cycle"), SM_CLOCK: (1e9, "hz")}
    )
    assert tensor is not None and tensor.precision == "tensor"  # old data: the approximate instruction factor
    assert tensor.flop == 10 * 512 and tensor.peak_flop_per_s == pytest.approx(4 * 512 * 1e9)


# An fp16 cuBLAS matmul at n = 4096 as the H200 measured it
# (98c9cf0:benchmarks/results/2026-12-04-s7-tensor-probe.json): the fp16 tensor counter reads 2n^3 FLOP; its peak
# is the sparse rate, 8192 FLOP/cycle/SM x 132 SMs.
FP16_MATMUL = {
    TIME: (200_000.0, "ns"),
    TENSOR_OPS["tensor_fp16"]: (2 * 4096.0**3, "op"),
    f"{TENSOR_OPS['tensor_fp16']}.peak_sustained": (1_081_344.0, "op/cycle"),
    TENSOR_INST: (2_147_483.0, "inst"),  # present too: the ops counter wins, no "tensor" precision
    inst_metric("hfma"): (1000.0, "inst"),
    HFMA_PEAK: (33792.0, "inst/cycle"),
    SM_CLOCK: (1.98e9, "hz"),
    DRAM_BYTES: (3 * 2 * 4096.0**2, "byte"),  # a, b read and c written once, 2 bytes each
    DRAM_PEAK: (1500.0, "byte/cycle"),
    DRAM_CLOCK: (3.2e9, "hz"),
}


def test_tensor_ops_counter_is_the_work_and_the_dense_peak_the_roof():
    p = roofline_point(FP16_MATMUL)
    assert p is not None and p.precision == "tensor_fp16"
    flop = 2 * 4096**3  # 137.4 GFLOP
    assert p.flop == pytest.approx(flop)
    assert p.flop_per_s == pytest.approx(flop / 200e-6)  # 687 TFLOP/s
    dense_peak = 1_081_344 / 2 * 1.98e9  # 1070.5 TFLOP/s: half the sparse rate the counter's peak gives
    assert p.peak_flop_per_s == pytest.approx(dense_peak)
    assert p.intensity == pytest.approx(flop / (6 * 4096**2))  # 1365 FLOP/byte: right of the ridge (223)
    assert p.bound == "compute"
    assert p.roof_flop_per_s == pytest.approx(dense_peak)
    assert p.roof_fraction == pytest.approx((flop / 200e-6) / dense_peak)  # 0.642
    hfma = roofline_point(FP16_MATMUL, "fp16")  # placed by the CUDA-core precision on request
    assert hfma is not None and hfma.flop == 2000.0


def test_tensor_precisions_each_have_their_counter_and_fp64_has_no_sparse_rate():
    assert set(TENSOR_OPS) == {"tensor_fp64", "tensor_tf32", "tensor_fp16", "tensor_bf16", "tensor_fp8"}
    for name in TENSOR_OPS.values():
        assert name in ROOFLINE_METRICS and f"{name}.peak_sustained" in ROOFLINE_METRICS
    assert TENSOR_INST not in ROOFLINE_METRICS
    fp64 = {TIME: (1e6, "ns"), TENSOR_OPS["tensor_fp64"]: (1e10, "op"), SM_CLOCK: (2e9, "hz")}
    fp64[f"{TENSOR_OPS['tensor_fp64']}.peak_sustained"] = (33792.0, "op/cycle")
    p = roofline_point(fp64)
    assert p is not None and p.precision == "tensor_fp64"
    assert p.peak_flop_per_s == pytest.approx(33792 * 2e9)  # 67.6 TFLOP/s, the dense rate as read


def test_missing_peaks_leave_nan_and_no_time_no_point():
    p = roofline_point({TIME: (1000.0, "ns"), inst_metric("ffma"): (5.0, "inst"), DRAM_BYTES: (10.0, "byte")})
    assert p is not None and p.flop_per_s == pytest.approx(1e7) and p.intensity == 1.0
    assert math.isnan(p.peak_flop_per_s) and math.isnan(p.roof_fraction) and p.bound == "unknown"
    assert roofline_point({inst_metric("ffma"): (5.0, "inst")}) is None
    assert ROOFLINE_METRICS[0] == TIME and len(set(ROOFLINE_METRICS)) == len(ROOFLINE_METRICS)


def ncu_runs(times_ns, *, kernels=("gemm",), configs=1):
    runs = []
    for c in range(configs):
        for r, t in enumerate(times_ns):
            records = [
                Record(
                    annotation="mm",
                    config=c,
                    run=r,
                    kernel=k,
                    metric=m,
                    value=v[0] if m != TIME else t,
                    unit=v[1],
                    seq=seq,
                )
                for seq, k in enumerate(kernels)
                for m, v in MEMORY_BOUND.items()
            ]
            runs.append(
                RunRecords(
                    config=c,
                    run=r,
                    records=tuple(records),
                    regions=(RegionRun(annotation="mm", config=c, run=r, host_ns=1),),
                )
            )
    return runs


def test_rows_average_runs_with_a_t_interval_of_flops():
    times = [1_000_000.0, 1_100_000.0, 900_000.0]
    (row,) = roofline_rows(ncu_runs(times))
    rates = [2.5e9 / (t * 1e-9) for t in times]
    mean = sum(rates) / 3
    assert row["flop_per_s"] == pytest.approx(mean)
    half = stats.t.ppf(0.975, 2) * stats.tstd(rates) / math.sqrt(3)
    assert row["flop_per_s_ci"] == pytest.approx(half, rel=1e-6)
    assert row["NumRuns"] == 3 and row["Precision"] == "fp32" and row["bound"] == "memory"


def test_one_row_per_kernel_of_a_region_by_launch_order():
    rows = roofline_rows(ncu_runs([1e6, 1e6], kernels=("gemm", "splitk_reduce"), configs=2))
    assert [(r["Config"], r["Seq"], r["Kernel"]) for r in rows] == [
        (0, 0, "gemm"),
        (0, 1, "splitk_reduce"),
        (1, 0, "gemm"),
        (1, 1, "splitk_reduce"),
    ]


def plan(backend="ncu"):
    return PlanInfo(
        function="mm",
        params=("n",),
        configs=((512,), (1024,)),
        runs=2,
        warmup=0,
        metrics=ROOFLINE_METRICS,
        backend=backend,
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
    )


def test_results_roofline_table_and_png(tmp_path):
    res = build_results(plan(), ncu_runs([1e6, 1.2e6], configs=2), {})
    table = res.roofline()
    assert list(table["n"]) == [512, 1024]
    mean_rate = (2.5e9 / 1e-3 + 2.5e9 / 1.2e-3) / 2  # the mean of the runs' fractions: the roof is the same
    assert table["RoofFraction"].iloc[0] == pytest.approx(mean_rate / 12e12)
    assert set(table["Bound"]) == {"memory"}
    out = res.plot_roofline(tmp_path / "img" / "roofline.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_plot_roofline_without_counters_says_what_to_measure(plugin_host, tmp_path):
    @nsightx.analyze.kernel(configs=[(1,)], runs=2, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def f(n):
        with nsightx.annotate("a"):
            pass

    res = f()
    assert res.roofline().empty
    with pytest.raises(ConfigError, match="ROOFLINE_METRICS"):
        res.plot_roofline(tmp_path / "r.png")
    assert nsightx.ROOFLINE_METRICS == ROOFLINE_METRICS
