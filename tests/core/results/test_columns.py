"""A result's columns: made from the runs once, the per-run values taken from the record columns when each region
has one record, and every object (``data.runs``, ``data.values``, ``records``) the same as the row-by-row code's.

``build_results`` takes the values of a result of one record per region (host, events, one kernel) straight from
the record columns (:func:`nsightx._results.store.one_per_region`); any other shape goes through
``combine_records``. Both must give the values ``combine_records`` gives, and the frames must not depend on which
way a result was made.
"""

from __future__ import annotations

import math
import operator

import numpy as np
import pandas as pd
import pytest
from _synthetic import host_plan

import nsightx
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo
from nsightx._results.store import ResultColumns, Text, one_per_region
from nsightx._results.transform import combine_records

METRIC = "host__time_duration.sum"
SILENT = nsightx.VerbosityLevel.SILENT


def _plan(runs: int, ignore: tuple[str, ...] = ()) -> PlanInfo:
    return host_plan([(1,), (2,)], runs, ignore_kernel_list=ignore)


def _runs(kernels: int = 1, fail: bool = False, spare_region: bool = False, swap: bool = False) -> list[RunRecords]:
    """Two configs x three runs, regions ``a`` and ``b`` (``b`` of config 1 run 2 fails when ``fail``)."""
    out = []
    for c in range(2):
        for r in range(3):
            records, regions = [], []
            for name in ("a", "b"):
                failed = fail and name == "b" and c == 1 and r == 2
                for k in range(kernels):
                    value = math.nan if failed else 100.0 * (c + 1) + r + k / 3 + (name == "b")
                    records.append(Record(name, c, r, f"kern{k}" if kernels > 1 else "region", METRIC, value, "ns", k))
                regions.append(RegionRun(name, c, r, 1000 + r, failed))
            if spare_region:
                regions.append(RegionRun("idle", c, r, 5))
            if swap:
                records.reverse()
            out.append(RunRecords(c, r, tuple(records), tuple(regions)))
    return out


def _build(runs: list[RunRecords], ignore: tuple[str, ...] = (), combine=None) -> ProfileResults:
    return build_results(_plan(3, ignore), runs, {"GPU": "none"}, combine=combine, created="2026-12-05T00:00:00+00:00")


def _values_of_combine_records(runs, ignore=(), combine=None):
    return tuple(combine_records(runs, (METRIC,), ignore_kernels=ignore, combine=combine))


def _equal(a, b) -> bool:
    """Equal objects, NaN values equal to NaN."""
    nan = [isinstance(x.value, float) and math.isnan(x.value) for x in a]
    fix = [x.model_copy(update={"value": 0.0}) if n else x for x, n in zip(a, nan, strict=True)]
    other = [x.model_copy(update={"value": 0.0}) if n else x for x, n in zip(b, nan, strict=True)]
    return len(a) == len(b) and fix == other


def test_one_record_per_region_takes_the_values_from_the_record_columns():
    runs = _runs()
    res = _build(runs)
    assert res._build is not None and res._data is None  # the fast way, and no RunValue made yet
    frame = res.to_dataframe()
    assert res._data is None
    assert res.data.values == _values_of_combine_records(runs)
    assert res.data.runs == tuple(runs)
    assert all(a is b for a, b in zip(res.data.runs, runs, strict=True))  # the call's own run objects
    pd.testing.assert_frame_equal(frame, ProfileResults(res.data).to_dataframe(), check_exact=True)
    pd.testing.assert_frame_equal(res.runs_dataframe(), ProfileResults(res.data).runs_dataframe(), check_exact=True)


@pytest.mark.parametrize(
    ("case", "make", "ignore", "combine"),
    [
        ("several kernels per region", lambda: _runs(kernels=2), (), operator.add),
        ("a failed region", lambda: _runs(fail=True), (), None),
        ("an ignored kernel", lambda: _runs(kernels=2), ("kern1",), None),
        ("a region without a record", lambda: _runs(spare_region=True), (), None),
        ("records in another order than the regions", lambda: _runs(swap=True), (), None),
    ],
)
def test_other_shapes_go_through_combine_records_with_the_same_values(case, make, ignore, combine):
    runs = make()
    res = _build(runs, ignore, combine)
    assert res._build is None, case  # not the fast way
    assert _equal(res.data.values, _values_of_combine_records(runs, ignore, combine)), case
    pd.testing.assert_frame_equal(
        res.to_dataframe(), ProfileResults(res.data.model_copy()).to_dataframe(), check_exact=True
    )


def test_a_region_met_twice_is_not_taken_as_one_record_per_region():
    base = _runs()
    twice = [RunRecords(0, 0, base[0].records + base[0].records[:1], base[0].regions + base[0].regions[:1])]
    cols = ResultColumns.of(twice, ())
    assert one_per_region(cols.records, cols.regions, ()) is None
    assert one_per_region(*(lambda c: (c.records, c.regions))(ResultColumns.of(base, ())), ()) is not None


def test_a_host_backend_call_takes_the_fast_way_and_keeps_every_value():
    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=3, warmup=0, backend="host", verbosity=SILENT)
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            sum(range(n))
        with nsightx.annotate("b"):
            sum(range(2 * n))

    res = f()
    assert res._build is not None
    data = res.data
    assert data.values == _values_of_combine_records(list(data.runs))
    again = ProfileResults(data.model_copy())
    pd.testing.assert_frame_equal(res.to_dataframe(), again.to_dataframe(), check_exact=True)


def test_text_columns_give_back_their_strings():
    text = Text.of(iter(["x", None, "y", "x"]), 4)
    assert text.strings() == ["x", None, "y", "x"]
    assert text.names == ["x", None, "y"] and text.codes.tolist() == [0, 1, 2, 0]
    assert text.codes.dtype == np.int8  # the narrowest type that fits three names (issue 35: memory)
