"""A call's result is built from the sink's rows as columns: no run object made in the call, the same numbers.

Issue 35 (the last CPU step): the result's columns are read straight from the run loop's compact rows
(:mod:`nsightx._results.rowparts`), several records per region are combined over the columns
(:mod:`nsightx._results.combinecols`), and the nvml plugin's collector statistics are computed once per class of
groups that see the same runs (:mod:`nsightx._results.groupshare`). Each is checked here against the object code
it stands in for, column for column; the time is measured by ``benchmarks/run_loop_cost.py`` and
``benchmarks/data_path.py``.
"""

from __future__ import annotations

import gc
import operator
from typing import Any

import numpy as np
import pytest

import nsightx
from nsightx._errors import ConfigError, TransformError
from nsightx._results.combinecols import combine_columns
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.rows import runs_from_rows
from nsightx._results.schema import PlanInfo
from nsightx._results.store import RunParts, ValueColumns
from nsightx._results.table_flags import Groups
from nsightx._results.transform import combine_records

SILENT = nsightx.VerbosityLevel.SILENT
T = "gpu__time_duration.sum"


def _columns(obj: Any) -> dict[str, Any]:
    """Every field of a columns dataclass as plain data (a Text as its per-row strings and its names)."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if hasattr(value, "codes"):
            out[name] = (value.strings(), list(value.names), value.codes.tolist())
        elif isinstance(value, np.ndarray):
            out[name] = (str(value.dtype), [repr(x) for x in value.tolist()])
        else:
            out[name] = value
    return out


def _rows() -> list[Any]:
    """Compact runs of every form: record rows and objects, attributes on some regions, a ONCE run object."""
    rec = Record("b", 0, 1, "gemm", T, 3.5, "ns", 1)
    once = RunRecords(-1, -1, collectors=(CollectorValue("Driver", "once", None, None, None, "555"),))
    return [
        once,
        (0, 0, (("a", 0, 0, "k", T, 1.0, "ns", 0),), (("a", 10, False),), {}, ()),
        (
            0,
            1,
            (("a", 0, 1, "k", T, 2.0, "ns", 0), rec),
            (("a", 11, False), ("b", 12, False)),
            {"b": {"kernel_count": 1}},
            (CollectorValue("SM", "run", 0, 1, None, 1980.0),),
        ),
        RunRecords(
            1,
            0,
            records=(Record("a", 1, 0, "k", T, 4.0, None, 0),),
            regions=(RegionRun("a", 1, 0, 13, False, {"x": 1}),),
        ),
    ]


def test_the_columns_read_from_rows_are_those_of_the_run_objects() -> None:
    rows = _rows()
    got, want = parts_from_rows(rows), RunParts.of(runs_from_rows(rows))
    for part in ("runs", "records", "regions", "collectors"):
        assert _columns(getattr(got, part)) == _columns(getattr(want, part)), part


def _run(config: int, run: int, records: list[tuple[Any, ...]], regions: list[tuple[str, bool]]) -> RunRecords:
    recs = tuple(Record(a, config, run, k, m, v, u, s) for a, k, m, v, u, s in records)
    regs = tuple(RegionRun(a, config, run, 5, failed) for a, failed in regions)
    return RunRecords(config, run, recs, regs)


CASES: dict[str, tuple[list[RunRecords], tuple[str, ...], tuple[str, ...], Any]] = {
    "kernels-combined-out-of-order": (
        [
            _run(
                c,
                r,
                [("a", "k2", T, 2.0 + r, "ns", 2), ("a", "k1", T, 1.5, "ns", 1), ("b", "k3", T, 7.0, "us", 0)],
                [("a", False), ("b", False)],
            )
            for c in range(2)
            for r in range(3)
        ],
        (T,),
        (),
        operator.add,
    ),
    "failed-ignored-no-region-extra-metrics": (
        [
            _run(
                0,
                0,
                [
                    ("a", "k", T, 1.0, "ns", 0),
                    ("a", "k", "zeta", 9.0, None, 0),
                    ("a", "k", "alpha", 8.0, "x", 0),
                    ("a", "skip", T, 5.0, "ns", 1),
                    ("c", "k", T, 3.0, "ns", 0),
                ],
                [("a", False), ("b", True)],
            ),
            _run(
                0,
                1,
                [("b", "k", T, 4.0, "ns", 0), ("a", "k", T, 2.0, "ns", 0), ("a", "k", T, 6.0, "ns", 1)],
                [("b", False), ("a", False), ("d", False)],
            ),
            _run(1, 0, [("a", "failed", T, 1.0, "ns", 0)], [("a", True)]),
        ],
        (T, "alpha"),
        ("skip",),
        max,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_records_combined_over_columns_are_the_values_combine_records_makes(case: str) -> None:
    runs, metrics, ignored, combine = CASES[case]
    got = combine_columns(RunParts.of(runs), metrics, ignored, combine)
    want = ValueColumns.of(combine_records(runs, metrics, ignore_kernels=ignored, combine=combine))
    assert got is not None
    assert _columns(got) == _columns(want)


def test_several_kernels_without_combine_are_left_to_the_object_code() -> None:
    runs, metrics, ignored, _ = CASES["kernels-combined-out-of-order"]
    assert combine_columns(RunParts.of(runs), metrics, ignored, None) is None


def test_a_combined_result_reads_its_objects_only_when_data_is_read() -> None:
    runs, metrics, ignored, combine = CASES["kernels-combined-out-of-order"]
    plan = PlanInfo(
        function="f", params=("n",), configs=((1,), (2,)), runs=3, warmup=0, metrics=metrics,
        backend="host", cache_control="all", clock_control="none", replay_mode="kernel", ignore_kernel_list=ignored,
    )  # fmt: skip
    result = build_results(plan, runs, {}, combine=combine)
    assert result._data is None  # built from columns
    assert result.data.values == tuple(combine_records(runs, metrics, ignore_kernels=ignored, combine=combine))
    legacy = ProfileResults(result.data)
    assert result.to_dataframe().equals(legacy.to_dataframe())


def test_a_call_makes_no_run_object_until_its_data_is_read() -> None:
    @nsightx.analyze.kernel(runs=50, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("b"):
            pass

    kinds = (RunRecords, Record, RegionRun)
    gc.collect()
    before = sum(1 for o in gc.get_objects() if type(o) in kinds)  # this module's cases hold some
    result = f()
    gc.collect()
    assert sum(1 for o in gc.get_objects() if type(o) in kinds) == before
    frame = result.to_dataframe()
    assert len(result.data.runs) == 50 and len(result.records) == 100
    assert frame.equals(ProfileResults(result.data).to_dataframe())


def test_collector_statistics_shared_between_groups_are_those_of_each_group(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = []
    for c in range(2):
        for r in range(4):
            base = _run(c, r, [(a, "k", T, 1.0 + r * (c + 1) + i, "ns", 0) for i, a in enumerate("abc")],
                        [(a, False) for a in "abc"])  # fmt: skip
            cols = (
                CollectorValue("MeasuredSMClockMHz", "run", c, r, None, 1980.0 - 7.3 * r * (c + 1)),
                CollectorValue("GPUTemperatureC", "run", c, r, None, 40 + r),
                CollectorValue("Fan", "config", c, None, None, 30 + c),
            )
            runs.append(RunRecords(c, r, base.records, base.regions, cols))
    plan = PlanInfo(
        function="f", params=("n",), configs=((1,), (2,)), runs=4, warmup=0, metrics=(T,),
        backend="host", cache_control="all", clock_control="none", replay_mode="kernel",
    )  # fmt: skip
    shared = build_results(plan, runs, {}).to_dataframe()
    assert {"MeasuredSMClockMHz_Std", "GPUTemperatureC_Avg", "Fan_Max"} <= set(shared.columns)
    monkeypatch.setattr(Groups, "shared_by", lambda *args: None)
    each = build_results(plan, runs, {}).to_dataframe()
    assert shared.equals(each)


@pytest.mark.parametrize("combine", [lambda a, b: a / 0, lambda a, b: "many"], ids=["raises", "not-a-number"])
def test_a_combine_that_fails_over_columns_leaves_the_error_to_combine_records(combine: Any) -> None:
    """The columns give way (``None``): ``combine_records`` raises, for the region it meets first."""
    runs, metrics, ignored, _ = CASES["kernels-combined-out-of-order"]
    with pytest.raises((ConfigError, TransformError)):
        combine_records(runs, metrics, ignore_kernels=ignored, combine=combine)
    assert combine_columns(RunParts.of(runs), metrics, ignored, combine) is None


def test_a_result_built_from_rows_pickles_before_its_objects_are_made() -> None:
    import pickle

    @nsightx.analyze.kernel(runs=3, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            pass

    result = f()
    copy = pickle.loads(pickle.dumps(result))
    assert copy.data == result.data


def test_the_frame_makes_no_collector_value_object() -> None:
    """The throttling verdicts and measured clocks read the collector columns as tuples (issue 35)."""
    runs = []
    for r in range(6):
        base = _run(0, r, [("a", "k", T, 10.0 + r, "ns", 0)], [("a", False)])
        cols = (
            CollectorValue("MeasuredSMClockMHz", "run", 0, r, None, 1980.0 - (300.0 if r == 3 else 0.0)),
            CollectorValue("ClockEventReasons", "run", 0, r, None, "gpu_idle" if r == 5 else "none"),
        )
        runs.append(RunRecords(0, r, base.records, base.regions, cols))
    plan = PlanInfo(
        function="f", params=("n",), configs=((1,),), runs=6, warmup=0, metrics=(T,),
        backend="host", cache_control="all", clock_control="none", replay_mode="kernel",
    )  # fmt: skip
    result = build_results(plan, runs, {})
    gc.collect()
    before = sum(1 for o in gc.get_objects() if type(o) is CollectorValue)  # the runs above hold 12
    frame, per_run = result.to_dataframe(), result.runs_dataframe()
    gc.collect()
    assert sum(1 for o in gc.get_objects() if type(o) is CollectorValue) == before
    assert frame["ThrottledRuns"].tolist() == [1] and per_run["Throttled"].tolist() == [r == 3 for r in range(6)]
    assert frame.equals(ProfileResults(result.data).to_dataframe())


@pytest.mark.parametrize("seed", range(40))
def test_groups_with_distinct_first_keys_are_found_unshared_without_sorting(seed: int) -> None:
    """Given each group's first row, ``shared_groups`` answers as it does without it (the quick exit is exact)."""
    from nsightx._results.groupshare import shared_groups
    from nsightx._results.store import dense_ids

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    ids, first = dense_ids(rng.integers(0, int(rng.integers(1, 6)), n))
    keys = rng.integers(0, int(rng.integers(1, 12)), n) if seed % 3 else ids * 7 + 1
    count = len(first)
    with_first = shared_groups(ids, count, keys, first)
    alone = shared_groups(ids, count, keys)
    assert (with_first is None) == (alone is None)
    if alone is not None and with_first is not None:
        assert np.array_equal(with_first.rows, alone.rows)
        assert np.array_equal(with_first.ids, alone.ids)
        assert np.array_equal(with_first.of_group, alone.of_group)


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        (["none", "none", None, "none|", "", "none"], ["none", "none"]),  # nothing named: every row "none"
        (
            ["none", "hw_slowdown|none", None, "none", "", "sw_power_cap|gpu_idle"],
            ["hw_slowdown", "gpu_idle|sw_power_cap"],
        ),
    ],
    ids=["none-named", "some-named"],
)
def test_clock_event_reasons_are_united_per_row(reasons: list[Any], expected: list[str]) -> None:
    """``ClockEventReasons`` of a row: its runs' reasons united and sorted, ``none`` when no run names one."""
    runs = []
    for c in range(2):
        for r in range(3):
            base = _run(c, r, [("a", "k", T, 10.0 + r, "ns", 0)], [("a", False)])
            cols = (CollectorValue("ClockEventReasons", "run", c, r, None, reasons[3 * c + r]),)
            runs.append(RunRecords(c, r, base.records, base.regions, cols))
    plan = PlanInfo(
        function="f", params=("n",), configs=((1,), (2,)), runs=3, warmup=0, metrics=(T,),
        backend="host", cache_control="all", clock_control="none", replay_mode="kernel",
    )  # fmt: skip
    frame = build_results(plan, runs, {}).to_dataframe()
    assert frame["ClockEventReasons"].tolist() == expected
