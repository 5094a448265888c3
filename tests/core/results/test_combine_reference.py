"""``combine_kernel_metrics`` and ``ignore_kernel_list``: every path against a naive reference from the docs.

A result of several kernels per region has three ways to its per-run values: the object path
(:func:`~nsightx._results.transform.combine_records`, taken with ``derive_metric``), the columnar one
(:func:`~nsightx._results.combinecols.combine_columns`: lists for a small result, vectorised passes for a larger
one) and, for one record per region, :func:`~nsightx._results.store.one_per_region`. Here random runs (kernel
names that repeat, helper kernels in ``ignore_kernel_list``, failed regions, regions of no kernel, kernel counts
that vary between runs, records not in launch order) go through each, and each is compared, exactly, with what
docs/api.md says (``combine_kernel_metrics``: a binary reducer folded over the region's kernels in launch order;
``ignore_kernel_list``: those kernels dropped; ``KernelCountError`` for several kernels and no reducer) and
docs/compat.md (the ``Kernel`` column: ``a|b`` when combined, the most frequent name among successful runs).
The reducers are neither commutative nor associative where they can be (``a - b``, ``2a + b``), so a fold in
another order or grouping shows.

Where the docs are silent the reference does not guess: the unit of a combined value (all kernels of one metric
share it here) and the ``Kernel`` of a tie (the first met, as the frame reference takes it).
"""

from __future__ import annotations

import functools
import math
import operator
import os
import struct
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsightx._errors import KernelCountError, TransformError
from nsightx._results.combinecols import combine_arrays
from nsightx._results.combinesmall import combine_small
from nsightx._results.profileresults import build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.rowparts import StoredRuns, parts_from_rows
from nsightx._results.schema import PlanInfo
from nsightx._results.store import ValueColumns, one_per_region
from nsightx._results.transform import combine_records

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "100"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=400``)."""

METRICS = ("t", "bytes")
UNITS = {"t": "ns", "bytes": "byte"}
ANNOTATIONS = ("gemm", "copy", "norm")
KERNELS = ("ka", "kb", "kc", "helper")
FAILED = "failed"


def weighted(w: float, a: float, b: float) -> float:
    """A reducer through ``functools.partial``: neither commutative nor associative."""
    return w * a + b


REDUCERS: dict[str, Callable[[float, float], float] | None] = {
    "none": None,
    "sub": lambda a, b: a - b,
    "max": max,
    "min": min,
    "add": operator.add,
    "partial": functools.partial(weighted, 2.0),
}
VALUES = st.sampled_from([1.0, 2.5, 3.0, 7.25, 1e6, 123.456, 0.001, -4.0, 0.0, math.nan, math.inf, 1e-300])


@dataclass
class Shape:
    """Random runs: per region ``None`` (missing), or (failed, [(seq, kernel, {metric: value})] in record order)."""

    configs: int
    runs: int
    annotations: tuple[str, ...]
    metrics: tuple[str, ...]
    ignored: tuple[str, ...]
    reducer: str
    regions: dict[tuple[str, int, int], Any] = field(default_factory=dict)


@st.composite
def shapes(draw: Any, max_configs: int = 3, max_runs: int = 4) -> Shape:
    """Random runs of several kernels per region, built as a backend hands them in."""
    shape = Shape(
        configs=draw(st.integers(1, max_configs)),
        runs=draw(st.integers(1, max_runs)),
        annotations=ANNOTATIONS[: draw(st.integers(1, 3))],
        metrics=draw(st.sampled_from([METRICS[:1], METRICS, METRICS[::-1]])),
        ignored=tuple(k for k in KERNELS if draw(st.integers(0, 3)) == 0),
        reducer=draw(st.sampled_from(sorted(REDUCERS))),
    )
    most = draw(st.integers(1, 4))
    for c in range(shape.configs):
        for r in range(shape.runs):
            for ann in shape.annotations:
                pick = draw(st.integers(0, 15))
                if pick == 0:
                    continue  # the region did not run
                n = draw(st.integers(0, most))
                kernels = []
                for seq in draw(st.permutations(range(n))):  # record order need not be launch order
                    metrics = [m for m in shape.metrics if draw(st.integers(0, 9))]  # ncu: a metric may be missing
                    kernels.append((seq, draw(st.sampled_from(KERNELS)), {m: draw(VALUES) for m in metrics}))
                if not draw(st.integers(0, 3)):
                    kernels.sort()  # the common case: launch order
                shape.regions[(ann, c, r)] = (pick == 1, kernels)
    return shape


def runs_of(shape: Shape) -> list[RunRecords]:
    """The shape's runs as a backend hands them in (regions of a run, then its records)."""
    out = []
    for c in range(shape.configs):
        for r in range(shape.runs):
            regions, records = [], []
            for ann in shape.annotations:
                got = shape.regions.get((ann, c, r))
                if got is None:
                    continue
                failed, kernels = got
                regions.append(RegionRun(annotation=ann, config=c, run=r, host_ns=1000, failed=failed))
                for seq, kernel, values in kernels:
                    records.extend(
                        Record(annotation=ann, config=c, run=r, kernel=kernel, metric=m, value=v, unit=u, seq=seq)
                        for m, v in values.items()
                        for u in (UNITS[m],)
                    )
            out.append(RunRecords(config=c, run=r, records=tuple(records), regions=tuple(regions)))
    return out


