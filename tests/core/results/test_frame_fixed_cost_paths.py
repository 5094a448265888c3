"""The shortcuts of a small result's first ``to_dataframe()`` (issue 35, frame10) give what the general paths give.

Each shortcut is compared with the path it skips, bit for bit, on the committed results and on random inputs:

- a collector that reported every row: its numbers (:func:`_dense_numbers`) and its once-scope column
  (:func:`_once_column`) against ``_numeric``/``_first`` of its per-row column;
- the values' moments taken in the collector statistics' call against their own call;
- the geometric mean of a result of one region and one metric against the per-group loop;
- the region attributes read a name at a time against :meth:`RegionView.attribute`, and the executions with
  attributes and their ``launch_bound`` against the per-execution reading;
- the throttling verdict of each run against the per-key loops it replaced.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._results import dataframe
from nsightx._results.dataframe import (
    _column,
    _dense_numbers,
    _first,
    _geomeans_by_pair,
    _numeric,
    _once_column,
    _one_geomean,
)
from nsightx._results.groupstats import moments
from nsightx._results.table import _number, _numbers_list, table_of
from nsightx._results.table_flags import Groups
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_SM_CLOCK

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESULTS = sorted(
    [
        *FIXTURES.glob("frames/*.result.json"),
        *FIXTURES.glob("results/*/result.json"),
        *FIXTURES.glob("gpu-results/*.parquet"),
    ]
)


def _bits(a: Any) -> Any:
    """An array compared by dtype and bytes (NaN payloads and -0.0 included)."""
    a = np.asarray(a)
    return (a.dtype.str, a.shape, a.tobytes() if a.dtype != object else a.tolist())


# --- collectors that reported every row ---------------------------------------------------------------------------

_NUMBERS = st.one_of(
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 1.0, -0.0, 2**53, 2**53 + 1, True, "1.5", None]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NUMBERS, min_size=1, max_size=6), st.integers(1, 12), st.randoms(use_true_random=False))
def test_dense_numbers_are_those_of_the_per_row_column(values: list[Any], rows: int, rng: Any) -> None:
    values = [v for v in values if v is not None] or [1]
    codes = np.array(list(range(len(values))) + [rng.randrange(len(values)) for _ in range(rows)], dtype=np.int64)
    rng.shuffle(codes)
    quick = _dense_numbers(values, codes)
    if quick is None:
        return
    general = _numeric(_column(values, codes, dense=True))
    assert general is not None
    assert _bits(quick.full()) == _bits(general.full())
    assert quick.dtype == general.dtype
    rows_at = np.array([0, len(codes) - 1], dtype=np.int64)
    assert _bits(quick.rows(rows_at)) == _bits(general.rows(rows_at))


@pytest.mark.parametrize("value", ["s", 1, -(2**63), 2**63, 1.5, math.nan, -0.0, True, None, (1, 2)])
def test_a_once_value_is_the_first_of_its_column(value: Any) -> None:
    groups = Groups(np.array([0, 0, 1, 2, 2], dtype=np.int64), np.array([0, 2, 3], dtype=np.int64))
    quick = _once_column([value], groups.count)
    if quick is None:
        return
    assert _bits(quick) == _bits(_first(_column([value], np.zeros(5, dtype=np.int64), dense=True), groups))


# --- the values' moments with the collectors' -------------------------------------------------------------------


def _frames_without_joint(result: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The frame, and the frame with the values' moments in a call of their own."""
    frame = type(result).from_columns(result.data, result.columns).to_dataframe()
    with monkeypatch.context() as m:
        m.setattr(dataframe, "_numpy_values", lambda values, groups: None)
        m.setattr(dataframe, "_geomeans", dataframe._geomeans_by_pair)
        m.setattr(dataframe, "_dense_numbers", lambda values, codes: None)
        m.setattr(dataframe, "_once_column", lambda values, count: None)
        alone = type(result).from_columns(result.data, result.columns).to_dataframe()
    return frame, alone


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.parent.name + "/" + p.name)
def test_the_frame_is_that_of_the_general_paths(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = nsightx.load(path)
    if not result.columns.values.n:
        return
    frame, alone = _frames_without_joint(result, monkeypatch)
    pd.testing.assert_frame_equal(frame, alone, check_exact=True)
    for name in frame.columns:
        if frame[name].dtype.kind == "f":
            assert _bits(frame[name].to_numpy()) == _bits(alone[name].to_numpy()), name


def test_moments_of_a_column_do_not_depend_on_the_others() -> None:
    rng = np.random.default_rng(10)
    ids = np.repeat(np.arange(4, dtype=np.int64), 11)
    values = rng.lognormal(size=len(ids))
    others = rng.normal(size=(len(ids), 7)) * 1e3
    others[5, 2] = math.nan  # a collector without a value in one row: the masked loop for the matrix
    for ascending in (True, False):
        joint = moments(np.column_stack([values, others]), ids, 4, ascending)
        alone = moments(values[:, None], ids, 4, ascending)
        for field in ("count", "mean", "std", "minimum", "maximum"):
            assert _bits(getattr(joint, field)[:, :1]) == _bits(getattr(alone, field)), field


# --- geometric mean and region attributes ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=12))
def test_one_geomean_is_the_loops(avg: list[float]) -> None:
    n = len(avg)

    class _Table:
        annotation = np.zeros(n, dtype=np.int64)
        metric = np.zeros(n, dtype=np.int64)

    groups = Groups(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64))
    array = np.array(avg, dtype=np.float64)
    with np.errstate(all="ignore"):
        assert _bits(_one_geomean(array, n)) == _bits(_geomeans_by_pair(array, _Table, groups))


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.parent.name + "/" + p.name)
def test_attribute_lists_are_the_attributes(path: Path) -> None:
    regs = table_of(nsightx.load(path).data).regions
    names = ("device_ns", "span_ns", "launch_ns", "kernel_count", "launch_bound")
    for name, listed in zip(names, regs.attribute_lists(names), strict=True):
        assert _bits(np.array(listed, dtype=np.float64)) == _bits(regs.attribute(name)), name


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.sampled_from([np.float64(2.5), "1"])
        ),
        max_size=8,
    ),
    st.sampled_from(["mixed", "floats", "ints", "none"]),
)
def test_numbers_list_is_number_of_each(values: list[Any], kind: str) -> None:
    if kind != "mixed":  # the plain columns the shortcuts take
        make = {"floats": lambda v: float(len(str(v))), "ints": lambda v: len(str(v)), "none": lambda v: None}[kind]
        values = [make(v) for v in values]
    got = _numbers_list(list(values))
    want = [_number(v) for v in values]
    assert _bits(np.array(got, dtype=np.float64)) == _bits(np.array(want, dtype=np.float64))
    assert all(type(g) is float for g in got)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.parent.name + "/" + p.name)
