"""Roofline arithmetic from Nsight Compute counters: achieved FLOP/s, bytes/s, intensity and the fraction of the roof.

Every number comes from the counters ncu measured on the kernel and on the device it ran on, the way ncu's own
``SpeedOfLight_RooflineChart`` section computes its chart; nothing comes from a table of GPUs:

- **Work.** Per precision, the predicated-on SASS thread instructions ``sm__sass_thread_inst_executed_op_<op>
  _pred_on.sum`` of its add, multiply and fused multiply-add (``d*``: fp64, ``f*``: fp32, ``h*``: fp16); an FMA
  counts 2 FLOP. Tensor-core work per input type is the ``sm__ops_path_tensor_src_<type>`` counter of
  :data:`TENSOR_OPS` (``mma`` and Hopper's ``wgmma`` alike, already in FLOP: on the H200 it reads exactly 2n^3
  for fp16, bf16 and tf32 cuBLAS matmuls, ``98c9cf0:benchmarks/tensor_flops_probe.py``). Data measured with only
  ``sm__inst_executed_pipe_tensor.sum`` falls back to that count times :data:`TENSOR_FLOP_PER_INST` as precision
  ``tensor``, an approximation (it read 1/43 to 1/128 of the real work for Hopper ``nvjet`` kernels).
- **Traffic.** ``dram__bytes.sum``: bytes read from and written to device memory.
- **Time.** ``gpu__time_duration.sum``.
- **Peaks.** Peak FLOP/s = 2 x ``sm__sass_thread_inst_executed_op_<fma>_pred_on.sum.peak_sustained`` (instructions
  per cycle) x ``sm__cycles_elapsed.avg.per_second`` (the SM clock measured during the kernel); for a tensor
  precision, its counter's ``.peak_sustained`` (FLOP per cycle) over :data:`TENSOR_SPARSE_FACTOR` (that peak is the
  2:4 structured-sparse rate, twice the dense one) x the SM clock; peak bandwidth =
  ``dram__bytes.sum.peak_sustained`` (bytes per cycle) x ``dram__cycles_elapsed.avg.per_second``.

Then, for a point: FLOP/s = FLOP / time, bytes/s = bytes / time, arithmetic intensity AI = FLOP / byte, the roof
at AI is min(peak FLOP/s, AI x peak bandwidth), and the fraction of the roof is FLOP/s over that. A kernel is
``memory`` bound when AI is left of the ridge point (peak FLOP/s / peak bandwidth), else ``compute`` bound.

One point per (annotation, config, kernel): the region's kernels are told apart by their launch order and name;
values are averaged over the runs, with a 95% Student-t interval of the achieved FLOP/s where there are 2 runs or
more. Pure functions over records; pandas only where :func:`roofline_frame` builds the table.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsightx._results.stats import ci_half_width
from nsightx._units import nanoseconds_in, prefix_factor

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.records import RunRecords

TIME = "gpu__time_duration.sum"
DRAM_BYTES = "dram__bytes.sum"
DRAM_PEAK = "dram__bytes.sum.peak_sustained"
DRAM_CLOCK = "dram__cycles_elapsed.avg.per_second"
SM_CLOCK = "sm__cycles_elapsed.avg.per_second"
TENSOR_INST = "sm__inst_executed_pipe_tensor.sum"
TENSOR_PEAK = "sm__inst_executed_pipe_tensor.sum.peak_sustained"
TENSOR_FLOP_PER_INST = 512.0
"""FLOP per tensor-pipe instruction, ncu's factor: only for data that has no :data:`TENSOR_OPS` counter."""

TENSOR_OPS: Mapping[str, str] = {
    "tensor_fp64": "sm__ops_path_tensor_src_fp64.sum",
    "tensor_tf32": "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "tensor_fp16": "sm__ops_path_tensor_src_fp16.sum",
    "tensor_bf16": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "tensor_fp8": "sm__ops_path_tensor_src_fp8.sum",
}
"""Tensor precision -> the counter of its tensor-core FLOP by input type (names as ncu 2025.3 gives them on sm90)."""

TENSOR_SPARSE_FACTOR: Mapping[str, float] = {"tensor_fp64": 1.0} | {
    p: 2.0 for p in ("tensor_tf32", "tensor_fp16", "tensor_bf16", "tensor_fp8")
}
"""How many times the dense rate a :data:`TENSOR_OPS` counter's ``.peak_sustained`` is. On the H200 the fp16 one
reads 8192 FLOP/cycle/SM against 4096 for its ``_sparsity_off`` sub-path (fp8 16384 against 8192; fp64 has no
sparse mode): the roof of a dense kernel is the dense rate."""

