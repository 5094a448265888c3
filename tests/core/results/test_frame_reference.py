"""The frames against a naive reference written from the docs, over random result shapes.

``to_dataframe()`` and ``runs_dataframe()`` take many fast paths (shared group statistics, text columns kept as
codes, small frames built without pandas, ...) that the recorded fixtures reach only in the shapes they hold.
Here a result is built through the real code (``build_results``, and the host backend) from random configs,
runs, annotations, kernels, failures, missing regions and collectors of every scope and value type, and each
frame is checked against a reference that follows docs/api.md ("The aggregated DataFrame") and docs/plugins.md
("Columns") one group at a time, with pandas' own Series statistics. Rows are matched by (Annotation, Metric,
parameters), so a value on another config's row fails. The interval, spread and stability columns follow
docs/api.md ("The interval of the mean", with SciPy's t quantile), the measured conditions docs/plugins.md
("Measured conditions in the result"), and the ``warm``, ``short``, ``few_runs``, ``throttled`` and ``unstable``
flags docs/flags.md.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._results.flags import row_flags
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo

TIME = "gpu__time_duration.sum"
METRICS = (TIME, "bytes")
ANNOTATIONS = ("gemm", "copy", "norm")
SCOPES = ("once", "config", "run", "annotation")
KINDS = ("int", "float", "mixed", "text", "bool", "numtext")
FAILED = "failed"
EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "50"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""


def doubled(*args: Any) -> tuple[float, str]:
    """A derived metric: twice the first metric (its rows come after the measured ones)."""
    return 2.0 * args[0], "ns"


@dataclass
class Shape:
    """What a random result holds, as the reference reads it."""

    configs: list[tuple[Any, ...]]
    params: tuple[str, ...]
    runs: int
    annotations: tuple[str, ...]
    metrics: tuple[str, ...]
    combine: bool
    derive: bool
    normalize: str | None = None
    cache_control: str = "all"
    # (ann, config, run) -> None (missing), "failed", or per kernel a dict metric -> value
    regions: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    # name -> (scope, {where: value})
    collectors: dict[str, tuple[str, dict[Any, Any]]] = field(default_factory=dict)
    # (ann, config, run) -> the region's host wall time and backend attributes (default 1000 + run, none)
    host_ns: dict[tuple[str, int, int], int] = field(default_factory=dict)
    attributes: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)
    serializes: bool = False


NUMBERS = st.sampled_from([1.0, 2.5, 3.0, 7.25, 1e6, 123.456, 0.001])
ODD = st.sampled_from([math.nan, math.inf, -math.inf])


SIGNED = st.sampled_from([0.0, -3.5, -1e6])
"""Values a derived metric may have: zero and negative ones take the interval's signed rule."""
CLOCKS = st.sampled_from([1980, 1980.0, 1755.5, 1410, 1200.0, None, math.nan])
REASONS = st.sampled_from(
    ["none", "gpu_idle", "applications_clocks_setting", "sw_power_cap", "gpu_idle|hw_slowdown", "", "none|gpu_idle"]
)
CONDITIONS = ("MeasuredSMClockMHz", "ClockEventReasons")
"""The run-scope values the throttling rule reads (docs/plugins.md, "Measured conditions in the result")."""


def _value(draw: Any) -> float:
    pick = draw(st.integers(0, 19))
    if pick == 0:
        return draw(ODD)
    return draw(SIGNED) if pick == 1 else draw(NUMBERS) * draw(st.integers(1, 50))


def _collector_value(draw: Any, kind: str) -> Any:
    if draw(st.integers(0, 7)) == 0:
        return None
    pick = {
        "int": st.integers(-5, 400),
        "float": st.one_of(st.floats(-1e3, 1e3), ODD) if draw(st.integers(0, 9)) == 0 else st.floats(-1e3, 1e3),
        "mixed": st.one_of(st.integers(0, 50), st.floats(0, 50)),
        "text": st.sampled_from(["none", "p0", "hot", "x"]),
        "bool": st.booleans(),
        "numtext": st.sampled_from(["1", "2.5", "7"]),
    }[kind]
    return draw(pick)


