"""``join_results`` against a naive reference written from docs/api.md ("nsightx.join_results"), over random sweeps.

A time result (``cupti``: kernel times, sometimes a second metric the counter side has too) and a counter result
(``ncu``: counters and its own time, kernel names demangled) are built through the real code from random configs,
run counts, annotations, kernel sequences, failed and missing regions. The reference follows the docs one record
at a time: counter run ``r`` of a region goes to time run ``r`` of that region, kernel by launch order (names as
the time side spells them); the counter side's metrics the time side measured are left out; ``Tool`` names the
backend of each metric. It builds that merged result by hand and its frames through ``build_results`` (the frames
themselves are checked against their own reference in test_frame_reference.py), then compares the joined
result's per-run and aggregated frames row by row, keyed by (Annotation, Metric, parameters[, Run]). A counter
region the time side never saw, more counter runs than time runs, and a region whose kernels differ (count or
base name) must be a ``JoinError``; different parameters (another order too) a ``ConfigError``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsightx import ConfigError
from nsightx._api.counters import joined_results
from nsightx._results.join import JoinError
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "50"))
"""Examples per property (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""

TIME = "gpu__time_duration.sum"
FLOPS = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
BYTES = "dram__bytes.sum"
ANNOTATIONS = ("mm", "add", "norm")
KERNELS = ("gemm", "splitk_reduce", "gemm_tail")
DEMANGLED = {
    "gemm": "void cutlass::gemm<float, (int)4>(cutlass::Params<(int)2>, int)",
    "splitk_reduce": "void (anonymous namespace)::splitk_reduce<float>(float*, int)",
    "gemm_tail": "gemm_tail",
}
"""How ncu spells each kernel (CUPTI's records carry the base name)."""
FAILED = "failed"


@dataclass
class Shape:
    """Two sides of one sweep."""

    configs: int
    params: tuple[str, ...]
    counter_params: tuple[str, ...]
    time_runs: int
    counter_runs: int
    time_metrics: tuple[str, ...]
    # (ann, config) -> the region's kernels (base names, launch order)
    kernels: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)
    # (ann, config, run) -> FAILED, or per kernel metric -> value; a region missing in a run is absent
    times: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    counters: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    # (ann, config, run) of the counter side -> the kernels it saw, when they differ from ``kernels``
    other_kernels: dict[tuple[str, int, int], tuple[str, ...]] = field(default_factory=dict)
    # (ann, config, run) of the counter side measured over the whole region (ncu's range replay: kernel "range")
    whole_region: set[tuple[str, int, int]] = field(default_factory=set)
    counter_function: str = "mm"
    counter_config_base: int = 64


VALUES = st.sampled_from([1.0, 2.5, 7.25, 900.0, 1e6, 3.3e9])


@st.composite
def shapes(draw: Any) -> Shape:
    """Random sides; most join, some must not."""
    configs, time_runs = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    params = ("n", "dtype")[: draw(st.integers(1, 2))]
    bad = draw(st.integers(0, 11))  # 0..6: one reason the join must fail; otherwise a good pair
    shape = Shape(
        configs=configs,
        params=params,
        counter_params=tuple(reversed(params)) if bad == 0 and len(params) == 2 else params,
        time_runs=time_runs,
        counter_runs=time_runs + 1 if bad == 1 else draw(st.integers(1, time_runs)),
        time_metrics=(TIME, BYTES) if draw(st.booleans()) else (TIME,),
        counter_function="mm_v2" if bad == 5 else "mm",
        counter_config_base=32 if bad == 6 else 64,
    )
    time_anns = ANNOTATIONS[: draw(st.integers(1, 3))]
    counter_anns = [a for a in time_anns if draw(st.integers(0, 3))]
    if bad == 2 and len(time_anns) < 3:
        counter_anns.append(ANNOTATIONS[len(time_anns)])
    for ann in (*time_anns, *counter_anns):
        for c in range(configs):
            shape.kernels[(ann, c)] = tuple(draw(st.sampled_from(KERNELS)) for _ in range(draw(st.integers(1, 2))))
    for ann in time_anns:
        for c in range(configs):
            for r in range(time_runs):
                pick = draw(st.integers(0, 11))
                if pick == 0:
                    continue  # the region is missing in this run
                n = len(shape.kernels[(ann, c)])
                shape.times[(ann, c, r)] = (
                    FAILED if pick == 1 else [{m: draw(VALUES) + r for m in shape.time_metrics} for _ in range(n)]
                )
    for ann in counter_anns:
        for c in range(configs):
            for r in range(shape.counter_runs):
                if draw(st.integers(0, 9)) == 0:
                    continue
                kernels = shape.kernels[(ann, c)]
                if bad == 3 and draw(st.integers(0, 3)) == 0:
                    kernels = (*kernels, "gemm") if draw(st.booleans()) else ("gemm_tail",) * len(kernels)
                    if kernels != shape.kernels[(ann, c)]:
                        shape.other_kernels[(ann, c, r)] = kernels
                shape.counters[(ann, c, r)] = [
                    {m: draw(VALUES) * (seq + 2) + 0.5 * r for m in (TIME, FLOPS, BYTES)} for seq in range(len(kernels))
                ]
                if bad == 4 and draw(st.booleans()):  # one record per metric for the whole region, no kernel
                    shape.counters[(ann, c, r)] = shape.counters[(ann, c, r)][:1]
                    shape.whole_region.add((ann, c, r))
                    shape.other_kernels.pop((ann, c, r), None)
    return shape