# --- the reference ------------------------------------------------------------------------------------------


class Several(Exception):
    """The reference's KernelCountError: a region of several kernels and no reducer."""


def reference(shape: Shape) -> dict[tuple[str, int, int, str], tuple[float, str]]:
    """(annotation, config, run, metric) -> (value, kernel) as docs/api.md describes them.

    A failed region: NaN and ``failed`` for every requested metric. Otherwise, per metric, the kernels not in
    ``ignore_kernel_list`` that reported it, in launch order, folded by the reducer; their names joined by ``|``.
    A region with no such kernel has no value for the metric.

    Raises:
        Several: a region has several kernels for a metric and there is no reducer.
    """
    combine = REDUCERS[shape.reducer]
    out = {}
    for (ann, c, r), (failed, kernels) in shape.regions.items():
        if failed:
            out.update({(ann, c, r, m): (math.nan, FAILED) for m in shape.metrics})
            continue
        launched = sorted(k for k in kernels if k[1] not in shape.ignored)
        for m in shape.metrics:
            got = [(kernel, values[m]) for _, kernel, values in launched if m in values]
            if not got:
                continue
            if len(got) > 1 and combine is None:
                raise Several
            value = got[0][1]
            for _, v in got[1:]:
                assert combine is not None
                value = float(combine(value, v))
            out[(ann, c, r, m)] = (value, "|".join(k for k, _ in got))
    return out


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def as_reference(columns: ValueColumns) -> dict[tuple[str, int, int, str], tuple[bytes, str]]:
    """The values of a path, keyed as the reference (each key once), the values bit for bit."""
    out = {}
    for v in columns.objects():
        key = (v.annotation, v.config, v.run, v.metric)
        assert key not in out, f"{key} twice"
        out[key] = (_bits(v.value), v.kernel)
    return out


def expected(shape: Shape) -> dict[tuple[str, int, int, str], tuple[bytes, str]] | None:
    """The reference as :func:`as_reference` shows a path; ``None`` when it is a KernelCountError."""
    try:
        return {k: (_bits(v), kernel) for k, (v, kernel) in reference(shape).items()}
    except Several:
        return None