PRECISION_OPS: Mapping[str, tuple[str, str, str]] = {
    "fp64": ("dadd", "dmul", "dfma"),
    "fp32": ("fadd", "fmul", "ffma"),
    "fp16": ("hadd", "hmul", "hfma"),
}
"""Precision -> its (add, multiply, fused multiply-add) SASS opcodes."""


def inst_metric(op: str) -> str:
    """The counter of predicated-on thread instructions of one SASS opcode (``ffma`` -> ``sm__sass_..._ffma_...``)."""
    return f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"


ROOFLINE_METRICS: tuple[str, ...] = (
    TIME,
    DRAM_BYTES,
    DRAM_PEAK,
    DRAM_CLOCK,
    SM_CLOCK,
    *(inst_metric(op) for ops in PRECISION_OPS.values() for op in ops),
    *(f"{inst_metric(ops[2])}.peak_sustained" for ops in PRECISION_OPS.values()),
    *TENSOR_OPS.values(),
    *(f"{m}.peak_sustained" for m in TENSOR_OPS.values()),
)
"""The metrics to ask ncu for (``metrics=ROOFLINE_METRICS``) so that every roofline column can be computed."""

Value = tuple[float, str | None]
"""A metric value with its unit, as a record holds it."""


@dataclass(frozen=True)
class RooflinePoint:
    """The roofline numbers of one kernel (means over runs for the row form)."""

    precision: str
    """The precision with the most FLOP (``fp64``, ``fp32``, ``fp16``, a :data:`TENSOR_OPS` key, or ``tensor`` for the
    approximate instruction count); ``none`` without any FLOP."""
    flop: float
    """FLOP of that precision."""
    seconds: float
    """Kernel time, s."""
    dram_bytes: float
    """Device-memory bytes moved."""
    flop_per_s: float
    """Achieved FLOP/s."""
    bytes_per_s: float
    """Achieved device-memory bandwidth, bytes/s."""
    intensity: float
    """Arithmetic intensity, FLOP per DRAM byte (NaN without traffic)."""
    peak_flop_per_s: float
    """Peak FLOP/s of the precision on the measured SM clock (NaN when ncu did not give its peak)."""
    peak_bytes_per_s: float
    """Peak device-memory bandwidth on the measured DRAM clock."""
    roof_flop_per_s: float
    """The roof at this intensity: min(peak FLOP/s, intensity x peak bandwidth)."""
    roof_fraction: float
    """Achieved FLOP/s over the roof (0..1)."""
    bound: str
    """``memory`` (left of the ridge point), ``compute`` (right of it) or ``unknown``."""


def per_second(value: float, unit: str | None) -> float:
    """A rate in 1/s from a ``Hz``-family unit (``GHz``; ncu's ``Ghz``) or ``<thing>/<duration unit>``.

    ``cycle/nsecond`` is ``value`` x 1e9. Units are read as :mod:`nsightx._units` knows them; any other unit gives
    NaN rather than a guess, and ``Hz`` is assumed only when no unit is given.
    """
    u = (unit or "Hz").strip()
    if u[-2:].lower() == "hz":  # ncu writes Ghz, Mhz; the units module, Hz
        factor = prefix_factor(u[:-2] + "Hz", "Hz")
        return math.nan if factor is None else value * factor
    ns = nanoseconds_in(u.rsplit("/", 1)[1]) if "/" in u else None
    return math.nan if ns is None else value * 1e9 / ns


def seconds(value: float, unit: str | None) -> float:
    """A duration in seconds; ns when no unit is given, NaN for a unit of no duration (not a guess).

    The duration units are those of :mod:`nsightx._units`: ``ns``/``nsecond``, ``us``/``usecond``,
    ``ms``/``msecond``, ``s``/``second``.

    One division by the unit's count per second (``1e9 / ns``: 1e9, 1e6, 1e3 or 1, each a float exactly), so the
    result is the exact quotient rounded once: ``value * ns / 1e9`` rounded twice, and moved a quarter of the
    values given in ``us`` or ``ms`` (and some in ``s``) by an ulp, and one duration written in two units apart.
    """
    ns = nanoseconds_in((unit or "ns").strip())
    return math.nan if ns is None else value / (1e9 / ns)


def byte_count(value: float, unit: str | None) -> float:
    """A byte count in bytes; bytes when no unit is given, NaN for a unit of no byte count (not a guess).

    The byte units are those of :mod:`nsightx._units`: ``B``, ``byte`` or ``bytes`` after a decimal prefix or
    none (``kB``, ``KB``, ``Kbyte``, ``MB``, ``Mbyte``, ``GB``, ...).
    """
    factor = prefix_factor((unit or "byte").strip(), "B")
    return math.nan if factor is None else value * factor