def _runs(regions: dict[tuple[str, int, int], Any], configs: int, runs: int, names: Any) -> list[RunRecords]:
    """One side's runs: per region its kernels' records (``names(ann, c, r)`` spells them) or a failed region."""
    out = []
    for c in range(configs):
        for r in range(runs):
            records, held = [], []
            for (ann, cc, rr), got in regions.items():
                if (cc, rr) != (c, r):
                    continue
                held.append(RegionRun(annotation=ann, config=c, run=r, host_ns=1000 + r, failed=got == FAILED))
                for seq, values in enumerate([] if got == FAILED else got):
                    kernel = names(ann, c, r)[seq]
                    for m, v in values.items():
                        unit = "ns" if m == TIME else "byte" if m == BYTES else "inst"
                        records.append(
                            Record(
                                annotation=ann, config=c, run=r, kernel=kernel, metric=m, value=v, unit=unit, seq=seq
                            )
                        )
            out.append(RunRecords(config=c, run=r, records=tuple(records), regions=tuple(held)))
    return out


def _plan(
    shape: Shape,
    backend: str,
    params: tuple[str, ...],
    metrics: tuple[str, ...],
    runs: int,
    function: str = "mm",
    base: int = 64,
) -> PlanInfo:
    return PlanInfo(
        function=function,
        params=params,
        configs=tuple((base * (c + 1), "f32")[: len(shape.params)] for c in range(shape.configs)),
        runs=runs,
        warmup=0,
        metrics=metrics,
        backend=backend,
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
        combine_kernel_metrics="sum",
    )


def _sum(a: float, b: float) -> float:
    return a + b


def sides(shape: Shape) -> tuple[ProfileResults, ProfileResults]:
    """The time and the counter result, through ``build_results``."""
    times = build_results(
        _plan(shape, "cupti", shape.params, shape.time_metrics, shape.time_runs),
        _runs(shape.times, shape.configs, shape.time_runs, lambda a, c, r: shape.kernels[(a, c)]),
        {"GPU": "x"},
        combine=_sum,
    )

    def ncu_names(a: str, c: int, r: int) -> list[str]:
        if (a, c, r) in shape.whole_region:
            return ["range"]
        return [DEMANGLED[k] for k in shape.other_kernels.get((a, c, r), shape.kernels[(a, c)])]

    counter_plan = _plan(
        shape,
        "ncu",
        shape.counter_params,
        (TIME, FLOPS, BYTES),
        shape.counter_runs,
        function=shape.counter_function,
        base=shape.counter_config_base,
    )
    counters = build_results(
        counter_plan,
        _runs(shape.counters, shape.configs, shape.counter_runs, ncu_names),
        {"GPU": "x", "SerializesKernels": True},
        combine=_sum,
    )
    return times, counters


def expected_error(shape: Shape) -> type[Exception] | None:
    """What the docs say the join raises, or None."""
    if shape.counter_params != shape.params or shape.counter_function != "mm" or shape.counter_config_base != 64:
        return ConfigError  # docs: "of the same function and configs"; "other configs are a ConfigError"
    timed = {(a, c) for (a, c, _r), got in shape.times.items() if got != FAILED}
    if any((a, c) not in timed for (a, c, _r) in shape.counters):
        return JoinError  # the time side never saw the region launch a kernel
    if shape.other_kernels or shape.whole_region:
        return JoinError  # a whole-region counter has no kernel: the region's kernels differ (none vs some)
    if shape.counter_runs > shape.time_runs and any(r >= shape.time_runs for (_a, _c, r) in shape.counters):
        return JoinError
    return None


