"""The collector paths of the aggregated frame made cheaper in issue 35's seventh round give what the old ones gave.

Each old path is kept here as the reference: the per-row numbers of a collector column (now read at the
representative rows only, :class:`_Numbers`), ``_column`` told that every value is used (``dense``), the classes
of groups that share their key sequence (one group size: the sorted keys as the matrix; the mix as one matmul),
the Welford/Kahan loop where every group is full, and ``run_clocks`` reading each reasons text once. They are
compared bit for bit on the committed fixtures and on random inputs, and the 10 x 100 x 100 frame with the nvml
plugin's values is compared with the frame of the old paths.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._results import dataframe, groupshare, groupstats
from nsightx._results.dataframe import _column, _Numbers, _numeric
from nsightx._results.flags import _number, run_clocks
from nsightx._results.groupshare import SharedGroups, shared_groups
from nsightx._results.groupstats import moments
from nsightx._results.store import dense_ids
from nsightx._results.table import MISSING, table_of
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


# --- the references: the paths as they were at d742049 ---------------------------------------------------------


def _old_numeric(col: Any) -> Any:
    """``_numeric`` before: the per-row array (or pandas Series), or None (also for NaN alone, as the pandas path
    below says: hunt19's fix of the float shortcut)."""
    kinds = set(map(type, col.items))
    if kinds <= {int, float, type(None)} and kinds & {int, float}:
        if kinds == {int} and -(2**63) <= min(col.items) and max(col.items) <= 2**63 - 1:
            return np.array(col.items, dtype=np.int64)[col.pos]
        if int not in kinds or all(abs(v) <= 2**53 for v in col.items if type(v) is int):
            floats = np.array([math.nan if v is None else v for v in col.items], dtype=np.float64)
            return None if np.isnan(floats).all() else floats[col.pos]
    numeric = pd.to_numeric(col.values, errors="coerce")
    converted = numeric.notna().to_numpy()
    if (col.values.notna().to_numpy() & ~converted).any() or not converted.any():
        return None
    return pd.Series(numeric.array.take(col.pos), dtype=numeric.dtype)


def _old_shared_groups(group_ids: Any, count: int, keys: Any) -> SharedGroups | None:
    """``shared_groups`` before (a gathered matrix per size, the mix as a sum of products)."""
    if count < 2:
        return None
    order = np.argsort(group_ids, kind="stable")
    size = np.bincount(group_ids, minlength=count)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    seq = keys[order]
    of_group = np.empty(count, dtype=np.int64)
    representative = []
    classes = 0
    for s in np.unique(size).tolist():
        members = np.flatnonzero(size == s)
        matrix = seq[start[members][:, None] + np.arange(s, dtype=np.int64)]
        mixed = (matrix.astype(np.uint64) * groupshare._MIX[:s]).sum(axis=1, dtype=np.uint64)
        _, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if not np.array_equal(matrix, matrix[first[inverse]]):
            _, first, inverse = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        of_group[members] = inverse + classes
        representative.append(members[first])
        classes += len(first)
    if classes == count:
        return None
    is_rep = np.zeros(count, dtype=np.bool_)
    is_rep[np.concatenate(representative)] = True
    rows = np.flatnonzero(is_rep[group_ids])
    return SharedGroups(rows, of_group[group_ids[rows]], of_group)


def _old_run_clocks(items: Any) -> dict[tuple[int, int], float]:
    """``run_clocks`` before (every reasons value split, every clock through ``_number``)."""
    clocks: dict[tuple[int, int], float] = {}
    idle: set[tuple[int, int]] = set()
    for name, config, run, value in items:
        if name == MEASURED_SM_CLOCK:
            number = _number(value)
            if math.isfinite(number):
                clocks[(config, run)] = number
        elif name == CLOCK_EVENT_REASONS and "gpu_idle" in str(value or "").split("|"):
            idle.add((config, run))
    return {k: c for k, c in clocks.items() if k not in idle}


# --- collector columns ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_collector_columns_are_the_old_ones(path: Path) -> None:
    table = table_of(nsightx.load(path).data)
    scopes = table.collectors[0]
    for name in scopes:
        found, codes, dense = table.collector_column(name)
        assert (found, codes.tolist()) == (table.collector_rows(name)[0], table.collector_rows(name)[1].tolist())
        if dense:  # what the flag promises: every value some row's, no row without one
            assert MISSING not in codes.tolist() and set(codes.tolist()) == set(range(len(found)))
        told, counted = _column(found, codes, dense), _column(found, codes)
        assert told.items == counted.items and _bits(told.pos) == _bits(counted.pos)
        numbers, old = _numeric(counted), _old_numeric(counted)
        assert (numbers is None) == (old is None)
        if numbers is not None:
            assert _bits(numbers.rows()) == _bits(np.asarray(old))
            rows = np.arange(0, len(codes), 3, dtype=np.int64)
            assert _bits(numbers.rows(rows)) == _bits(np.asarray(old)[rows])


_ITEMS = st.one_of(
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=5),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=5),
    st.lists(st.one_of(st.none(), st.integers(-3, 3), st.floats(), st.booleans(), st.text(max_size=2)), max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(items=_ITEMS, data=st.data())
def test_random_dense_columns_and_numbers_are_the_old_ones(items: list[Any], data: st.DataObject) -> None:
    """Rows that use every value (``dense``), more of them than the small path takes."""
    if not items:
        return
    extra = data.draw(st.lists(st.integers(0, len(items) - 1), max_size=20))
    codes = np.array([*range(len(items)), *extra] * (dataframe._SMALL // len(items) + 1), dtype=np.int64)
    codes = codes[np.random.default_rng(len(extra)).permutation(len(codes))]
    told, counted = _column(items, codes, True), _column(items, codes)
    assert [(type(v), repr(v)) for v in told.items] == [(type(v), repr(v)) for v in counted.items]
    assert _bits(told.pos) == _bits(counted.pos)
    numbers, old = _numeric(counted), _old_numeric(counted)
    assert (numbers is None) == (old is None)
    if numbers is not None:
        assert isinstance(numbers, _Numbers)
        rows = np.flatnonzero(codes == codes[0])
        assert _bits(numbers.rows()) == _bits(np.asarray(old))
        assert _bits(numbers.rows(rows)) == _bits(np.asarray(old)[rows])
        assert numbers.dtype == np.asarray(old).dtype


# --- groups that share their key sequence ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(80))
def test_shared_groups_are_the_old_ones(seed: int) -> None:
    """Groups of one size (run-major rows, as the run loop writes them) and of mixed sizes, keys of any sign."""
    rng = np.random.default_rng(seed)
    if seed % 2:  # configs x runs x regions, run-major: every group one size
        configs, runs, regions = (int(rng.integers(1, 5)), int(rng.integers(1, 9)), int(rng.integers(1, 7)))
        config = np.repeat(np.arange(configs), runs * regions)
        run = np.tile(np.repeat(np.arange(runs), regions), configs)
        region = np.tile(np.arange(regions), configs * runs)
        ids, _ = dense_ids(config * regions + region)
        keys, _ = dense_ids(config * runs + run)
        if seed % 4 == 1:
            keys = keys.copy()
            keys[rng.integers(0, len(keys))] = -int(rng.integers(1, 2**40))  # a differing, negative key
    else:
        n = int(rng.integers(2, 120))
        ids, _ = dense_ids(rng.integers(0, int(rng.integers(1, 9)), n))
        keys = rng.integers(0, int(rng.integers(1, 4)), n)
    count = int(ids.max()) + 1
    got, old = shared_groups(ids, count, keys), _old_shared_groups(ids, count, keys)
    assert (got is None) == (old is None)
    if got is not None and old is not None:
        assert _bits(got.rows) == _bits(old.rows)
        assert _bits(got.ids) == _bits(old.ids)
        assert _bits(got.of_group) == _bits(old.of_group)


# --- the moments' loop where every group is full ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_full_groups_loop_is_the_masked_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unordered groups of one size without NaN (the collectors' classes) take ``_full_steps``: same bits."""
    rng = np.random.default_rng(seed)
    count, size, width = int(rng.integers(1, 6)), int(rng.integers(1, 30)), int(rng.integers(1, 4))
    codes = rng.permutation(np.repeat(np.arange(count), size))
    values = rng.normal(2000.0, 30.0, (len(codes), width))
    if seed % 3 == 0:
        values[rng.integers(0, len(codes))] = np.inf  # the compensation turns NaN and is reset
    if seed % 5 == 0:
        values = np.round(values)  # clocks as ints
    calls: list[int] = []
    real = groupstats._full_steps
    monkeypatch.setattr(groupstats, "_full_steps", lambda *a: calls.append(1) or real(*a))
    got = moments(values, codes, count, ascending=False)
    assert calls == [1]
    monkeypatch.setattr(groupstats.np, "isnan", _nan_everywhere_once(np.isnan))  # force the masked loop
    masked = moments(values, codes, count, ascending=False)
    for field in ("count", "mean", "std", "minimum", "maximum"):
        assert _bits(getattr(got, field)) == _bits(getattr(masked, field)), field
    if bool((codes[1:] >= codes[:-1]).all()):
        return  # ascending codes: pandas takes reduceat's kernel, which the caller asks for with ascending=True
    frame = pd.DataFrame(values).groupby(codes, sort=True)
    assert _bits(got.mean) == _bits(frame.mean().to_numpy())
    assert _bits(got.std) == _bits(frame.std().to_numpy())


def _nan_everywhere_once(isnan: Any) -> Any:
    """``np.isnan`` that says the padded matrix holds a NaN (the first call on a 3-d array), else the real one."""
    state = {"done": False}

    def fake(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = isnan(a, *args, **kwargs)
        if not state["done"] and np.ndim(a) == 3:
            state["done"] = True
            return np.ones_like(out)
        return out

    return fake


# --- run_clocks ---------------------------------------------------------------------------------------------------

_REASONS = st.sampled_from(["none", "", "gpu_idle", "gpu_idle|sw_power_cap", "hw_slowdown", "x|gpu_idle"])
_CLOCK_ITEM = st.tuples(
    st.sampled_from([MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS, "other"]),
    st.integers(0, 2),
    st.integers(0, 3),
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), _REASONS, st.text(max_size=3)),
)


@settings(max_examples=400, deadline=None)
@given(items=st.lists(_CLOCK_ITEM, max_size=40))
def test_run_clocks_is_the_old_loop(items: list[tuple[str, int, int, Any]]) -> None:
    got, old = run_clocks(items), _old_run_clocks(items)
    assert list(got) == list(old)
    assert [(type(v), v.hex()) for v in got.values()] == [(type(v), v.hex()) for v in old.values()]


# --- the whole frame ----------------------------------------------------------------------------------------------


def test_benchmark_frame_with_collectors_is_the_old_paths_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 10 x 100 x 100 frame with the nvml plugin's values (issue 35's shape) against the old paths' frame."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    try:
        import data_path
    finally:
        sys.path.pop(0)
    result = data_path.build(10, 100, 100, True, seed=3)
    frame = type(result).from_columns(result.data, result.columns).to_dataframe()
    with monkeypatch.context() as m:
        m.setattr(dataframe, "_numeric", lambda col: _OldNumbers.of(_old_numeric(col)))
        m.setattr(dataframe, "_dense_numbers", lambda values, codes: None)  # every column through _numeric
        m.setattr(dataframe, "_once_column", lambda values, count: None)
        m.setattr(
            groupshare, "shared_groups", lambda ids, count, keys, first=None: _old_shared_groups(ids, count, keys)
        )
        import nsightx._results.table_flags as table_flags

        m.setattr(
            table_flags, "shared_groups", lambda ids, count, keys, first=None: _old_shared_groups(ids, count, keys)
        )
        m.setattr(table_flags, "run_clocks", _old_run_clocks)
        m.setattr(groupstats.np, "isnan", _nan_everywhere_always(np.isnan))
        old = type(result).from_columns(result.data, result.columns).to_dataframe()
    pd.testing.assert_frame_equal(frame, old, check_exact=True)
    for name in frame.columns:
        column = frame[name].to_numpy()
        if column.dtype.kind == "f":
            assert _bits(column) == _bits(old[name].to_numpy()), name


class _OldNumbers(_Numbers):
    """The old per-row column behind the new interface (every statistic reads it whole, as before)."""

    @classmethod
    def of(cls, per_row: Any) -> _OldNumbers | None:
        return None if per_row is None else cls(per_row, None)


def _nan_everywhere_always(isnan: Any) -> Any:
    """``np.isnan`` saying every padded (3-d) matrix holds a NaN: the masked loop always."""

    def fake(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = isnan(a, *args, **kwargs)
        return np.ones_like(out) if np.ndim(a) == 3 else out

    return fake