def _get(values: Mapping[str, Value], name: str) -> float:
    got = values.get(name)
    return float(got[0]) if got is not None and math.isfinite(got[0]) else math.nan


def flops_by_precision(values: Mapping[str, Value]) -> dict[str, float]:
    """FLOP per precision from the instruction counters present (an FMA is 2 FLOP; missing counters count 0)."""
    out: dict[str, float] = {}
    for precision, (add, mul, fma) in PRECISION_OPS.items():
        counts = [_get(values, inst_metric(op)) for op in (add, mul, fma)]
        if all(math.isnan(c) for c in counts):
            continue
        a, m, f = (0.0 if math.isnan(c) else c for c in counts)
        out[precision] = a + m + 2.0 * f
    for precision, name in TENSOR_OPS.items():
        if not math.isnan(ops := _get(values, name)):
            out[precision] = ops
    tensor = _get(values, TENSOR_INST)
    if not math.isnan(tensor) and not any(p in out for p in TENSOR_OPS):
        out["tensor"] = tensor * TENSOR_FLOP_PER_INST
    return out


def peak_flops(values: Mapping[str, Value], precision: str) -> float:
    """Peak FLOP/s of ``precision`` on the SM clock measured during the kernel (NaN when a counter is missing)."""
    clock = values.get(SM_CLOCK)
    if clock is None:
        return math.nan
    hz = per_second(clock[0], clock[1])
    if precision == "tensor":
        return _get(values, TENSOR_PEAK) * TENSOR_FLOP_PER_INST * hz
    if precision in TENSOR_OPS:
        return _get(values, f"{TENSOR_OPS[precision]}.peak_sustained") / TENSOR_SPARSE_FACTOR[precision] * hz
    ops = PRECISION_OPS.get(precision)
    if ops is None:
        return math.nan
    return 2.0 * _get(values, f"{inst_metric(ops[2])}.peak_sustained") * hz


def peak_bandwidth(values: Mapping[str, Value]) -> float:
    """Peak device-memory bandwidth, bytes/s, on the DRAM clock measured during the kernel."""
    clock = values.get(DRAM_CLOCK)
    if clock is None:
        return math.nan
    return _get(values, DRAM_PEAK) * per_second(clock[0], clock[1])


def roofline_point(values: Mapping[str, Value], precision: str | None = None) -> RooflinePoint | None:
    """The roofline numbers of one kernel execution from its metric values; ``None`` without a time.

    Args:
        values: Metric name -> (value, unit) of one kernel in one run.
        precision: The precision to place it by; ``None``: the one with the most FLOP.
    """
    time = values.get(TIME)
    if time is None or not time[0] > 0:
        return None
    secs = seconds(time[0], time[1])
    flops = flops_by_precision(values)
    if precision is None:
        precision = max(flops, key=lambda p: flops[p]) if flops and max(flops.values()) > 0 else "none"
    flop = flops.get(precision, math.nan if precision == "none" else 0.0)
    dram = values.get(DRAM_BYTES)
    nbytes = byte_count(dram[0], dram[1]) if dram is not None else math.nan
    intensity = flop / nbytes if nbytes > 0 else math.nan
    peak_f, peak_b = peak_flops(values, precision), peak_bandwidth(values)
    roof = _roof(peak_f, intensity, peak_b)
    return RooflinePoint(
        precision=precision,
        flop=flop,
        seconds=secs,
        dram_bytes=nbytes,
        flop_per_s=flop / secs,
        bytes_per_s=nbytes / secs,
        intensity=intensity,
        peak_flop_per_s=peak_f,
        peak_bytes_per_s=peak_b,
        roof_flop_per_s=roof,
        roof_fraction=(flop / secs) / roof if roof > 0 else math.nan,
        bound=_bound(intensity, peak_f, peak_b),
    )


def _roof(peak_f: float, intensity: float, peak_b: float) -> float:
    """min(peak FLOP/s, intensity x peak bandwidth); NaN when a peak of it was not measured.

    Python's ``min`` keeps its first argument against a NaN: without a DRAM peak the roof would be the compute peak
    and a memory-bound kernel's fraction of it far off (above 1). Without traffic (no intensity) it is the peak.
    """
    if not math.isfinite(intensity):
        return peak_f
    slope = intensity * peak_b
    return math.nan if math.isnan(peak_f) or math.isnan(slope) else min(peak_f, slope)