def merged(shape: Shape) -> ProfileResults:
    """The documented join, by hand: counter run r of a region into time run r, names as the time side's."""
    regions: dict[tuple[str, int, int], Any] = {k: v for k, v in shape.times.items()}
    extra: dict[tuple[str, int, int], Any] = {}
    for key, got in shape.counters.items():
        extra[key] = [{m: v for m, v in kernel.items() if m not in shape.time_metrics} for kernel in got]
    seen = {m for got in extra.values() for kernel in got for m in kernel}  # the docs do not say the others
    metrics = (*shape.time_metrics, *(m for m in (BYTES, FLOPS) if m in seen))
    runs = []
    for c in range(shape.configs):
        for r in range(shape.time_runs):
            records, held = [], []
            for (ann, cc, rr), got in regions.items():
                if (cc, rr) != (c, r):
                    continue
                held.append(RegionRun(annotation=ann, config=c, run=r, host_ns=1000 + r, failed=got == FAILED))
                for seq, values in enumerate([] if got == FAILED else got):
                    for m, v in values.items():
                        unit = "ns" if m == TIME else "byte"
                        kernel = shape.kernels[(ann, c)][seq]
                        records.append(
                            Record(
                                annotation=ann, config=c, run=r, kernel=kernel, metric=m, value=v, unit=unit, seq=seq
                            )
                        )
            for (ann, cc, rr), got in extra.items():
                if (cc, rr) != (c, r):
                    continue
                for seq, values in enumerate(got):
                    for m, v in values.items():
                        unit = "byte" if m == BYTES else "inst"
                        kernel = shape.kernels[(ann, c)][seq]
                        records.append(
                            Record(
                                annotation=ann, config=c, run=r, kernel=kernel, metric=m, value=v, unit=unit, seq=seq
                            )
                        )
            runs.append(RunRecords(config=c, run=r, records=tuple(records), regions=tuple(held)))
    plan = _plan(shape, "cupti+ncu", shape.params, metrics, shape.time_runs)
    sources = {m: "cupti" for m in shape.time_metrics} | {m: "ncu" for m in metrics if m not in shape.time_metrics}
    plan = plan.model_copy(update={"metric_backends": sources})
    return build_results(plan, runs, {"GPU": "x"}, combine=_sum)


def _keyed(frame: pd.DataFrame, keys: list[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    rows = frame.to_dict("records")
    out = {tuple(r[k] for k in keys): r for r in rows}
    assert len(out) == len(rows), "two rows share a key"
    return out


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, float):
        return bool(got == want or math.isclose(got, want, rel_tol=1e-9))
    return bool(got == want)


AGG_COLUMNS = ("AvgValue", "MinValue", "MaxValue", "NumRuns", "Kernel", "Tool", "Unit", "StdDev")
RUN_COLUMNS = ("Value", "Kernel", "Tool", "Unit")


def check(shape: Shape) -> None:
    times, counters = sides(shape)
    error = expected_error(shape)
    if error is not None:
        with pytest.raises(error):
            joined_results(times, counters, combine=_sum)
        return
    got, want = joined_results(times, counters, combine=_sum), merged(shape)
    assert got.data.plan.backend == "cupti+ncu"
    keys = ["Annotation", "Metric", *shape.params]
    for frame_of, columns, extra in (
        (lambda res: res.to_dataframe(), AGG_COLUMNS, []),
        (lambda res: res.runs_dataframe(), RUN_COLUMNS, ["Run"]),
    ):
        g, w = _keyed(frame_of(got), keys + extra), _keyed(frame_of(want), keys + extra)
        assert sorted(g, key=repr) == sorted(w, key=repr)
        for key, row in w.items():
            for col in columns:
                assert _same(g[key][col], row[col]), (key, col, g[key][col], row[col])
    tools = {m: "cupti" if m in shape.time_metrics else "ncu" for m in (TIME, FLOPS, BYTES)}
    assert all(r["Tool"] == tools[r["Metric"]] for r in got.to_dataframe().to_dict("records"))


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(shape=shapes())
def test_join_matches_the_naive_reference(shape: Shape) -> None:
    check(shape)