def test_launch_bound_and_attribute_rows_are_the_general_ones(path: Path) -> None:
    regs = table_of(nsightx.load(path).data).regions
    attrs = regs._regions.attributes
    where, listed = regs._with_attributes
    if attrs is None:
        assert listed == []
        return
    assert where.tolist() == [i for i, a in enumerate(attrs) if len(a)]
    assert listed == [a for a in attrs if len(a)]
    own = [a.get("launch_bound") for a in attrs]
    want = [int(v) if isinstance(v, bool) else -1 for v in own]
    assert regs.launch_bound.dtype == np.int8
    assert regs.launch_bound.tolist() == want


# --- the throttling verdict ---------------------------------------------------------------------------------------


def _old_throttled_items(items: list[Any], clocks: dict[Any, float]) -> dict[Any, bool] | None:
    """``_throttled_items`` as it was at 74b192f (the per-key loops), where a clock read that is not a finite number
    is no clock (session 19: a NaN read made the median depend on the reads' order)."""
    order, clock_value, verdicts = dataframe._clock_reads(items, clocks)
    if not order:
        return None
    clock_of: dict[Any, float | None] = {}
    for key in order:
        verdict = verdicts.get(key, dataframe._NO_REASONS)
        value = clock_value.get(key)
        number = isinstance(value, int | float) and not isinstance(value, bool) and not verdict[0]
        number = number and math.isfinite(value)  # type: ignore[arg-type]
        clock_of[key] = float(value) if number else None  # type: ignore[arg-type]
    found = [c for c in clock_of.values() if c is not None]
    median = statistics.median(found) if found else None
    out: dict[Any, bool] = {}
    for key, c in clock_of.items():
        by_clock = median is not None and c is not None and c < dataframe.CLOCK_DROP_FRACTION * median
        out[key] = verdicts.get(key, dataframe._NO_REASONS)[1] or by_clock
    return out


_CLOCKS = st.one_of(
    st.sampled_from([1980, 1410, 2.0e3, 900.5, True, None, "fast", np.float64(1500.0), math.nan, math.inf]),
    st.floats(0, 3000),
)
_REASONS = st.sampled_from(["none", "gpu_idle", "sw_thermal_slowdown", "applications_clocks_setting|gpu_idle", None, 3])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 2), st.integers(0, 3), st.data()),
        max_size=16,
    )
)
def test_throttling_verdicts_are_the_old_loops(rows: list[Any]) -> None:
    items = [
        (MEASURED_SM_CLOCK, c, r, d.draw(_CLOCKS)) if is_clock else (CLOCK_EVENT_REASONS, c, r, d.draw(_REASONS))
        for is_clock, c, r, d in rows
    ]
    got_clocks: dict[Any, float] = {}
    want_clocks: dict[Any, float] = {}
    got = dataframe._throttled_items(items, got_clocks)
    want = _old_throttled_items(items, want_clocks)
    assert got == want
    assert got is None or list(got) == list(want)  # type: ignore[arg-type]
    assert all(type(v) is bool for v in (got or {}).values())
    assert got_clocks == want_clocks