def frame_reference(shape: Shape) -> dict[tuple[str, str, int], tuple[int, str, float, float]]:
    """(Annotation, Metric, config) -> (NumRuns, Kernel, MinValue, MaxValue) from the per-run reference.

    ``NumRuns``: the valid (not NaN) runs; ``Kernel``: the most frequent name among successful runs (the first
    met on a tie: the docs do not say), ``failed`` when none succeeded.
    """
    by_row: dict[tuple[str, str, int], list[tuple[int, float, str]]] = {}
    for (ann, c, r, m), (value, kernel) in reference(shape).items():
        by_row.setdefault((ann, m, c), []).append((r, value, kernel))
    out = {}
    for key, rows in by_row.items():
        rows.sort()
        names = [k for _, _, k in rows]
        counts = Counter(k for k in names if k != FAILED)
        kernel = next((k for k in names if counts.get(k) == max(counts.values())), FAILED) if counts else FAILED
        values = [v for _, v, _ in rows if not math.isnan(v)]
        lo, hi = (min(values), max(values)) if values else (math.nan, math.nan)
        out[key] = (len(values), kernel, lo, hi)
    return out


# --- the paths ----------------------------------------------------------------------------------------------


def plan_of(shape: Shape, *, derive: bool = False) -> PlanInfo:
    return PlanInfo(
        function="bench",
        params=("n",),
        configs=tuple((64 * (c + 1),) for c in range(shape.configs)),
        runs=shape.runs,
        warmup=0,
        metrics=shape.metrics,
        backend="cupti",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
        combine_kernel_metrics=shape.reducer if REDUCERS[shape.reducer] else None,
        derive_metric="extra" if derive else None,
        ignore_kernel_list=shape.ignored,
    )


def extra(*args: Any) -> tuple[float, str]:
    """A derived metric, only to send ``build_results`` down the object path."""
    return 1.0, "x"


def _same_keys(got: dict[Any, Any], want: dict[Any, Any], path: str) -> None:
    differ = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
    assert not differ, f"{path}: {dict(sorted(differ.items())[:6])}"


def check(shape: Shape) -> None:
    """Every path's per-run values, and the frame's Kernel, NumRuns, MinValue, MaxValue, against the reference."""
    runs = runs_of(shape)
    combine = REDUCERS[shape.reducer]
    want = expected(shape)
    ignored = set(shape.ignored)
    for parts in (StoredRuns.of_objects(runs).parts(), parts_from_rows(loop_rows(runs))):
        for name, path in (("small", combine_small), ("arrays", combine_arrays)):
            got = path(parts, shape.metrics, ignored, combine)
            if got is not None:
                _same_keys(as_reference(got), want or {}, name)
                assert want is not None, f"{name}: values where the docs ask for KernelCountError"
        fast = one_per_region(parts.records, parts.regions, shape.ignored)
        if fast is not None:
            _same_keys(as_reference(fast), want or {}, "one_per_region")
    try:
        objects = combine_records(runs, shape.metrics, ignore_kernels=shape.ignored, combine=combine)
    except KernelCountError:
        assert want is None, "combine_records raised KernelCountError where the docs ask for values"
    else:
        assert want is not None, "combine_records made values where the docs ask for KernelCountError"
        _same_keys(as_reference(ValueColumns.of(objects)), want, "combine_records")
    for derive in (False, True):
        _check_frame(shape, runs, combine, derive, want)
    _check_frame(shape, StoredRuns(loop_rows(runs)), combine, False, want)  # as the run loop stores them


def loop_rows(runs: list[RunRecords]) -> list[Any]:
    """The runs as the run loop hands them to the sink: compact rows (see tests/core/results/test_combine_small.py)."""
    return [
        (run.config, run.run, run.records, tuple((g.annotation, g.host_ns, g.failed) for g in run.regions), {}, ())
        for run in runs
    ]