@st.composite
def shapes(draw: Any) -> Shape:
    """A random result's content, in the order a real loop writes it."""
    n_configs, n_params = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    params = ("n", "dtype", "tile")[:n_params]
    configs = [tuple([c * 64 + 1, f"t{c % 2}", c % 3][:n_params]) for c in range(n_configs)]
    shape = Shape(
        configs=configs,
        params=params,
        runs=draw(st.integers(1, 6)),
        annotations=ANNOTATIONS[: draw(st.integers(1, 3))],
        metrics=METRICS[: draw(st.integers(1, 2))],
        combine=draw(st.booleans()),
        derive=draw(st.booleans()),
    )
    shape.normalize = draw(st.sampled_from([None, None, *shape.annotations]))
    missing, failing = draw(st.integers(0, 3)), draw(st.integers(0, 3))  # how often: 0 never, else 1 in 12 / k
    for c in range(n_configs):
        for r in range(shape.runs):
            for ann in shape.annotations:
                if missing and draw(st.integers(0, 12 // missing)) == 0:
                    continue
                if failing and draw(st.integers(0, 12 // failing)) == 0:
                    shape.regions[(ann, c, r)] = FAILED
                    continue
                kernels = draw(st.integers(1, 2)) if shape.combine else 1
                shape.regions[(ann, c, r)] = [{m: _value(draw) for m in shape.metrics} for _ in range(kernels)]
    for i in range(draw(st.integers(0, 4))):
        scope, kind = draw(st.sampled_from(SCOPES)), draw(st.sampled_from(KINDS))
        name = f"C{i}{scope[:3]}{kind}"
        if scope == "once":
            where: list[Any] = [None]
        elif scope == "config":
            where = list(range(n_configs))
        elif scope == "run":
            where = [(c, r) for c in range(n_configs) for r in range(shape.runs)]
        else:
            where = [(c, r, a) for c in range(n_configs) for r in range(shape.runs) for a in shape.annotations]
        shape.collectors[name] = (scope, {w: _collector_value(draw, kind) for w in where})
    runs = [(c, r) for c in range(n_configs) for r in range(shape.runs)]
    for name, pick in zip(CONDITIONS, (CLOCKS, REASONS), strict=True):
        if draw(st.booleans()):
            shape.collectors[name] = ("run", {w: None if draw(st.integers(0, 9)) == 0 else draw(pick) for w in runs})
    shape.cache_control = draw(st.sampled_from(["all", "none"]))
    _draw_region_evidence(draw, shape)
    return shape


HOST_NS = st.sampled_from([1, 900, 5000, 120_000, 10**8])
GPU_NS = st.sampled_from([1, 900, 5000, 120_000, 0, -5, math.nan, True])
"""A backend's ``device_ns``/``span_ns``: a time, or one that is none (0, negative, NaN, a bool)."""
ATTRIBUTES = ("launch_bound", "device_ns", "span_ns", "kernel_count", "launch_ns")


def _draw_region_evidence(draw: Any, shape: Shape) -> None:
    """Per region execution: its host time and some of the attributes a backend records (docs/flags.md)."""
    shape.serializes = draw(st.booleans())
    if not draw(st.booleans()):
        return  # the common host-backend shape: no attribute, host time 1000 + run
    picks = {
        "launch_bound": st.booleans(),
        "device_ns": GPU_NS,
        "span_ns": GPU_NS,
        "kernel_count": st.sampled_from([0, 1, 2, 3, True, 2.0]),
        "launch_ns": HOST_NS,
    }
    names = [n for n in ATTRIBUTES if draw(st.booleans())]
    for key in shape.regions:
        shape.host_ns[key] = draw(HOST_NS)
        shape.attributes[key] = {n: draw(picks[n]) for n in names if draw(st.integers(0, 3))}


def _collector_values(shape: Shape, c: int, r: int) -> tuple[CollectorValue, ...]:
    out = []
    for name, (scope, values) in shape.collectors.items():
        if scope == "once":
            out.append(CollectorValue(name=name, scope=scope, value=values[None]))
        elif scope == "config":
            out.append(CollectorValue(name=name, scope=scope, config=c, value=values[c]))
        elif scope == "run":
            out.append(CollectorValue(name=name, scope=scope, config=c, run=r, value=values[(c, r)]))
        else:
            out.extend(
                CollectorValue(name=name, scope=scope, config=c, run=r, annotation=a, value=values[(c, r, a)])
                for a in shape.annotations
                if (a, c, r) in shape.regions
            )
    return tuple(out)


def _run(shape: Shape, c: int, r: int) -> RunRecords:
    records: list[Record] = []
    regions: list[RegionRun] = []
    for ann in shape.annotations:
        got = shape.regions.get((ann, c, r))
        if got is None:
            continue
        host = shape.host_ns.get((ann, c, r), 1000 + r)
        attrs = shape.attributes.get((ann, c, r), {})
        regions.append(RegionRun(annotation=ann, config=c, run=r, host_ns=host, failed=got == FAILED, attributes=attrs))
        for k, values in enumerate([] if got == FAILED else got):
            for m, v in values.items():
                unit = "ns" if m == TIME else "byte"
                records.append(
                    Record(annotation=ann, config=c, run=r, kernel=f"k{ann}{k}", metric=m, value=v, unit=unit, seq=k)
                )
    return RunRecords(
        config=c, run=r, records=tuple(records), regions=tuple(regions), collectors=_collector_values(shape, c, r)
    )


def build(shape: Shape) -> ProfileResults:
    """The result of ``shape`` through ``build_results``."""
    plan = PlanInfo(
        function="bench",
        params=shape.params,
        configs=tuple(shape.configs),
        runs=shape.runs,
        warmup=0,
        metrics=shape.metrics,
        backend="cupti",
        cache_control=shape.cache_control,
        clock_control="none",
        replay_mode="kernel",
        combine_kernel_metrics="sum" if shape.combine else None,
        derive_metric="doubled" if shape.derive else None,
        normalize_against=shape.normalize,
    )
    runs = [_run(shape, c, r) for c in range(len(shape.configs)) for r in range(shape.runs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a NaN derived value has no unit
        return build_results(
            plan,
            runs,
            {"GPU": "x", "SerializesKernels": True} if shape.serializes else {"GPU": "x"},
            combine=(lambda a, b: a + b) if shape.combine else None,
            derive_metric=doubled if shape.derive else None,
            created="2026-12-06T00:00:00+00:00",
        )


# --- the reference ------------------------------------------------------------------------------------------


def per_run_values(shape: Shape) -> dict[tuple[str, str, int], list[tuple[int, float, str]]]:
    """(annotation, metric, config) -> (run, value, kernel) in run order, from the shape alone."""
    out: dict[tuple[str, str, int], list[tuple[int, float, str]]] = {}
    for c in range(len(shape.configs)):
        for r in range(shape.runs):
            for ann in shape.annotations:
                got = shape.regions.get((ann, c, r))
                if got is None:
                    continue
                row: dict[str, tuple[float, str]] = {}
                for m in shape.metrics:
                    if got == FAILED:
                        row[m] = (math.nan, FAILED)
                    else:
                        row[m] = (sum(k[m] for k in got), "|".join(f"k{ann}{i}" for i in range(len(got))))
                if shape.derive:
                    t, kernel = row[shape.metrics[0]]
                    row["doubled"] = (math.nan if any(math.isnan(v) for v, _ in row.values()) else 2.0 * t, kernel)
                for m, (v, kernel) in row.items():
                    out.setdefault((ann, m, c), []).append((r, v, kernel))
    return out


def collector_at(shape: Shape, name: str, ann: str, c: int, r: int) -> Any:
    """The value a per-run row of (ann, c, r) shows for collector ``name`` (docs/plugins.md, Columns)."""
    scope, values = shape.collectors[name]
    key = {"once": None, "config": c, "run": (c, r), "annotation": (c, r, ann)}[scope]
    return values.get(key)


def _kernel(kernels: list[str]) -> str:
    """The most frequent kernel name of the group's successful runs (the first met on a tie); ``failed``."""
    counts = Counter(k for k in kernels if k != FAILED)
    if not counts:
        return FAILED
    best = max(counts.values())
    return next(k for k in kernels if counts.get(k) == best)


def reference(shape: Shape) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The aggregated frame's rows keyed by (Annotation, Metric, *params), from docs/api.md."""
    groups = per_run_values(shape)
    numeric = {}
    for name, (scope, _) in shape.collectors.items():  # a collector is numeric over its whole per-run column
        column = pd.Series(
            [collector_at(shape, name, a, c, r) for (a, _m, c), rows in groups.items() for r, _v, _k in rows],
            dtype=object,
        )
        converted = pd.to_numeric(column, errors="coerce")
        numeric[name] = scope != "once" and converted.notna().sum() == column.notna().sum() and converted.notna().any()
    out = {}
    throttled = throttled_runs(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf in a spread: NaN, as pandas says
        for (ann, metric, c), rows in groups.items():
            row = _reference_row(shape, ann, c, rows, numeric)
            _interval_columns(row, [v for _, v, _ in rows], [throttled.get((c, r)) for r, _, _ in rows])
            row["Unit"] = next((u for u in (run_unit(metric, v, k) for _, v, k in rows) if u is not None), None)
            measured = [throttled.get((c, r), False) for r, v, _ in rows if math.isfinite(v)]
            row[FLAGS] = _flags(shape, row, (ann, c, rows), measured)
            if throttled:
                row["ThrottledRuns"] = sum(bool(throttled[(c, r)]) for r, _, _ in rows)
            if "ClockEventReasons" in shape.collectors:
                row["ClockEventReasons"] = _reasons_union(shape, ann, c, rows)
            out[(ann, metric, *shape.configs[c])] = row
        if shape.normalize is not None:
            _normalized(out, shape)
        _geomean_column(out, shape)
    return out


SCALED = ("AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "CI95_Lower", "CI95_Upper")
FLAGS = "Flags"
KNOWN_FLAGS = frozenset(
    {"warm", "short", "few_runs", "throttled", "unstable", "launch_bound", "clock_varied", "serialized"}
)
"""The flags the reference states (docs/flags.md)."""
UNITS = {TIME: "ns", "bytes": "byte", "doubled": "ns"}


@dataclass(frozen=True)
class Flagged:
    """The flags the reference expects in a row's ``Flags`` cell, among those it ``judged``."""

    flags: frozenset[str]
    judged: frozenset[str]


def run_unit(metric: str, value: float, kernel: str) -> str | None:
    """A run's unit: its metric's, none for a failed region or a derived value not computed (a NaN input)."""
    if kernel == FAILED or (metric == "doubled" and math.isnan(value)):
        return None
    return UNITS[metric]


def mean_interval(values: list[float]) -> tuple[float, float]:
    """docs/api.md, "The interval of the mean": over the valid runs; NaN under 2 or with an infinite run."""
    runs = pd.Series([v for v in values if not math.isnan(v)], dtype="float64")
    n = len(runs)
    if n < 2 or not runs.map(math.isfinite).all():
        return math.nan, math.nan
    mean, std, low = runs.mean(), runs.std(ddof=1), runs.min()
    if low == runs.max():
        return low, low  # all runs equal: the mean itself
    t = float(scipy.stats.t.ppf(0.975, n - 1))
    t_low, t_high = mean - t * std / math.sqrt(n), mean + t * std / math.sqrt(n)
    if low <= 0:  # the Student-t interval, at 0 when no value is negative
        return (max(t_low, 0.0) if low == 0 else t_low), t_high
    floor = low * 0.025 ** (1 / n)
    if n < 5:  # LOGNORMAL_MIN_RUNS
        return max(t_low, floor), t_high
    logs = runs.map(math.log)
    m, v = logs.mean(), logs.var(ddof=1)
    reach = t * math.sqrt(v / n + v * v / (2 * (n - 1)))
    cox_low, cox_high = math.exp(m + v / 2 - reach), _exp(m + v / 2 + reach)
    return max(min(t_low, cox_low), floor), max(t_high, cox_high)


def _exp(x: float) -> float:
    return math.inf if x > 709 else math.exp(x)


def _interval_columns(row: dict[str, Any], values: list[float], throttled: list[bool | None]) -> None:
    """``CI95_Lower/Upper``, ``RelativeStdDevPct`` and ``StableMeasurement`` (docs/api.md, The aggregated DataFrame).

    The docs say RSD; as a percentage of the mean's size, NaN where not finite (the docs are silent on both).
    ``StableMeasurement``: false with a throttled run, else ``<NA>`` where the RSD is unknown (a single run),
    else RSD under 2 % with at least 5 valid runs.
    """
    row["CI95_Lower"], row["CI95_Upper"] = mean_interval(values)
    rsd = 100.0 * row["StdDev"] / abs(row["AvgValue"]) if row["AvgValue"] != 0 else math.nan
    row["RelativeStdDevPct"] = rsd if math.isfinite(rsd) else math.nan
    if any(throttled):
        row["StableMeasurement"] = False
    elif math.isnan(row["RelativeStdDevPct"]):
        row["StableMeasurement"] = None
    else:
        row["StableMeasurement"] = row["RelativeStdDevPct"] < 2.0 and row["NumRuns"] >= 5


def _names(reasons: Any) -> list[str]:
    """The reasons a ``ClockEventReasons`` value names (``|``-separated; ``none`` and empty names no reason)."""
    return [n for n in reasons.split("|") if n and n != "none"] if isinstance(reasons, str) else []


def throttled_runs(shape: Shape) -> dict[tuple[int, int], bool]:
    """docs/plugins.md: (config, run) -> throttled; empty without measured conditions.

    A run is throttled if a reason other than ``gpu_idle`` or ``applications_clocks_setting`` was active, or its SM
    clock is under 90 % of the median SM clock of all the call's runs (idle reads left out of both; a value that
    is no finite number is no clock).
    """
    if not any(name in shape.collectors for name in CONDITIONS):
        return {}
    runs = [(c, r) for c in range(len(shape.configs)) for r in range(shape.runs)]
    reasons = {w: _names(shape.collectors.get("ClockEventReasons", ("run", {}))[1].get(w)) for w in runs}
    idle = {w for w in runs if "gpu_idle" in reasons[w]}
    clocks = {}
    for w, value in shape.collectors.get("MeasuredSMClockMHz", ("run", {}))[1].items():
        if isinstance(value, int | float) and math.isfinite(value) and w not in idle:
            clocks[w] = float(value)
    limit = 0.9 * pd.Series(list(clocks.values()), dtype="float64").median() if clocks else math.nan
    named = {w: any(n not in ("gpu_idle", "applications_clocks_setting") for n in reasons[w]) for w in runs}
    return {w: named[w] or (w in clocks and clocks[w] < limit) for w in runs}


def _reasons_union(shape: Shape, ann: str, c: int, rows: list[tuple[int, float, str]]) -> str:
    """Every reason seen in the row's runs: sorted, ``|``-joined, ``none`` without any."""
    seen = {n for r, _, _ in rows for n in _names(collector_at(shape, "ClockEventReasons", ann, c, r))}
    return "|".join(sorted(seen)) if seen else "none"


def _flags(
    shape: Shape, row: dict[str, Any], where: tuple[str, int, list[tuple[int, float, str]]], throttled: list[bool]
) -> Flagged:
    """docs/flags.md's flags, before normalisation.

    ``short``, ``few_runs`` and ``unstable`` read the row's finite values, ``throttled`` the verdicts of the runs
    that have one (``throttled``): the docs say "the row's runs", the rules read those with a finite value, while
    ``ThrottledRuns`` counts every run. ``unstable`` is stated only where the row's interval is known (no
    infinite run): its farther end more than 2 % of the mean from the mean.
    """
    ann, c, rows = where
    finite = [v for _, v, _ in rows if math.isfinite(v)]
    mean = math.fsum(finite) / len(finite) if finite else math.nan
    flags = {"warm"} if shape.cache_control == "none" else set()
    if row["Unit"] == "ns" and mean < 5000.0:
        flags.add("short")
    if len(finite) < 5:
        flags.add("few_runs")
    if any(throttled):
        flags.add("throttled")
    unsaid = set()
    for name, verdict in _region_and_clock_flags(shape, ann, c, rows).items():
        if verdict is None:
            unsaid.add(name)
        elif verdict:
            flags.add(name)
    lower, upper = row["CI95_Lower"], row["CI95_Upper"]
    if math.isnan(lower):
        unsaid.add("unstable")
    elif mean != 0 and 100 * max(upper - mean, mean - lower) / abs(mean) > 2.0:
        flags.add("unstable")
    return Flagged(frozenset(flags), KNOWN_FLAGS - unsaid)


def _count(value: Any) -> float:
    """An attribute as a number; NaN for a bool or anything else (a bool is a verdict, not a count or a time)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _gpu_time(shape: Shape, ann: str, c: int, r: int) -> float:
    """docs/flags.md: ``device_ns`` or ``span_ns``, else the sum of the region's time records; NaN without one."""
    attrs = shape.attributes.get((ann, c, r), {})
    for name in ("device_ns", "span_ns"):
        if _count(attrs.get(name)) > 0:
            return _count(attrs[name])
    got = shape.regions.get((ann, c, r))
    times = [k[TIME] for k in got if math.isfinite(k[TIME])] if TIME in shape.metrics and got != FAILED else []
    return math.fsum(times) if times and math.fsum(times) > 0 else math.nan


def _launch_bound(shape: Shape, ann: str, c: int, with_failed: bool) -> bool:
    """docs/flags.md: in more than half of the region's judged runs the host time exceeds the GPU time."""
    verdicts = []
    for r in range(shape.runs):
        got = shape.regions.get((ann, c, r))
        if got is None or (got == FAILED and not with_failed):
            continue
        own = shape.attributes.get((ann, c, r), {}).get("launch_bound")
        gpu = _gpu_time(shape, ann, c, r)
        if isinstance(own, bool):
            verdicts.append(own)
        elif gpu > 0:
            verdicts.append(shape.host_ns.get((ann, c, r), 1000 + r) > gpu)
    return sum(verdicts) > len(verdicts) / 2 if verdicts else False


def _clock_varied(shape: Shape, ann: str, c: int, runs: list[int]) -> bool:
    """docs/flags.md: the runs' measured SM clocks (idle reads left out) span more than 3 % of their median."""
    clocks, reasons = (shape.collectors.get(n, ("run", {}))[1] for n in CONDITIONS)
    kept = []
    for r in runs:
        clock = _count(clocks.get((c, r)))
        if math.isfinite(clock) and "gpu_idle" not in _names(reasons.get((c, r))):
            kept.append(clock)
    if len(kept) < 2:
        return False
    median = pd.Series(kept, dtype="float64").median()
    return bool(median > 0 and (max(kept) - min(kept)) > 0.03 * median)


def _region_and_clock_flags(
    shape: Shape, ann: str, c: int, rows: list[tuple[int, float, str]]
) -> dict[str, bool | None]:
    """``serialized``, ``launch_bound`` and ``clock_varied``; None where the docs leave the verdict open.

    The docs do not say whether a failed region's run counts among "the row's runs" for ``launch_bound``, nor
    whether the runs of ``clock_varied`` are those with a finite value or all the row's: the verdict is stated only
    where both readings agree.
    """
    kernels = [
        _count(shape.attributes.get((ann, c, r), {}).get("kernel_count"))
        for r in range(shape.runs)
        if (ann, c, r) in shape.regions
    ]
    serialized = shape.serializes and any(k > 1 for k in kernels)
    bound = [not shape.serializes and _launch_bound(shape, ann, c, failed) for failed in (False, True)]
    varied = [
        _clock_varied(shape, ann, c, [r for r, v, _ in rows if every or math.isfinite(v)]) for every in (False, True)
    ]
    return {
        "serialized": serialized,
        "launch_bound": bound[0] if bound[0] == bound[1] else None,
        "clock_varied": varied[0] if varied[0] == varied[1] else None,
    }


class NoBaseline(Exception):
    """The reference's word that ``normalize_against`` names no baseline for some row."""


def _normalized(out: dict[tuple[Any, ...], dict[str, Any]], shape: Shape) -> None:
    """``normalize_against``: each value and spread divided by the baseline's mean of the same config and metric."""
    for (_ann, metric, *params), row in out.items():
        base = out.get((shape.normalize, metric, *params))
        if base is None:
            raise NoBaseline(shape.normalize, metric, params)
        row["NormalizationValue"] = base["AvgValue"]
        row["Unit"] = "ratio"
    for row in out.values():
        d = row["NormalizationValue"]
        for col in SCALED:
            row[col] = row[col] / (abs(d) if col == "StdDev" else d)
        if math.copysign(1.0, d) < 0:  # x -> x / d reverses the order (-0.0 too): min and max swap
            row["MinValue"], row["MaxValue"] = row["MaxValue"], row["MinValue"]
            row["CI95_Lower"], row["CI95_Upper"] = row["CI95_Upper"], row["CI95_Lower"]


def _geomean_column(out: dict[tuple[Any, ...], dict[str, Any]], shape: Shape) -> None:
    """``Geomean``: of ``AvgValue`` over the configs of the row's annotation and metric (finite, positive ones)."""
    for (ann, metric, *_), row in out.items():
        means = [r["AvgValue"] for (a, m, *_), r in out.items() if (a, m) == (ann, metric)]
        kept = [float(v) for v in means if math.isfinite(v) and v > 0]
        row["Geomean"] = math.exp(sum(map(math.log, kept)) / len(kept)) if kept else math.nan


def _reference_row(
    shape: Shape, ann: str, c: int, rows: list[tuple[int, float, str]], numeric: dict[str, bool]
) -> dict[str, Any]:
    """One group's row: its values' statistics, kernel and collector columns."""
    values = pd.Series([v for _, v, _ in rows], dtype="float64")
    row: dict[str, Any] = {
        "AvgValue": values.mean(),
        "MedianValue": values.median(),
        "StdDev": values.std(ddof=1),
        "MinValue": values.min(),
        "MaxValue": values.max(),
        "NumRuns": int(values.count()),
        "Kernel": _kernel([k for _, _, k in rows]),
    }
    for name in shape.collectors:
        seen = pd.Series([collector_at(shape, name, ann, c, r) for r, _, _ in rows], dtype=object)
        if numeric[name]:
            nums = pd.to_numeric(seen, errors="coerce").astype("float64")
            row[f"{name}_Avg"], row[f"{name}_Std"] = nums.mean(), nums.std(ddof=1)
            row[f"{name}_Min"], row[f"{name}_Max"] = nums.min(), nums.max()
        else:
            row[name] = next((v for v in seen if v is not None), None)
    return row


def same(got: Any, want: Any, scale: float = 0.0) -> bool:
    """Equal, NaN and None alike, numbers to a relative 1e-9 (or 1e-9 of ``scale``, the values' size)."""
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None or got is pd.NA or (isinstance(got, float) and math.isnan(got))
    if isinstance(want, str) or isinstance(got, str):
        return bool(got == want)
    if isinstance(want, bool) or isinstance(got, bool):  # pandas keeps a bool column's min and max as bools
        return bool(float(got) == float(want))
    if math.isinf(want) or math.isinf(float(got)):
        return bool(float(got) == want)
    floor = SUBNORMAL_SPREAD if scale else 1e-300
    return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=max(1e-9 * scale, floor))


SUBNORMAL_SPREAD = math.sqrt(sys.float_info.min)
"""A spread whose squared deviations fall below the smallest normal float (values near 1e-159) has lost their
precision, in pandas as in the frame: spreads agree only to this absolute size."""


def check_frame(frame: pd.DataFrame, want: dict[tuple[Any, ...], dict[str, Any]], params: tuple[str, ...]) -> None:
    """Every row of ``frame`` matches its reference row, and every reference row is there once."""
    keys = [tuple(k) for k in frame[["Annotation", "Metric", *params]].itertuples(index=False)]
    assert sorted(map(repr, keys)) == sorted(map(repr, want)), "rows"
    columns = {c for row in want.values() for c in row}
    assert columns <= set(frame.columns), sorted(columns - set(frame.columns))
    for key, (_, got) in zip(keys, frame.iterrows(), strict=True):
        for col, value in want[key].items():
            shown = got[col]
            if isinstance(value, Flagged):
                cell = {f for f in str(shown).split(",") if f}
                assert cell & value.judged == value.flags, (key, col, shown, sorted(value.flags))
                continue
            scale = _scale(want[key], col)
            assert same(shown.item() if hasattr(shown, "item") else shown, value, scale), (key, col, shown, value)


def _scale(row: dict[str, Any], col: str) -> float:
    """The size of the values a spread column comes from: a spread of equal values is 0 to rounding."""
    if col == "RelativeStdDevPct":
        return 100.0  # of the mean
    if col in ("StdDev", "CI95_Lower", "CI95_Upper"):
        ends = [row["MinValue"], row["MaxValue"]]
    elif col.endswith("_Std"):
        ends = [row[f"{col[:-4]}_Min"], row[f"{col[:-4]}_Max"]]
    else:
        return 0.0
    finite = [abs(float(v)) for v in ends if v is not None and math.isfinite(float(v))]
    return max(finite, default=0.0)


def check_runs(frame: pd.DataFrame, shape: Shape) -> None:
    """``runs_dataframe()``: one row per (run, annotation, metric) with its value, kernel and collector values."""
    want = {}
    for (ann, metric, c), rows in per_run_values(shape).items():
        for r, v, kernel in rows:
            cols = {"Value": v, "Kernel": kernel, **{n: collector_at(shape, n, ann, c, r) for n in shape.collectors}}
            want[(ann, metric, c, r)] = cols
    keys = [tuple(k) for k in frame[["Annotation", "Metric", "Config", "Run"]].itertuples(index=False)]
    assert sorted(map(repr, keys)) == sorted(map(repr, want)), "runs rows"
    for key, (_, got) in zip(keys, frame.iterrows(), strict=True):
        c = key[2]
        assert [got[p] for p in shape.params] == list(shape.configs[c]), key
        for col, value in want[key].items():
            shown = got[col]
            assert same(shown.item() if hasattr(shown, "item") else shown, value), (key, col, shown, value)


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(shape=shapes())
def test_frames_match_the_naive_reference(shape: Shape) -> None:
    result = build(shape)
    try:
        want = reference(shape)
    except NoBaseline:
        # no finite baseline value in a config, or (every baseline region missing) no baseline annotation at all
        with pytest.raises(nsightx.ConfigError, match=r"no baseline value|names no annotation"):
            result.to_dataframe()
        return
    if not want:
        assert result.to_dataframe().empty
        return
    check_frame(result.to_dataframe(), want, shape.params)  # the first call's frame
    check_frame(result.to_dataframe(), want, shape.params)  # the cached one
    check_runs(result.runs_dataframe(), shape)


@settings(
    max_examples=max(EXAMPLES // 4, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(shape=shapes())
def test_a_saved_and_loaded_result_matches_the_reference(shape: Shape, tmp_path_factory: Any) -> None:
    try:
        want = reference(shape)
    except NoBaseline:
        return
    if not want:
        return
    # both formats: the .json result wrote a measured inf as null, which came back NaN (files21)
    result, folder = build(shape), Path(tmp_path_factory.mktemp("saved"))
    for suffix in ("parquet", "json"):
        loaded = nsightx.load(result.save(folder / f"r.{suffix}"))
        check_frame(loaded.to_dataframe(), want, shape.params)
        check_runs(loaded.runs_dataframe(), shape)
        assert [_record_key(r) for r in loaded.records] == [_record_key(r) for r in result.records], suffix


def _record_key(record: Record) -> tuple[Any, ...]:
    """A record's fields as a tuple, NaN as a string (NaN equals nothing, itself included)."""
    value = "<nan>" if math.isnan(record.value) else record.value
    return (record.annotation, record.config, record.run, record.kernel, record.metric, value, record.unit)


@pytest.mark.parametrize("configs", [1, 3])
def test_a_host_call_with_a_run_collector_matches_the_reference(configs: int) -> None:
    """Through the host backend: the values are measured, so the reference reads them from the records."""

    @nsightx.analyze.kernel(
        configs=[(c + 1,) for c in range(configs)],
        runs=4,
        warmup=0,
        backend="host",
        info_collectors=[nsightx.InfoCollector("Power", lambda ctx: 10 * ctx.config + ctx.run, "run")],
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        with nsightx.annotate("a"):
            sum(range(n))
        with nsightx.annotate("b"):
            sorted(range(n))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sweep()
    frame = result.to_dataframe()
    runs = result.runs_dataframe()
    for _, row in frame.iterrows():
        mine = runs[(runs["Annotation"] == row["Annotation"]) & (runs["Metric"] == row["Metric"])]
        mine = mine[mine["n"] == row["n"]]
        values = mine["Value"]
        assert same(row["AvgValue"], values.mean()) and same(row["StdDev"], values.std(ddof=1))
        assert same(row["MinValue"], values.min()) and same(row["MaxValue"], values.max())
        powers = pd.Series([10.0 * (row["n"] - 1) + r for r in mine["Run"]])
        assert mine["Power"].tolist() == powers.tolist()
        assert same(row["Power_Avg"], powers.mean()) and same(row["Power_Std"], powers.std(ddof=1))
        assert same(row["Power_Min"], powers.min()) and same(row["Power_Max"], powers.max())


@pytest.mark.parametrize("values", [[math.nan, math.nan], [None, math.nan], [math.nan, None]])
def test_a_collector_that_reported_only_nan_keeps_one_column(values: list[Any]) -> None:
    """NaN is no number to ``pd.to_numeric``'s test (d6b4a1c: one column); the numpy paths made ``_Avg`` of it."""
    shape = Shape(
        configs=[(1,), (2,)],
        params=("n",),
        runs=1,
        annotations=("a",),
        metrics=(TIME,),
        combine=False,
        derive=False,
        regions={("a", c, 0): [{TIME: 5.0}] for c in range(2)},
        collectors={"Fan": ("run", {(c, 0): v for c, v in enumerate(values)})},
    )
    frame = build(shape).to_dataframe()
    assert "Fan" in frame.columns and "Fan_Avg" not in frame.columns
    assert frame["Fan"].isna().all()
    check_frame(frame, reference(shape), shape.params)


def _five_runs(collectors: dict[str, Any]) -> Shape:
    """One config of five runs of one region (``5000 + run`` ns) with ``collectors``: the throttling cases' shape."""
    return Shape(
        configs=[(1,)],
        params=("n",),
        runs=5,
        annotations=("a",),
        metrics=(TIME,),
        combine=False,
        derive=False,
        regions={("a", 0, r): [{TIME: 5000.0 + r}] for r in range(5)},
        collectors=collectors,
    )


@pytest.mark.parametrize("reasons", ["", "gpu_idle|", "|none"])
def test_an_empty_reason_name_does_not_make_a_run_throttled(reasons: str) -> None:
    """docs/plugins.md: a run is throttled if a reason other than ``gpu_idle`` or ``applications_clocks_setting``
    was active; an empty name is none (the ``ClockEventReasons`` column says ``none``). bf9531b counted it."""
    shape = _five_runs({"ClockEventReasons": ("run", {(0, r): reasons if r == 2 else "none" for r in range(5)})})
    result = build(shape)
    frame = result.to_dataframe()
    assert frame["ThrottledRuns"].tolist() == [0] and frame["StableMeasurement"].tolist() == [True]
    assert "throttled" not in frame["Flags"][0] and not result.runs_dataframe()["Throttled"].any()
    check_frame(frame, reference(shape), shape.params)


def test_a_nan_clock_read_is_left_out_of_the_median() -> None:
    """docs/plugins.md: a run is throttled if its SM clock is under 90 % of the median SM clock of the call's runs.

    A NaN read is no clock; bf9531b passed it to ``statistics.median``, whose answer then depended on the reads'
    order: here 1980 (run 1 throttled) where the clocks' median is 1867.75 (none is).
    """
    clocks = [1980, 1755.5, 1755.5, math.nan, 1980]
    shape = _five_runs({"MeasuredSMClockMHz": ("run", {(0, r): clock for r, clock in enumerate(clocks)})})
    result = build(shape)
    frame = result.to_dataframe()
    assert frame["ThrottledRuns"].tolist() == [0] and not result.runs_dataframe()["Throttled"].any()
    check_frame(frame, reference(shape), shape.params)


@pytest.mark.parametrize(("launch_ns", "host_ns", "bound"), [(10_000, 1000, False), (1, 10_000, True)])
def test_launch_bound_reads_the_host_wall_time_not_launch_ns(launch_ns: int, host_ns: int, bound: bool) -> None:
    """docs/flags.md: without the backend's own ``launch_bound`` verdict, the region's host wall time
    (``RegionRun.host_ns``) is set against its GPU time; ``launch_ns`` is no evidence the docs name. befafb0 put a
    ``launch_ns`` attribute in place of the host time (both in the frame and in the rule ``nsightx compare`` uses).
    """
    shape = Shape(
        configs=[(1,)],
        params=("n",),
        runs=1,
        annotations=("a",),
        metrics=(TIME,),
        combine=False,
        derive=False,
        regions={("a", 0, 0): [{TIME: 5000.0}]},
        host_ns={("a", 0, 0): host_ns},
        attributes={("a", 0, 0): {"launch_ns": launch_ns}},
    )
    result = build(shape)
    assert ("launch_bound" in result.to_dataframe()["Flags"][0]) is bound
    assert ("launch_bound" in row_flags(result.data)[("a", TIME, 0)]) is bound  # the rule of ``nsightx compare``
    check_frame(result.to_dataframe(), reference(shape), shape.params)
