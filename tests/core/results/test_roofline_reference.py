"""The roofline table against a naive reference written from docs/roofline.md, over random counter sets.

A result is built through the real code (``build_results``) from random configs, runs, annotations and kernels,
each kernel with a random subset of the counters of ``ROOFLINE_METRICS`` in random units (ns to s, byte to Mbyte,
hz to GHz and cycle/nsecond), times that are zero or NaN in some runs. The reference follows the column table of
docs/roofline.md one run at a time (FLOP of the precision with the most FLOP, FMA counting 2, the tensor peak
halved, roof = min(peak, intensity x bandwidth), a metric not measured leaving its columns NaN) and averages the
runs with the Student-t interval of the FLOP/s. Rows are matched by (Annotation, Config, Seq, Kernel).

Tolerances: a relative 1e-9; the interval's half-width also 1e-9 of the largest FLOP/s. A spread is known only to
the rounding of the values it is taken over: one duration written in two units (0.033 ms and 33.00000000000001 us)
is two durations 1.7e-16 apart, whose rates differ by about an ulp. Their exact half-width is about 1e-15 of the
rate (0.0162 FLOP/s at 1.5e13 FLOP/s; the library's float arithmetic gives 0.0248), while this reference's own
``t * 1e-6`` rounded both to 3.3e-05 s and gave 0: a relative tolerance of a half-width near 0 compared rounding
with rounding.

Where the docs are silent the reference does not guess and the column is not compared: the roof of a point
without DRAM traffic measured (or with none), the precision (and what follows from it) of a kernel two of whose
precisions tie for the most FLOP, and the mean of a column some of whose runs are NaN (each kernel
here has the same counters in every run, so only a zero FLOP count makes such a mix).
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

import scipy.stats
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

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
)
from nsightx._results.schema import PlanInfo

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "50"))
"""Examples per property (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""

SECONDS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1.0, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
HERTZ = {"hz": 1.0, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9, "cycle/nsecond": 1e9, "cycle/usecond": 1e6, "cycle/second": 1}
OPS = {"fp64": ("dadd", "dmul", "dfma"), "fp32": ("fadd", "fmul", "ffma"), "fp16": ("hadd", "hmul", "hfma")}
TENSOR = ("tensor_fp16", "tensor_bf16", "tensor_fp64")
PEAKS = ("sm", "dram_peak", "dram_clock", *(f"{p}_peak" for p in (*OPS, *TENSOR, "tensor")))
TIED = ("Precision", "FLOP", "FLOPPerSecond", "ArithmeticIntensity", "PeakFLOPPerSecond", "RoofFLOPPerSecond")
TIED += ("RoofFraction",)
"""The columns that follow the precision a row is placed by."""
COUNTS = st.sampled_from([0.0, 1.0, 3e5, 2.5e8, 1e9, 7.7e10])


@dataclass
class Shape:
    """What a random ncu-like result holds."""

    configs: int
    runs: int
    # (annotation, config, seq, kernel) -> run -> metric -> (value, unit)
    kernels: dict[tuple[str, int, int, str], dict[int, dict[str, tuple[float, str]]]] = field(default_factory=dict)


def _counter_set(draw: Any) -> list[str]:
    """The counters one kernel has in every run (besides its time)."""
    names: list[str] = []
    for ops in OPS.values():
        if draw(st.booleans()):
            names += [inst_metric(op) for op in ops if draw(st.booleans())]
        if draw(st.booleans()):
            names.append(f"{inst_metric(ops[2])}.peak_sustained")
    for precision in TENSOR:
        if draw(st.integers(0, 3)) == 0:
            names.append(TENSOR_OPS[precision])
        if draw(st.integers(0, 2)) == 0:
            names.append(f"{TENSOR_OPS[precision]}.peak_sustained")
    if draw(st.integers(0, 4)) == 0:
        names += [TENSOR_INST, TENSOR_PEAK]
    names += [m for m in (DRAM_BYTES, DRAM_PEAK, DRAM_CLOCK, SM_CLOCK) if draw(st.integers(0, 4))]
    return names


def _value(draw: Any, name: str) -> tuple[float, str]:
    if name == TIME:
        unit = draw(st.sampled_from(sorted(SECONDS)))
        pick = draw(st.integers(0, 9))
        secs = 0.0 if pick == 0 else math.nan if pick == 1 else draw(st.sampled_from([1e-6, 3.3e-5, 1e-3, 0.25]))
        return secs / SECONDS[unit], unit
    if name == DRAM_BYTES:
        unit = draw(st.sampled_from(sorted(BYTES)))
        return draw(COUNTS) / BYTES[unit], unit
    if name in (SM_CLOCK, DRAM_CLOCK):
        unit = draw(st.sampled_from(sorted(HERTZ)))
        return draw(st.sampled_from([1.98e9, 1.41e9, 3.2e9])) / HERTZ[unit], unit
    if name.endswith(".peak_sustained"):
        return draw(st.sampled_from([64.0, 1500.0, 16896.0, 540672.0])), "inst/cycle"
    return draw(COUNTS), "inst"


@st.composite
def shapes(draw: Any) -> Shape:
    """Random configs, runs, annotations and kernels with counters."""
    shape = Shape(configs=draw(st.integers(1, 3)), runs=draw(st.integers(1, 4)))
    for ann in ("mm", "add")[: draw(st.integers(1, 2))]:
        kernels = ("gemm", "splitk", "gemm")[: draw(st.integers(1, 3))]
        for c in range(shape.configs):
            for seq, kernel in enumerate(kernels):
                names = [TIME, *_counter_set(draw)]
                shape.kernels[(ann, c, seq, kernel)] = {
                    r: {n: _value(draw, n) for n in names} for r in range(shape.runs)
                }
    return shape


def build(shape: Shape) -> Any:
    """The result, through ``build_results`` as an ncu call makes it."""
    plan = PlanInfo(
        function="f",
        params=("n",),
        configs=tuple((64 * (c + 1),) for c in range(shape.configs)),
        runs=shape.runs,
        warmup=0,
        metrics=ROOFLINE_METRICS,
        backend="ncu",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
        combine_kernel_metrics="sum",
    )
    runs = []
    for c in range(shape.configs):
        for r in range(shape.runs):
            recs = [
                Record(annotation=a, config=c, run=r, kernel=k, metric=m, value=v, unit=u, seq=s)
                for (a, cc, s, k), by_run in shape.kernels.items()
                if cc == c
                for m, (v, u) in by_run[r].items()
            ]
            regions = tuple(
                RegionRun(annotation=a, config=c, run=r, host_ns=1000)
                for a in dict.fromkeys(k[0] for k in shape.kernels)
            )
            runs.append(RunRecords(config=c, run=r, records=tuple(recs), regions=regions))
    return build_results(plan, runs, {}, combine=lambda a, b: a + b)


def _get(values: dict[str, tuple[float, str]], name: str) -> float:
    return values[name][0] if name in values else math.nan


def _hz(values: dict[str, tuple[float, str]], name: str) -> float:
    return values[name][0] * HERTZ[values[name][1]] if name in values else math.nan


def flops(values: dict[str, tuple[float, str]]) -> dict[str, float]:
    """FLOP per precision (docs: add + mul + 2 fma, a missing one counting 0; tensor counters as they are)."""
    out = {}
    for precision, (add, mul, fma) in OPS.items():
        names = [inst_metric(op) for op in (add, mul, fma)]
        if any(n in values for n in names):
            a, m, f = (values[n][0] if n in values else 0.0 for n in names)
            out[precision] = a + m + 2 * f
    for precision in TENSOR:
        if TENSOR_OPS[precision] in values:
            out[precision] = values[TENSOR_OPS[precision]][0]
    if TENSOR_INST in values and not any(p in out for p in TENSOR):
        out["tensor"] = values[TENSOR_INST][0] * 512
    return out


def peak(values: dict[str, tuple[float, str]], precision: str) -> float:
    """Peak FLOP/s of the precision on the measured SM clock (docs/roofline.md, ``PeakFLOPPerSecond``)."""
    hz = _hz(values, SM_CLOCK)
    if precision in OPS:
        return 2 * _get(values, f"{inst_metric(OPS[precision][2])}.peak_sustained") * hz
    if precision in TENSOR:
        half = 1.0 if precision == "tensor_fp64" else 2.0
        return _get(values, f"{TENSOR_OPS[precision]}.peak_sustained") / half * hz
    if precision == "tensor":
        return _get(values, TENSOR_PEAK) * 512 * hz
    return math.nan


def point(values: dict[str, tuple[float, str]], precision: str) -> dict[str, float] | None:
    """One run's roofline numbers, or None without a positive time."""
    t, unit = values[TIME]
    if not t > 0:
        return None
    secs = t * SECONDS[unit]
    flop = flops(values).get(precision, 0.0) if precision != "none" else math.nan
    nbytes = values[DRAM_BYTES][0] * BYTES[values[DRAM_BYTES][1]] if DRAM_BYTES in values else math.nan
    intensity = flop / nbytes if nbytes > 0 else math.nan
    peak_f = peak(values, precision)
    peak_b = _get(values, DRAM_PEAK) * _hz(values, DRAM_CLOCK)
    roof = min(peak_f, intensity * peak_b) if not any(map(math.isnan, (peak_f, intensity, peak_b))) else math.nan
    return {
        "FLOP": flop,
        "Seconds": secs,
        "DRAMBytes": nbytes,
        "FLOPPerSecond": flop / secs,
        "BytesPerSecond": nbytes / secs,
        "ArithmeticIntensity": intensity,
        "PeakFLOPPerSecond": peak_f,
        "PeakBytesPerSecond": peak_b,
        "RoofFLOPPerSecond": roof if math.isfinite(intensity) else math.nan,
        "RoofFraction": (flop / secs) / roof if roof > 0 else math.nan,
        "silent_roof": not math.isfinite(intensity),  # no traffic: the docs do not say the roof
    }


def reference(shape: Shape) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per (annotation, config, seq, kernel): the documented row, or nothing without a timed run."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, by_run in shape.kernels.items():
        totals: dict[str, float] = {}
        for values in by_run.values():
            for p, f in flops(values).items():
                totals[p] = totals.get(p, 0.0) + f
        precision = max(totals, key=lambda p: totals[p]) if totals and max(totals.values()) > 0 else "none"
        points = [pt for v in by_run.values() if (pt := point(v, precision)) is not None]
        if not points or len(by_run[0]) == 1:  # no timed run, or a time and no counter
            continue
        row: dict[str, Any] = {"Precision": precision, "NumRuns": len(points)}
        for col in points[0]:
            got = [p[col] for p in points]
            nan = [math.isnan(g) for g in got]
            row[col] = math.nan if all(nan) else statistics.fmean(got) if not any(nan) else None
        rates = [p["FLOPPerSecond"] for p in points]
        row["_rate_size"] = max((abs(x) for x in rates if math.isfinite(x)), default=0.0)
        row["FLOPPerSecond_CI95"] = (
            scipy.stats.t.ppf(0.975, len(rates) - 1) * statistics.stdev(rates) / math.sqrt(len(rates))
            if len(rates) >= 2 and all(math.isfinite(x) for x in rates)
            else math.nan
        )
        if any(p["silent_roof"] for p in points):
            row["RoofFLOPPerSecond"] = row["RoofFraction"] = None
        ai, pf, pb = (row[c] for c in ("ArithmeticIntensity", "PeakFLOPPerSecond", "PeakBytesPerSecond"))
        known = all(x is not None and math.isfinite(x) for x in (ai, pf, pb)) and pb > 0
        row["Bound"] = ("memory" if ai < pf / pb else "compute") if known else "unknown"
        if any(x is None for x in (ai, pf, pb)):
            row["Bound"] = None
        del row["silent_roof"]
        if precision != "none" and sum(t == totals[precision] for t in totals.values()) > 1:
            for col in (*TIED, "FLOPPerSecond_CI95", "Bound"):
                row[col] = None  # a tie of the most FLOP: the docs do not say which precision places it
        out[key] = row
    return out


def same(got: Any, want: Any, abs_tol: float = 0.0) -> bool:
    if isinstance(want, str):
        return bool(got == want)
    if math.isnan(want):
        return math.isnan(got)
    return bool(got == want or math.isclose(got, want, rel_tol=1e-9, abs_tol=abs_tol))


def check(shape: Shape) -> None:
    table = build(shape).roofline()
    want = reference(shape)
    got = {(r["Annotation"], int(r["n"]) // 64 - 1, int(r["Seq"]), r["Kernel"]): r for r in table.to_dict("records")}
    assert sorted(got) == sorted(want)
    for key, row in want.items():
        spread_tol = 1e-9 * row.pop("_rate_size")  # the module docstring: a spread is known to its values' rounding
        for col, value in row.items():
            if value is None:
                continue  # the docs do not say
            tol = spread_tol if col == "FLOPPerSecond_CI95" else 0.0
            assert same(got[key][col], value, tol), (key, col, got[key][col], value)


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(shape=shapes())
@example(  # a random draw: 33 us as 0.033 ms and as 33.00000000000001 us, a half-width of 0.0248 against 0
    shape=Shape(
        configs=1,
        runs=2,
        kernels={
            ("mm", 0, 0, "gemm"): {
                0: {TIME: (3.3e-5 / 1e-3, "ms"), inst_metric("ffma"): (2.5e8, "inst")},
                1: {TIME: (3.3e-5 / 1e-6, "us"), inst_metric("ffma"): (2.5e8, "inst")},
            }
        },
    )
)
def test_roofline_matches_the_naive_reference(shape: Shape) -> None:
    check(shape)