KernelKey = tuple[str, int, int, str]
"""(annotation, config, launch order in the region, kernel name)."""


def kernel_values(runs: Iterable[RunRecords]) -> dict[KernelKey, dict[int, dict[str, Value]]]:
    """Records grouped by kernel and run: (annotation, config, seq, kernel) -> run -> metric -> (value, unit)."""
    out: dict[KernelKey, dict[int, dict[str, Value]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        for rec in run.records:
            out[(rec.annotation, rec.config, rec.seq, rec.kernel)][rec.run][rec.metric] = (rec.value, rec.unit)
    return out


_ROW_FIELDS: tuple[str, ...] = ("flop", "seconds", "dram_bytes", "flop_per_s", "bytes_per_s", "intensity")
_ROW_FIELDS += ("peak_flop_per_s", "peak_bytes_per_s", "roof_flop_per_s", "roof_fraction")


def roofline_rows(runs: Sequence[RunRecords]) -> list[dict[str, object]]:
    """One row per (annotation, config, kernel) that has a time: means of every run's point, and a FLOP/s CI.

    The precision of a row is the one with the most FLOP summed over its runs, so every run is placed the same way.
    """
    rows: list[dict[str, object]] = []
    for (ann, config, seq, kernel), by_run in kernel_values(runs).items():
        totals: dict[str, float] = defaultdict(float)
        for values in by_run.values():
            for name, f in flops_by_precision(values).items():
                totals[name] += f
        precision = max(totals, key=lambda k: totals[k]) if totals and max(totals.values()) > 0 else "none"
        counted = [v for v in by_run.values() if _has_counters(v)]  # a joined result: runs without counters
        points = [pt for v in counted if (pt := roofline_point(v, precision)) is not None]
        if not points:
            continue
        means = {name: _mean([getattr(p, name) for p in points]) for name in _ROW_FIELDS}
        rates = [p.flop_per_s for p in points if math.isfinite(p.flop_per_s)]
        half = ci_half_width(statistics.stdev(rates), len(rates)) if len(rates) >= 2 else math.nan
        bound = _bound(means["intensity"], means["peak_flop_per_s"], means["peak_bytes_per_s"])
        rows.append(
            {"Annotation": ann, "Config": config, "Seq": seq, "Kernel": kernel, "Precision": precision}
            | {"NumRuns": len(points), **means, "flop_per_s_ci": half, "bound": bound}
        )
    return rows


def _has_counters(values: Mapping[str, Value]) -> bool:
    """Whether a run of a kernel has any roofline counter beside its time."""
    return any(name != TIME and name in values for name in (*ROOFLINE_METRICS, TENSOR_INST))


def _bound(intensity: float, peak_flop_per_s: float, peak_bytes_per_s: float) -> str:
    """``memory`` left of the ridge point, ``compute`` right of it, ``unknown`` without the numbers."""
    if not (math.isfinite(intensity) and math.isfinite(peak_flop_per_s) and peak_bytes_per_s > 0):
        return "unknown"
    return "memory" if intensity < peak_flop_per_s / peak_bytes_per_s else "compute"


def _mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.fmean(finite) if finite else math.nan


COLUMNS: Mapping[str, str] = {
    "flop": "FLOP",
    "seconds": "Seconds",
    "dram_bytes": "DRAMBytes",
    "flop_per_s": "FLOPPerSecond",
    "flop_per_s_ci": "FLOPPerSecond_CI95",
    "bytes_per_s": "BytesPerSecond",
    "intensity": "ArithmeticIntensity",
    "peak_flop_per_s": "PeakFLOPPerSecond",
    "peak_bytes_per_s": "PeakBytesPerSecond",
    "roof_flop_per_s": "RoofFLOPPerSecond",
    "roof_fraction": "RoofFraction",
    "bound": "Bound",
}
"""Row field -> DataFrame column name."""


def roofline_frame(
    runs: Sequence[RunRecords], params: Sequence[str] = (), configs: Sequence[Sequence[object]] = ()
) -> pd.DataFrame:
    """The roofline table: one row per (annotation, config, kernel), parameter columns after ``Annotation``."""
    import pandas as pd

    rows = roofline_rows(runs)
    frame = pd.DataFrame(rows).rename(columns=dict(COLUMNS))
    if frame.empty:
        return pd.DataFrame(columns=["Annotation", *params, "Kernel", "Precision", *COLUMNS.values()])
    for i, p in enumerate(params):
        frame.insert(1 + i, p, [configs[c][i] if c < len(configs) else None for c in frame["Config"]])
    return frame