def _check_frame(
    shape: Shape, runs: Sequence[RunRecords], combine: Any, derive: bool, want: dict[Any, Any] | None
) -> None:
    """``build_results(...).to_dataframe()`` (columnar path, or the object one with ``derive``) against the docs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            results = build_results(
                plan_of(shape, derive=derive),
                runs,
                {"GPU": "x"},
                combine=combine,
                derive_metric=extra if derive else None,
                created="2026-12-06T00:00:00+00:00",
            )
        except KernelCountError:
            assert want is None, f"derive={derive}: KernelCountError where the docs ask for values"
            return
        assert want is not None, f"derive={derive}: a result where the docs ask for KernelCountError"
        frame = results.to_dataframe()
    got = {
        (row.Annotation, row.Metric, row.n // 64 - 1): (row.NumRuns, row.Kernel, row.MinValue, row.MaxValue)
        for row in frame.itertuples()
        if row.Metric != "extra"
    }
    ref = frame_reference(shape)
    bits = {k: (n, kern, _bits(lo), _bits(hi)) for k, (n, kern, lo, hi) in got.items()}
    _same_keys(bits, {k: (n, kern, _bits(lo), _bits(hi)) for k, (n, kern, lo, hi) in ref.items()}, f"frame {derive}")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_small_results_match_the_reference(shape: Shape) -> None:
    check(shape)


@settings(max_examples=max(EXAMPLES // 6, 5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes(max_configs=8, max_runs=12))
def test_larger_results_match_the_reference(shape: Shape) -> None:
    """Results past the small path's size (``SMALL_COMBINE``), where ``combine_columns`` vectorises."""
    check(shape)


@pytest.mark.parametrize("reducer", sorted(REDUCERS))
def test_reducers_fold_in_launch_order(reducer: str) -> None:
    """Three kernels launched c, a, b but recorded a, b, c: every path folds c then a then b."""
    kernels = [(1, "ka", {"t": 2.0}), (2, "kb", {"t": 7.0}), (0, "kc", {"t": 100.0}), (3, "helper", {"t": 5.0})]
    shape = Shape(configs=1, runs=1, annotations=("gemm",), metrics=("t",), ignored=("helper",), reducer=reducer)
    shape.regions[("gemm", 0, 0)] = (False, kernels)
    check(shape)


def _not_a_number(a: float, b: float) -> Any:
    return "x"


def _g_last(record: Record) -> bool:
    return record.annotation == "g"


def _message(runs: list[RunRecords], shape: Shape, derive: bool) -> tuple[str, str]:
    """The error ``build_results`` raises for ``runs`` (the columnar path, or with ``derive`` the object one)."""
    with pytest.raises(TransformError) as raised:
        build_results(
            plan_of(shape, derive=derive),
            runs,
            {"GPU": "x"},
            combine=_not_a_number,
            derive_metric=extra if derive else None,
        )
    return type(raised.value).__name__, str(raised.value)


@pytest.mark.parametrize("runs", [1, 40])
def test_a_failing_reducer_names_the_same_region_on_every_path(runs: int) -> None:
    """A reducer that returns no number: the error names the region and metric ``combine_records`` meets first.

    The regions of a run are listed g then c, but c's kernels were recorded first, and each kernel reports
    ``t`` before ``bytes`` though ``metrics`` asks for ``bytes`` first. The columnar paths (lists for 1 run,
    vectorised for 40) folded the groups in record order and named c, or ``t``; the object path, taken with
    ``derive_metric``, names g and ``bytes``.
    """
    shape = Shape(configs=1, runs=runs, annotations=("g", "c"), metrics=("bytes", "t"), ignored=(), reducer="add")
    for r in range(runs):
        for ann in ("g", "c"):
            shape.regions[(ann, 0, r)] = (False, [(k, f"k{k}", {"t": 1.0, "bytes": 2.0}) for k in range(2)])
    records = [  # each run: its regions g, c; its records c's first
        RunRecords(config=0, run=run.run, records=tuple(sorted(run.records, key=_g_last)), regions=run.regions)
        for run in runs_of(shape)
    ]
    want = _message(records, shape, derive=True)
    assert "annotation 'g'" in want[1] and "'bytes'" in want[1] and "run 0)" in want[1]
    assert _message(records, shape, derive=False) == want
